#include "engine/runtime/runtime_task_executor.hpp"

#include <cassert>
#include <sstream>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/paths/job_paths.hpp"
#include "graph/job_graph_codec.hpp"

namespace snapflow {

namespace {
// Ended tasks whose final counters wait for a heartbeat; more only if heartbeats stopped.
constexpr std::size_t max_ended_io = 4096;
}  // namespace

// A task's responder and status listener: forwards to the worker's listener with the job id
// the task-level calls leave out. Both only queue (task_executor_listener never blocks).
class runtime_task_executor::reporter final : public checkpoint_responder,
                                              public task_status_listener {
 public:
  reporter(std::shared_ptr<task_executor_listener> listener, job_id job)
      : listener_(std::move(listener)), job_(std::move(job)) {}

  void acknowledge(checkpoint_ack ack) override { listener_->acknowledge_checkpoint(ack); }
  void decline(checkpoint_decline decline) override { listener_->decline_checkpoint(decline); }
  void on_task_state(const execution_attempt_id& attempt, execution_state state,
                     const std::string& message) override {
    listener_->task_state_changed(job_, attempt, state, message);
  }
  void on_source_exhausted(const execution_attempt_id& attempt,
                           checkpoint_id last_barrier) override {
    listener_->source_exhausted(job_, attempt, last_barrier);
  }

 private:
  std::shared_ptr<task_executor_listener> listener_;
  job_id job_;
};

runtime_task_executor::runtime_task_executor(std::shared_ptr<task_executor_listener> listener,
                                             std::shared_ptr<channel_factory> channels,
                                             runtime_task_executor_options options)
    : listener_(std::move(listener)), channels_(std::move(channels)), options_(options),
      data_roots_(make_data_roots(options_.data_roots)) {
  assert(listener_);
  assert(channels_);
  assert(options_.batch_size >= 1);
  assert(options_.snapshot_threads >= 1);
  if (!options_.operators)
    options_.operators = std::shared_ptr<const operator_factory>(&operator_factory::builtin(),
                                                                 [](const operator_factory*) {});
  if (!options_.registry)
    options_.registry = std::shared_ptr<const operator_registry>(&operator_registry::builtin(),
                                                                 [](const operator_registry*) {});
  if (options_.local_state_dir.empty()) {
    own_local_dir_ = std::make_unique<scratch_folder>("snapflow-worker");
    options_.local_state_dir = own_local_dir_->path();
  }
  writer_ = std::make_shared<snapshot_writer>(options_.snapshot_threads);
}

runtime_task_executor::~runtime_task_executor() {
  for (auto& [_, task] : tasks_) task->cancel();
  tasks_.clear();  // joins
  writer_.reset();  // runs the snapshots still queued, which may read a task's local state
}

std::string runtime_task_executor::data_endpoint() const { return channels_->data_endpoint(); }

std::size_t runtime_task_executor::running_tasks() const {
  std::size_t n = 0;
  for (const auto& [_, task] : tasks_)
    if (!task->done()) ++n;
  return n;
}

void runtime_task_executor::fail_deploy(const task_deployment_descriptor& d,
                                        const std::string& why) {
  spdlog::error("cannot deploy {} of job {}: {}", [&] {
    std::ostringstream os;
    os << d.attempt;
    return os.str();
  }(), d.job, why);
  listener_->task_state_changed(d.job, d.attempt, execution_state::failed, why);
}

result<channel_peer> runtime_task_executor::peer_of(const task_deployment_descriptor& d,
                                                    const job_vertex& vertex,
                                                    std::uint32_t index) const {
  const subtask_id subtask{vertex.id, index};
  auto endpoint = d.subtask_endpoints.find(subtask);
  if (endpoint == d.subtask_endpoints.end() || endpoint->second.empty())
    return error{"no data endpoint for a subtask of vertex '" + vertex.name + "'"};
  channel_peer peer{endpoint->second};
  if (auto key = d.subtask_public_keys.find(subtask); key != d.subtask_public_keys.end())
    peer.public_key = key->second;
  // A mismatch (CURVE on one side only) fails the deployment here, saying so, rather than
  // leaving a channel whose handshake can never succeed.
  if (auto why = channels_->refuse_peer(peer))
    return error{"no data channel with subtask " + std::to_string(index) + " of vertex '" +
                 vertex.name + "' at " + peer.endpoint + ": " + *why};
  return peer;
}

void runtime_task_executor::deploy(const task_deployment_descriptor& d) {
  reap();
  if (tasks_.contains({d.job, d.attempt})) return;  // a resent deployment
  auto graph = decode_job_graph(d.job_graph_bytes);
  if (!graph) return fail_deploy(d, "bad job graph: " + graph.err().message);
  const job_graph& job = *graph;
  const job_vertex* v = job.find_vertex(d.attempt.subtask.vertex);
  if (v == nullptr) return fail_deploy(d, "the job graph has no vertex of this subtask");
  const std::uint32_t index = d.attempt.subtask.index;
  if (index >= v->parallelism) return fail_deploy(d, "subtask index beyond the parallelism");

  stream_task_config c;
  c.job = d.job;
  c.attempt = d.attempt;
  c.vertex = *v;
  // The coordinator checked the paths against this worker's roots at submission, if it knew
  // them; this is the check that counts (an older coordinator, a root changed since).
  if (!data_roots_.empty()) {
    if (auto why = confine_vertex_paths(c.vertex, *options_.registry, data_roots_, true))
      return fail_deploy(d, "refused by this worker: " + *why);
  }
  bool has_inputs = false;
  bool all_inputs_hashed = true;
  for (const job_edge& edge : job.edges)
    if (edge.target == v->id) {
      has_inputs = true;
      all_inputs_hashed = all_inputs_hashed && edge.part == partitioning::hash;
    }
  // The worker's own registry first; then the role the job file declared for a kind the
  // coordinator did not know; failing both, a guess from the edges (older coordinators).
  if (const operator_kind* kind = options_.registry->find(v->kind))
    c.role = kind->role;
  else if (v->custom_role)
    c.role = *v->custom_role;
  else if (!has_inputs)
    c.role = operator_role::source;
  else
    c.role = all_inputs_hashed ? operator_role::keyed : operator_role::transform;
  if ((c.role == operator_role::source) == has_inputs)
    return fail_deploy(d, "operator kind '" + v->kind + "' and the job's edges disagree on "
                          "whether it is a source");

  // Jobs restart as a whole, so every subtask of this deployment has this attempt number.
  const std::uint32_t attempt = d.attempt.attempt;
  std::uint32_t input_gate = 0;
  for (const job_edge& edge : job.edges) {
    if (edge.target == v->id) {
      const job_vertex* from = job.find_vertex(edge.source);
      if (from == nullptr) return fail_deploy(d, "an edge names an unknown vertex");
      for (std::uint32_t j = 0; j < from->parallelism; ++j) {
        if (edge.part == partitioning::forward && j != index) continue;
        auto peer = peer_of(d, *from, j);
        if (!peer) return fail_deploy(d, peer.err().message);
        c.inputs.push_back(channels_->open_input(
            channel_key{d.job, edge.source, j, v->id, index, attempt}, *peer));
        c.input_addresses.push_back({input_gate, j});
      }
      ++input_gate;
      c.input_gates.push_back(edge.part);
    }
    if (edge.source == v->id) {
      const job_vertex* to = job.find_vertex(edge.target);
      if (to == nullptr) return fail_deploy(d, "an edge names an unknown vertex");
      output_edge out;
      out.part = edge.part;
      out.target_max_parallelism = to->max_parallelism;
      for (std::uint32_t k = 0; k < to->parallelism; ++k) {
        if (edge.part == partitioning::forward && k != index) continue;
        auto peer = peer_of(d, *to, k);
        if (!peer) return fail_deploy(d, peer.err().message);
        out.channels.push_back(
            channels_->open_output(channel_key{d.job, v->id, index, to->id, k, attempt}, *peer));
      }
      c.outputs.push_back(std::move(out));
    }
  }
  c.mode = job.checkpointing ? job.checkpointing->config.mode : checkpointing_mode::exactly_once;
  c.unaligned_checkpoints = job.checkpointing && job.checkpointing->config.unaligned;
  c.final_checkpoint = job.checkpointing.has_value();
  if (job.checkpointing) {
    c.inline_state_max_bytes =
        static_cast<std::size_t>(job.checkpointing->config.inline_state_max_bytes);
    // The job graph came over the wire: a name this worker does not know fails the deployment.
    auto backend = parse_state_backend(job.checkpointing->config.state_backend);
    if (!backend) return fail_deploy(d, backend.err().message);
    c.state_backend = *backend;
    c.incremental_checkpoints = job.checkpointing->config.incremental;
    c.max_in_flight_bytes =
        static_cast<std::uint64_t>(job.checkpointing->config.max_in_flight_bytes);
    c.buffer_debloat = job.checkpointing->config.buffer_debloat;
    c.buffer_debloat_target = job.checkpointing->config.buffer_debloat_target;
  }
  c.local_state_dir = options_.local_state_dir;
  c.rocksdb_block_cache_bytes = options_.rocksdb_block_cache_bytes;
  c.restore_checkpoint = d.restore_checkpoint_id;
  c.restore_states = d.restore_states;
  c.batch_size = options_.batch_size;
  c.operators = options_.operators;
  auto r = std::make_shared<reporter>(listener_, d.job);
  c.responder = r;
  c.listener = r;
  c.writer = writer_;
  auto task = std::make_unique<stream_task>(std::move(c));
  task->start();
  tasks_.emplace(task_key{d.job, d.attempt}, std::move(task));
}

stream_task* runtime_task_executor::find(const job_id& job, const execution_attempt_id& attempt) {
  auto it = tasks_.find({job, attempt});
  return it == tasks_.end() ? nullptr : it->second.get();
}

void runtime_task_executor::reap() {
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (it->second->done()) {
      // Its last counters still go out with the next heartbeat.
      if (ended_io_.size() >= max_ended_io) ended_io_.erase(ended_io_.begin());
      ended_io_.push_back({it->first.first, it->first.second, it->second->records_in(),
                           it->second->records_out(), it->second->take_notified(), 0, 0});
      it = tasks_.erase(it);  // joins a thread that has ended
    } else {
      ++it;
    }
  }
}

std::vector<task_io_counters> runtime_task_executor::take_io_counters() {
  std::vector<task_io_counters> out = std::exchange(ended_io_, {});
  out.reserve(out.size() + tasks_.size());
  for (const auto& [key, task] : tasks_)
    out.push_back({key.first, key.second, task->records_in(), task->records_out(),
                   task->take_notified(), task->in_flight_bytes_bound(),
                   task->buffered_input_bytes()});
  return out;
}

void runtime_task_executor::cancel(const job_id& job, const execution_attempt_id& attempt) {
  if (stream_task* t = find(job, attempt)) t->cancel();
  reap();
}

void runtime_task_executor::trigger_checkpoint(const job_id& job,
                                               const execution_attempt_id& attempt,
                                               checkpoint_id id, std::int64_t timestamp_us,
                                               const checkpoint_options& options) {
  if (stream_task* t = find(job, attempt)) t->trigger_checkpoint(id, timestamp_us, options);
}

void runtime_task_executor::notify_checkpoint_complete(const job_id& job,
                                                       const execution_attempt_id& attempt,
                                                       checkpoint_id id) {
  // The coordinator's timestamp does not travel; the tasks do not use it.
  if (stream_task* t = find(job, attempt)) t->notify_checkpoint_complete(id, 0);
}

void runtime_task_executor::notify_checkpoint_aborted(const job_id& job,
                                                      const execution_attempt_id& attempt,
                                                      checkpoint_id id,
                                                      checkpoint_id latest_completed) {
  if (stream_task* t = find(job, attempt)) t->notify_checkpoint_aborted(id, latest_completed);
}

void runtime_task_executor::finish(const job_id& job, const execution_attempt_id& attempt) {
  if (stream_task* t = find(job, attempt)) t->finish();
}

void runtime_task_executor::cancel_all() {
  for (auto& [_, task] : tasks_) task->cancel();
  reap();
}

}  // namespace snapflow
