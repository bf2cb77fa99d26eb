#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "common/result.hpp"
#include "engine/checkpoint/checkpoint_coordinator.hpp"
#include "graph/execution_job_vertex.hpp"
#include "graph/job_graph.hpp"
#include "graph/job_status.hpp"

namespace snapflow {

// Where the checkpoint coordinator of a job runs and whom it talks to. Not part of the job's
// definition: the process that hosts the job master provides it.
struct checkpoint_runtime {
  asio::any_io_executor io_executor;  // disk work: metadata, discards, id reservations, hooks
  std::shared_ptr<checkpoint_task_gateway> gateway;
  std::filesystem::path state_dir;  // checkpoints go to <state_dir>/<job-id>/chk-<id>
};

// The job expanded to subtasks, with its status (Flink's ExecutionGraph). It lives on the job
// master's executor: every member is called there, listeners run there, and the checkpoint
// failure manager's fail-job callbacks are posted there.
//
// Why here and not in graph/: it owns the checkpoint coordinator, which is engine logic; the
// pure pieces it is made of (execution_job_vertex, execution_vertex, job_status_machine) are
// in graph/.
class execution_graph : public std::enable_shared_from_this<execution_graph> {
 public:
  // Called on the job master's executor when checkpoint failures exceed the tolerable number.
  // `task` is set when a task's failure (declined / async snapshot failure) is the cause.
  using job_failure_handler =
      std::function<void(const std::string& cause, std::optional<execution_attempt_id> task)>;

  const job_graph& job() const { return job_; }
  const job_id& id() const { return job_.id; }
  job_status status() const { return status_.current(); }
  // When the job last entered `status`, ms since the epoch (0: never).
  std::int64_t status_timestamp_ms(job_status status) const { return status_.timestamp_of(status); }
  const asio::any_io_executor& job_master_executor() const { return job_master_executor_; }

  // Moves the status if the transition is legal; listeners run in registration order.
  bool transition_to(job_status status);
  bool transition_to(job_status expected, job_status status);
  void add_job_status_listener(job_status_listener listener);
  std::size_t num_job_status_listeners() const { return status_.listener_count(); }

  execution_job_vertex* find_job_vertex(vertex_id id);
  const execution_job_vertex* find_job_vertex(vertex_id id) const;
  const std::vector<std::unique_ptr<execution_job_vertex>>& job_vertices() const {
    return vertices_;
  }
  std::vector<execution_vertex*> all_execution_vertices() const;
  std::size_t num_subtasks() const;

  // Attaches a checkpoint coordinator (Flink's ExecutionGraph.enableCheckpointing). Requires
  // status CREATED and no coordinator yet; every vertex named must exist. On any error nothing
  // changes. Unless periodic checkpoints are off (no interval), registers a job status
  // listener: RUNNING starts the periodic trigger, every other status stops it.
  result<void> enable_checkpointing(const checkpoint_config& config,
                                    const std::vector<vertex_id>& vertices_to_trigger,
                                    const std::vector<vertex_id>& vertices_to_acknowledge,
                                    const std::vector<vertex_id>& vertices_to_confirm,
                                    std::vector<std::shared_ptr<master_hook>> master_hooks,
                                    std::shared_ptr<checkpoint_id_counter> id_counter,
                                    std::shared_ptr<completed_checkpoint_store> store,
                                    std::string state_backend_name,
                                    std::shared_ptr<checkpoint_stats_tracker> stats,
                                    checkpoint_runtime runtime);

  // The settings carried by the job graph itself, with fresh in-memory counter and store:
  // convenient for tests and single-process runs.
  result<void> enable_checkpointing_from_job_graph(checkpoint_runtime runtime);

  checkpoint_coordinator* get_checkpoint_coordinator() const { return coordinator_.get(); }
  std::shared_ptr<checkpoint_coordinator> checkpoint_coordinator_ptr() const { return coordinator_; }
  const std::optional<std::string>& state_backend_name() const { return state_backend_name_; }
  const checkpoint_failure_manager* failure_manager() const { return failure_manager_.get(); }
  checkpoint_failure_manager* failure_manager() { return failure_manager_.get(); }

  void set_job_failure_handler(job_failure_handler handler) { on_job_failure_ = std::move(handler); }
  // The last cause a checkpoint failure gave for failing the job.
  const std::optional<std::string>& failure_cause() const { return failure_cause_; }

 private:
  friend result<std::shared_ptr<execution_graph>> build_execution_graph(
      const job_graph& job, asio::any_io_executor job_master_executor,
      std::uint32_t first_attempt);
  execution_graph(job_graph job, asio::any_io_executor job_master_executor,
                  std::uint32_t first_attempt);

  result<std::vector<execution_vertex*>> resolve(const std::vector<vertex_id>& ids,
                                                 std::string_view role);
  void fail_job_from_checkpoints(const std::string& cause,
                                 std::optional<execution_attempt_id> task);

  job_graph job_;
  asio::any_io_executor job_master_executor_;
  job_status_machine status_;
  std::vector<std::unique_ptr<execution_job_vertex>> vertices_;
  std::shared_ptr<checkpoint_failure_manager> failure_manager_;
  std::shared_ptr<checkpoint_coordinator> coordinator_;
  std::optional<std::string> state_backend_name_;
  std::optional<std::string> failure_cause_;
  job_failure_handler on_job_failure_;
};

// Expands a job graph: an execution_job_vertex per vertex, an execution_vertex per subtask,
// attempt `first_attempt` for each. Fails on an invalid graph (the message names the vertex).
result<std::shared_ptr<execution_graph>> build_execution_graph(
    const job_graph& job, asio::any_io_executor job_master_executor,
    std::uint32_t first_attempt = 0);

}  // namespace snapflow
