#include "engine/jobmaster/execution_graph.hpp"

#include <set>

#include <asio/post.hpp>

#include "engine/checkpoint/checkpoint_coordinator_deactivator.hpp"

namespace snapflow {

execution_graph::execution_graph(job_graph job, asio::any_io_executor job_master_executor,
                                 std::uint32_t first_attempt)
    : job_(std::move(job)), job_master_executor_(std::move(job_master_executor)) {
  vertices_.reserve(job_.vertices.size());
  for (const auto& v : job_.vertices)
    vertices_.push_back(std::make_unique<execution_job_vertex>(v, first_attempt));
}

result<std::shared_ptr<execution_graph>> build_execution_graph(
    const job_graph& job, asio::any_io_executor job_master_executor, std::uint32_t first_attempt) {
  if (job.vertices.empty()) return error{"job '" + job.name + "' has no vertices"};
  std::set<vertex_id> ids;
  for (const auto& v : job.vertices) {
    if (!ids.insert(v.id).second) return error{"duplicate vertex id " + std::to_string(v.id)};
    if (v.parallelism < 1 || v.parallelism > job_graph::max_parallelism_limit)
      return error{"vertex '" + v.uid + "' has parallelism " + std::to_string(v.parallelism) +
                   "; it must be between 1 and 32768"};
  }
  for (const auto& e : job.edges)
    if (!ids.contains(e.source) || !ids.contains(e.target))
      return error{"edge " + std::to_string(e.source) + "->" + std::to_string(e.target) +
                   " names an unknown vertex"};
  return std::shared_ptr<execution_graph>(
      new execution_graph(job, std::move(job_master_executor), first_attempt));
}

bool execution_graph::transition_to(job_status status) {
  return status_.transition(status, coordinator_clock::now_us() / 1000);
}

bool execution_graph::transition_to(job_status expected, job_status status) {
  return status_.transition(expected, status, coordinator_clock::now_us() / 1000);
}

void execution_graph::add_job_status_listener(job_status_listener listener) {
  status_.add_listener(std::move(listener));
}

execution_job_vertex* execution_graph::find_job_vertex(vertex_id id) {
  for (auto& v : vertices_)
    if (v->id() == id) return v.get();
  return nullptr;
}

const execution_job_vertex* execution_graph::find_job_vertex(vertex_id id) const {
  for (const auto& v : vertices_)
    if (v->id() == id) return v.get();
  return nullptr;
}

std::vector<execution_vertex*> execution_graph::all_execution_vertices() const {
  std::vector<execution_vertex*> out;
  for (const auto& v : vertices_)
    for (const auto& s : v->subtasks()) out.push_back(s.get());
  return out;
}

std::size_t execution_graph::num_subtasks() const {
  std::size_t n = 0;
  for (const auto& v : vertices_) n += v->parallelism();
  return n;
}

result<std::vector<execution_vertex*>> execution_graph::resolve(const std::vector<vertex_id>& ids,
                                                                std::string_view role) {
  std::vector<execution_vertex*> out;
  for (vertex_id id : ids) {
    execution_job_vertex* v = find_job_vertex(id);
    if (v == nullptr)
      return error{"checkpoint settings: vertex " + std::to_string(id) + " to " +
                   std::string(role) + " is not part of job '" + job_.name + "'"};
    for (const auto& s : v->subtasks()) out.push_back(s.get());
  }
  return out;
}

result<void> execution_graph::enable_checkpointing(
    const checkpoint_config& config, const std::vector<vertex_id>& vertices_to_trigger,
    const std::vector<vertex_id>& vertices_to_acknowledge,
    const std::vector<vertex_id>& vertices_to_confirm,
    std::vector<std::shared_ptr<master_hook>> master_hooks,
    std::shared_ptr<checkpoint_id_counter> id_counter,
    std::shared_ptr<completed_checkpoint_store> store, std::string state_backend_name,
    std::shared_ptr<checkpoint_stats_tracker> stats, checkpoint_runtime runtime) {
  // Every check comes first: a refused call leaves the graph exactly as it was.
  if (status_.current() != job_status::created)
    return error{"enable_checkpointing needs job status CREATED; job '" + job_.name + "' is " +
                 std::string(to_string(status_.current()))};
  if (coordinator_)
    return error{"checkpointing is already enabled for job '" + job_.name + "'"};
  if (auto invalid = config.validate()) return error{*invalid};
  if (!id_counter || !store || !stats || !runtime.gateway)
    return error{"enable_checkpointing needs an id counter, a store, a stats tracker and a task "
                 "gateway"};
  auto trigger = resolve(vertices_to_trigger, "trigger");
  if (!trigger) return trigger.err();
  auto ack = resolve(vertices_to_acknowledge, "acknowledge");
  if (!ack) return ack.err();
  auto confirm = resolve(vertices_to_confirm, "confirm");
  if (!confirm) return confirm.err();
  if (trigger->empty()) return error{"checkpoint settings name no vertex to trigger"};
  if (ack->empty()) return error{"checkpoint settings name no vertex to acknowledge"};
  auto hooks = std::make_shared<master_hook_registry>();
  for (auto& hook : master_hooks)
    if (auto added = hooks->add(std::move(hook)); !added) return added.err();

  // The failure manager's callbacks never run inside the coordinator's call stack: they are
  // posted to the job master's executor, where the job's status is owned.
  std::weak_ptr<execution_graph> weak = weak_from_this();
  checkpoint_failure_manager::callbacks callbacks;
  callbacks.fail_job = [weak, exec = job_master_executor_](const std::string& cause) {
    asio::post(exec, [weak, cause] {
      if (auto self = weak.lock()) self->fail_job_from_checkpoints(cause, std::nullopt);
    });
  };
  callbacks.fail_job_due_to_task_failure = [weak, exec = job_master_executor_](
                                               const std::string& cause,
                                               const execution_attempt_id& task) {
    asio::post(exec, [weak, cause, task] {
      if (auto self = weak.lock()) self->fail_job_from_checkpoints(cause, task);
    });
  };
  auto failure_manager =
      std::make_shared<checkpoint_failure_manager>(config.tolerable_failures, std::move(callbacks));

  checkpoint_coordinator_setup setup;
  setup.job = job_.id;
  setup.config = config;
  setup.config.state_backend = state_backend_name;
  setup.tasks_to_trigger = std::move(*trigger);
  setup.tasks_to_acknowledge = std::move(*ack);
  setup.tasks_to_confirm = std::move(*confirm);
  setup.job_dir = runtime.state_dir / job_.id;
  setup.hooks = std::move(hooks);
  setup.id_counter = std::move(id_counter);
  setup.store = std::move(store);
  setup.stats = std::move(stats);
  setup.failure_manager = failure_manager;

  failure_manager_ = std::move(failure_manager);
  coordinator_ = std::make_shared<checkpoint_coordinator>(
      job_master_executor_, runtime.io_executor, std::move(setup), std::move(runtime.gateway));
  state_backend_name_ = std::move(state_backend_name);
  if (config.periodic())
    add_job_status_listener(checkpoint_coordinator_deactivator(coordinator_));
  return success();
}

result<void> execution_graph::enable_checkpointing_from_job_graph(checkpoint_runtime runtime) {
  if (!job_.checkpointing) return error{"job '" + job_.name + "' has no checkpointing settings"};
  const auto& s = *job_.checkpointing;
  return enable_checkpointing(
      s.config, s.to_trigger, s.to_acknowledge, s.to_confirm, {},
      std::make_shared<in_memory_checkpoint_id_counter>(),
      std::make_shared<completed_checkpoint_store>(s.config.retained), s.config.state_backend,
      std::make_shared<checkpoint_stats_tracker>(s.config.stats_history_size, s.config),
      std::move(runtime));
}

void execution_graph::fail_job_from_checkpoints(const std::string& cause,
                                                std::optional<execution_attempt_id> task) {
  failure_cause_ = cause;
  if (on_job_failure_) {
    on_job_failure_(cause, task);
    return;
  }
  // Without a job master attached, failing means FAILING then FAILED: nothing restarts.
  if (transition_to(job_status::failing)) transition_to(job_status::failed);
}

}  // namespace snapflow
