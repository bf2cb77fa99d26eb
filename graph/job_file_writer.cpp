#include "graph/job_file_writer.hpp"

#include <charconv>
#include <sstream>

#include <toml++/toml.h>

namespace snapflow {

namespace {

std::string describe(const job_vertex& v) { return "vertex '" + v.uid + "'"; }

toml::table job_table(const job_graph& g) {
  toml::table job;
  job.insert("name", g.name.empty() ? std::string("snapflow job") : g.name);
  if (g.program) {
    if (!g.program->name.empty()) job.insert("program", g.program->name);
    job.insert("program_fingerprint", g.program->fingerprint);
  }
  return job;
}

toml::table checkpointing_table(const checkpoint_config& c) {
  toml::table t;
  if (c.interval) t.insert("interval_ms", static_cast<std::int64_t>(c.interval->count()));
  t.insert("mode", std::string(to_string(c.mode)));
  t.insert("timeout_ms", static_cast<std::int64_t>(c.timeout.count()));
  t.insert("min_pause_ms", static_cast<std::int64_t>(c.min_pause.count()));
  t.insert("max_concurrent", static_cast<std::int64_t>(c.max_concurrent));
  t.insert("tolerable_failures", static_cast<std::int64_t>(c.tolerable_failures));
  t.insert("retained", static_cast<std::int64_t>(c.retained));
  t.insert("retention", std::string(to_string(c.retention)));
  t.insert("unaligned", c.unaligned);
  if (c.unaligned)
    t.insert("aligned_checkpoint_timeout_ms",
             static_cast<std::int64_t>(c.aligned_checkpoint_timeout.count()));
  if (c.max_in_flight_bytes != 0) t.insert("max_in_flight_bytes", c.max_in_flight_bytes);
  if (c.buffer_debloat) {
    t.insert("buffer_debloat", true);
    t.insert("buffer_debloat_target_ms",
             static_cast<std::int64_t>(c.buffer_debloat_target.count()));
  }
  if (!c.checkpoint_dir.empty()) t.insert("checkpoint_dir", c.checkpoint_dir);
  if (!c.savepoint_dir.empty()) t.insert("savepoint_dir", c.savepoint_dir);
  t.insert("stats_history_size", static_cast<std::int64_t>(c.stats_history_size));
  t.insert("state_backend", c.state_backend);
  t.insert("inline_state_max_bytes", static_cast<std::int64_t>(c.inline_state_max_bytes));
  t.insert("incremental", c.incremental);
  return t;
}

toml::table restart_table(const restart_strategy_config& c) {
  toml::table t;
  t.insert("strategy", std::string(to_string(c.type)));
  // Only the settings the strategy uses: a job file refuses the others.
  auto put = [&](std::string_view key, auto value) {
    if (restart_setting_applies(c.type, key)) t.insert(key, value);
  };
  put("max_attempts", static_cast<std::int64_t>(c.max_attempts));
  put("delay_ms", c.delay_ms);
  put("initial_backoff_ms", c.initial_backoff_ms);
  put("max_backoff_ms", c.max_backoff_ms);
  put("backoff_multiplier", c.backoff_multiplier);
  put("reset_backoff_after_ms", c.reset_backoff_after_ms);
  put("max_failures_per_interval", static_cast<std::int64_t>(c.max_failures_per_interval));
  put("failure_rate_interval_ms", c.failure_rate_interval_ms);
  return t;
}

// A parameter typed as its kind declares it (the job file parser checks the TOML type); those
// of kinds only the workers know travel as strings, which is how they are stored anyway.
result<void> insert_param(toml::table& params, const job_vertex& v, const operator_kind* kind,
                          const std::string& name, const std::string& value) {
  const param_spec* spec = kind != nullptr ? kind->find_param(name) : nullptr;
  if (spec == nullptr || spec->type == param_type::string) {
    params.insert(name, value);
    return success();
  }
  if (spec->type == param_type::boolean) {
    if (value != "true" && value != "false")
      return error{describe(v) + ": parameter '" + name + "' is a boolean, not '" + value + "'"};
    params.insert(name, value == "true");
    return success();
  }
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc{} || end != value.data() + value.size())
    return error{describe(v) + ": parameter '" + name + "' is an integer, not '" + value + "'"};
  params.insert(name, n);
  return success();
}

result<toml::table> operator_table(const job_graph& g, const job_vertex& v,
                                   const operator_registry& registry) {
  if (v.uid.empty()) return error{"vertex " + std::to_string(v.id) + " has no uid"};
  toml::table op;
  op.insert("uid", v.uid);
  op.insert("kind", v.kind);
  if (v.custom_role) op.insert("role", std::string(to_string(*v.custom_role)));
  if (!v.name.empty()) op.insert("name", v.name);
  op.insert("parallelism", static_cast<std::int64_t>(v.parallelism));
  op.insert("max_parallelism", static_cast<std::int64_t>(v.max_parallelism));
  const auto inputs = g.inputs_of(v.id);
  if (!inputs.empty()) {
    toml::array uids;
    for (const job_edge* e : inputs) {
      const job_vertex* source = g.find_vertex(e->source);
      if (source == nullptr) return error{describe(v) + ": an input names no vertex"};
      uids.push_back(source->uid);
      if (e->part != inputs.front()->part)
        return error{describe(v) + ": its inputs are partitioned differently (" +
                     std::string(to_string(inputs.front()->part)) + ", " +
                     std::string(to_string(e->part)) +
                     "), which a job file cannot say (one partition per operator)"};
    }
    op.insert("inputs", std::move(uids));
    op.insert("partition", std::string(to_string(inputs.front()->part)));
  }
  if (!v.params.empty()) {
    toml::table params;
    const operator_kind* kind = v.custom_role ? nullptr : registry.find(v.kind);
    for (const auto& [name, value] : v.params)
      if (auto put = insert_param(params, v, kind, name, value); !put) return put.err();
    op.insert("params", std::move(params));
  }
  return op;
}

}  // namespace

result<std::string> write_job_file(const job_graph& graph, const operator_registry& registry) {
  toml::table root;
  root.insert("job", job_table(graph));
  if (graph.checkpointing) root.insert("checkpointing", checkpointing_table(graph.checkpointing->config));
  if (graph.restart) root.insert("restart", restart_table(*graph.restart));
  toml::array operators;
  for (const auto& v : graph.vertices) {
    auto op = operator_table(graph, v, registry);
    if (!op) return op.err();
    operators.push_back(std::move(*op));
  }
  root.insert("operator", std::move(operators));
  std::ostringstream out;
  out << root << "\n";
  return out.str();
}

}  // namespace snapflow
