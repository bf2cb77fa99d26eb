#include "graph/stream_environment.hpp"

namespace snapflow {

namespace {
void require_parallelism(std::string_view setting, std::uint32_t value) {
  if (value < 1 || value > job_graph::max_parallelism_limit)
    throw invalid_config(std::string(setting) + " must be between 1 and 32768 (got " +
                         std::to_string(value) + ")");
}
}  // namespace

data_stream data_stream::then(std::string kind, std::string name, operator_params params,
                              std::shared_ptr<const user_function> fn,
                              std::optional<partitioning> part) {
  stream_node& node = env_->graph_.add_node(std::move(kind), std::move(name));
  node.params = std::move(params);
  node.function = std::move(fn);
  vertex_id id = node.id;
  env_->graph_.add_edge(id_, id, part ? part : next_part_);
  return data_stream(env_, id, std::nullopt);
}

data_stream data_stream::map(std::string kind, operator_params params) {
  auto name = kind;
  return then(std::move(kind), std::move(name), std::move(params), nullptr, std::nullopt);
}
data_stream data_stream::assign_timestamps(timestamp_assigner assigner, std::string name) {
  return then("user_timestamps", std::move(name), {},
              std::make_shared<const user_function>(std::move(assigner)), std::nullopt);
}

data_stream data_stream::map(map_function fn, std::string name) {
  return then("user_map", std::move(name), {},
              std::make_shared<const user_function>(std::move(fn)), std::nullopt);
}
data_stream data_stream::filter(std::string kind, operator_params params) {
  return map(std::move(kind), std::move(params));
}
data_stream data_stream::filter(filter_function fn, std::string name) {
  return then("user_filter", std::move(name), {},
              std::make_shared<const user_function>(std::move(fn)), std::nullopt);
}
data_stream data_stream::flat_map(std::string kind, operator_params params) {
  return map(std::move(kind), std::move(params));
}
data_stream data_stream::flat_map(flat_map_function fn, std::string name) {
  return then("user_flat_map", std::move(name), {},
              std::make_shared<const user_function>(std::move(fn)), std::nullopt);
}

data_stream data_stream::process(stateful_process_function fn, std::string name) {
  return then("user_stateful_process", std::move(name), {},
              std::make_shared<const user_function>(std::move(fn)), std::nullopt);
}

keyed_stream data_stream::key_by() { return keyed_stream(*this); }

keyed_stream data_stream::key_by(key_function fn, std::string name) {
  // The key selector runs where the records are (same parallelism, forward), then the keyed
  // operator reads the rewritten key through a hash edge.
  data_stream keyed = then("user_key_by", std::move(name), {},
                           std::make_shared<const user_function>(std::move(fn)),
                           partitioning::forward);
  const stream_node& input = env_->graph_.node(id_);
  stream_node& selector = env_->graph_.node(keyed.id_);
  selector.parallelism = input.parallelism;
  selector.max_parallelism = input.max_parallelism;
  return keyed_stream(keyed);
}

data_stream data_stream::rebalance() const { return data_stream(env_, id_, partitioning::rebalance); }
data_stream data_stream::broadcast() const { return data_stream(env_, id_, partitioning::broadcast); }
data_stream data_stream::forward() const { return data_stream(env_, id_, partitioning::forward); }

data_stream data_stream::add_sink(std::string kind, operator_params params) {
  return map(std::move(kind), std::move(params));
}

data_stream& data_stream::uid(std::string uid) {
  if (uid.empty()) throw invalid_config("operator uid must not be blank");
  for (const auto& n : env_->graph_.nodes())
    if (n.id != id_ && n.uid == uid) throw invalid_config("operator uid '" + uid + "' is already used");
  env_->graph_.node(id_).uid = std::move(uid);
  return *this;
}

data_stream& data_stream::custom_role(operator_role role) {
  env_->graph_.node(id_).custom_role = role;
  return *this;
}

data_stream& data_stream::name(std::string name) {
  env_->graph_.node(id_).name = std::move(name);
  return *this;
}

data_stream& data_stream::set_parallelism(std::uint32_t parallelism) {
  require_parallelism("operator parallelism", parallelism);
  env_->graph_.node(id_).parallelism = parallelism;
  return *this;
}

data_stream& data_stream::set_max_parallelism(std::uint32_t max_parallelism) {
  require_parallelism("operator max_parallelism", max_parallelism);
  env_->graph_.node(id_).max_parallelism = max_parallelism;
  return *this;
}

data_stream keyed_stream::process(std::string kind, operator_params params) {
  auto name = kind;
  return input_.then(std::move(kind), std::move(name), std::move(params), nullptr,
                     partitioning::hash);
}

data_stream keyed_stream::process(process_function fn, std::string name) {
  return input_.then("user_process", std::move(name), {},
                     std::make_shared<const user_function>(std::move(fn)), partitioning::hash);
}

data_stream keyed_stream::process(timed_process_function fn, std::string name) {
  return input_.then("user_process", std::move(name), {},
                     std::make_shared<const user_function>(std::move(fn)), partitioning::hash);
}

stream_environment& stream_environment::set_job_name(std::string name) {
  if (name.empty()) throw invalid_config("job name must not be blank");
  graph_.job_name = std::move(name);
  return *this;
}

stream_environment& stream_environment::set_key_selector_fusion(bool on) {
  graph_.fuse_key_selectors = on;
  return *this;
}

stream_environment& stream_environment::set_parallelism(std::uint32_t parallelism) {
  require_parallelism("parallelism", parallelism);
  graph_.default_parallelism = parallelism;
  return *this;
}

stream_environment& stream_environment::set_max_parallelism(std::uint32_t max_parallelism) {
  require_parallelism("max_parallelism", max_parallelism);
  graph_.default_max_parallelism = max_parallelism;
  return *this;
}

data_stream stream_environment::add_source(std::string kind, operator_params params) {
  stream_node& node = graph_.add_node(kind, kind);
  node.params = std::move(params);
  return data_stream(this, node.id, std::nullopt);
}

template <typename Change>
stream_environment& stream_environment::update_config(Change change) {
  checkpoint_config next = config_;
  change(next);
  next.check();
  config_ = std::move(next);
  if (graph_.checkpointing) graph_.checkpointing = config_;
  return *this;
}

stream_environment& stream_environment::enable_checkpointing(std::chrono::milliseconds interval,
                                                             checkpointing_mode mode) {
  update_config([&](checkpoint_config& c) {
    c.interval = interval;
    c.mode = mode;
  });
  graph_.checkpointing = config_;
  return *this;
}

stream_environment& stream_environment::set_checkpoint_timeout(std::chrono::milliseconds timeout) {
  return update_config([&](checkpoint_config& c) { c.timeout = timeout; });
}
stream_environment& stream_environment::set_min_pause_between_checkpoints(
    std::chrono::milliseconds pause) {
  return update_config([&](checkpoint_config& c) { c.min_pause = pause; });
}
stream_environment& stream_environment::set_max_concurrent_checkpoints(std::int32_t n) {
  return update_config([&](checkpoint_config& c) { c.max_concurrent = n; });
}
stream_environment& stream_environment::set_tolerable_checkpoint_failures(std::int32_t n) {
  return update_config([&](checkpoint_config& c) { c.tolerable_failures = n; });
}
stream_environment& stream_environment::set_retained_checkpoints(std::int32_t n) {
  return update_config([&](checkpoint_config& c) { c.retained = n; });
}
stream_environment& stream_environment::set_externalized_retention(externalized_retention r) {
  return update_config([&](checkpoint_config& c) { c.retention = r; });
}
stream_environment& stream_environment::enable_unaligned_checkpoints(bool enabled) {
  return update_config([&](checkpoint_config& c) { c.unaligned = enabled; });
}

stream_environment& stream_environment::set_aligned_checkpoint_timeout(
    std::chrono::milliseconds timeout) {
  return update_config([&](checkpoint_config& c) { c.aligned_checkpoint_timeout = timeout; });
}

stream_environment& stream_environment::set_max_in_flight_bytes(std::int64_t bytes) {
  return update_config([&](checkpoint_config& c) { c.max_in_flight_bytes = bytes; });
}

stream_environment& stream_environment::enable_buffer_debloat(std::chrono::milliseconds target) {
  return update_config([&](checkpoint_config& c) {
    c.buffer_debloat = true;
    c.buffer_debloat_target = target;
  });
}
stream_environment& stream_environment::set_restart_strategy(
    const restart_strategy_config& restart) {
  if (auto error = restart.validate()) throw invalid_config(*error);
  graph_.restart = restart;
  return *this;
}
stream_environment& stream_environment::set_checkpoint_dir(std::string dir) {
  return update_config([&](checkpoint_config& c) { c.checkpoint_dir = std::move(dir); });
}
stream_environment& stream_environment::set_savepoint_dir(std::string dir) {
  return update_config([&](checkpoint_config& c) { c.savepoint_dir = std::move(dir); });
}
stream_environment& stream_environment::set_checkpoint_stats_history_size(std::int32_t size) {
  return update_config([&](checkpoint_config& c) { c.stats_history_size = size; });
}
stream_environment& stream_environment::set_state_backend(std::string name) {
  return update_config([&](checkpoint_config& c) { c.state_backend = std::move(name); });
}
stream_environment& stream_environment::enable_incremental_checkpoints(bool enabled) {
  return update_config([&](checkpoint_config& c) { c.incremental = enabled; });
}
stream_environment& stream_environment::set_inline_state_max_bytes(std::int32_t bytes) {
  return update_config([&](checkpoint_config& c) { c.inline_state_max_bytes = bytes; });
}

job_graph stream_environment::build_job_graph(const operator_registry& registry) const {
  return graph_.to_job_graph(registry);
}

}  // namespace snapflow
