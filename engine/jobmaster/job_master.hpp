#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "engine/clock.hpp"
#include "engine/jobmaster/execution_graph.hpp"
#include "engine/jobmaster/final_checkpoint_tracker.hpp"
#include "engine/jobmaster/restart_strategy.hpp"
#include "engine/deployment/task_deployment.hpp"
#include "engine/jobmaster/worker_registry.hpp"
#include "graph/recovery_claim_mode.hpp"

namespace snapflow {

// Runs one job (Flink's JobMaster + scheduler): places its subtasks on worker slots, deploys
// them, follows their states, moves the job status, and fails over (restart strategy, restore
// from the latest completed checkpoint, new attempt ids) when a task or a worker dies. Lives on
// the coordinator's executor with the execution graph and the checkpoint coordinator.
//
// Placement uses slot sharing: slot k hosts subtask k of every vertex, so a job needs as many
// slots as its largest parallelism, and a pipeline's stages sit together.
class job_master : public std::enable_shared_from_this<job_master> {
 public:
  // The snapshot a job was submitted from (`submit --from-savepoint`), as the user named it.
  struct restore_origin {
    std::string path;  // empty: the job was not submitted from a snapshot
    recovery_claim_mode mode = recovery_claim_mode::no_claim;
    // Set when a resumed job's NO_CLAIM snapshot could not be read again: a job that completed
    // no checkpoint of its own then fails with this instead of starting empty.
    std::string unreadable;
  };
  struct options {
    std::filesystem::path state_dir;  // checkpoints under <state_dir>/<job-id>
    asio::any_io_executor io_executor;
    // The coordinator's default; a job graph's own `restart` replaces it.
    restart_strategy_config restart;
    // Start from this checkpoint or savepoint when the job's own store has nothing newer
    // (submit --from-savepoint).
    std::optional<completed_checkpoint> restore_from;
    // Where the job was submitted from, and who owns that snapshot (shown by REST and logged).
    restore_origin origin;
    // How long the job waits for enough free slots (at its start or a restart) before it
    // fails with "needs N slots, M available" (Flink's slot.request.timeout, also 5 min).
    std::chrono::milliseconds slot_wait_timeout{std::chrono::minutes(5)};
    // When the job was first submitted (ms since the epoch; 0: now) and how often it restarted
    // before: a job resumed by a restarted coordinator keeps both (the dispatcher persists them).
    std::int64_t start_time_ms = 0;
    std::int32_t restarts = 0;
  };

  // What a job's checkpoint state folder holds: read and prepared off the coordinator thread
  // (it touches disk), then handed to create().
  struct durable_state {
    std::shared_ptr<checkpoint_id_counter> id_counter;      // with checkpointing only
    std::vector<completed_checkpoint> checkpoints;  // ascending id, torn ones skipped
    // The attempt number every subtask starts at in this start of the job: above every attempt
    // number an earlier start (before a coordinator restart) can have used.
    std::uint32_t first_attempt = 0;
  };
  // Attempt numbers each start of a job reserves (subtask restarts within one coordinator's
  // life); the next start begins above them.
  static constexpr std::uint32_t attempts_per_start = 1u << 16;
  // Blocking: reserves this start's attempt numbers (durably, in <job>/attempt_floor); with
  // checkpointing, also opens the id counter, recovers the completed checkpoints and moves the
  // counter past everything found (and past `restore_from`). Run it on the I/O executor.
  static result<durable_state> load_durable_state(const std::filesystem::path& state_dir,
                                                  const job_graph& graph,
                                                  const std::optional<completed_checkpoint>& restore_from);

  // With `state` empty, loads it synchronously (tests, and the one-off recovery at start).
  static result<std::shared_ptr<job_master>> create(
      asio::any_io_executor executor, job_graph graph, std::shared_ptr<worker_registry> workers,
      std::shared_ptr<task_deployment_gateway> deployer,
      std::shared_ptr<checkpoint_task_gateway> checkpoint_gateway, options opts,
      std::optional<durable_state> state = std::nullopt);

  // Schedules the job (now, or once enough slots exist). Resumes from the latest completed
  // checkpoint in the state folder, if there is one (a restarted coordinator).
  void start();
  // A task reported a new state; reports from attempts other than the current one are ignored.
  void on_task_state(const execution_attempt_id& attempt, execution_state state,
                     const std::string& message = {});
  // A bounded source emitted its last record; `last_barrier` is the newest barrier it injected
  // before that. Once every source is exhausted, the first checkpoint completed after all their
  // last records lets them finish (so every sink commits everything before FINISHED).
  void on_source_exhausted(const execution_attempt_id& attempt, checkpoint_id last_barrier);
  // Every subtask that ran on the worker is lost.
  void on_worker_lost(const worker_id& worker);
  // New workers or freed slots: a job waiting for slots tries again.
  void on_slots_available();
  // Cancels every task; the job ends CANCELED.
  void cancel();
  // Fails the job over (or ends it FAILED when the restart strategy is exhausted). `symptom`:
  // the cause is a task canceled without a request, which the report of the task whose failure
  // cancelled it replaces when it comes right after.
  void fail(const std::string& cause, bool symptom = false);

  const job_id& id() const { return graph_->id(); }
  job_status status() const { return graph_->status(); }
  const execution_graph& graph() const { return *graph_; }
  execution_graph& graph() { return *graph_; }
  checkpoint_coordinator* coordinator() const { return graph_->get_checkpoint_coordinator(); }
  std::optional<worker_id> worker_of(const execution_attempt_id& attempt) const;
  bool waiting_for_slots() const { return waiting_for_slots_; }
  // While waiting for slots: why, when it is more than too few slots (a job of a user program
  // waits for workers that carry the program). Empty otherwise.
  const std::string& waiting_reason() const { return waiting_reason_; }
  std::uint32_t slots_needed() const { return slots_needed_; }
  std::int32_t restarts() const { return restarts_; }
  // When the job was submitted, and when it ended for good (0 while it has not), in ms since
  // the epoch (the coordinator's clock).
  std::int64_t start_time_ms() const { return start_time_ms_; }
  std::int64_t end_time_ms() const { return end_time_ms_; }
  // Called after each restart with the new restart count (the dispatcher persists it).
  void set_restart_listener(std::function<void(std::int32_t)> listener) {
    restart_listener_ = std::move(listener);
  }
  // Called when the cause of a job that already failed is replaced by the one behind it (the
  // dispatcher persists it again).
  void set_cause_listener(std::function<void()> listener) { cause_listener_ = std::move(listener); }
  const std::optional<std::string>& failure_cause() const { return failure_cause_; }
  std::optional<checkpoint_id> restored_from() const { return restored_from_; }
  const restore_origin& origin() const { return options_.origin; }

 private:
  job_master(asio::any_io_executor executor, std::shared_ptr<execution_graph> graph,
             std::shared_ptr<worker_registry> workers,
             std::shared_ptr<task_deployment_gateway> deployer, options opts);

  void try_schedule();
  // Waiting for slots began: fails the job if they are still missing after the timeout.
  void start_slot_wait();
  // Why no workers carrying the job's program can take it: the program and every worker's.
  std::string program_refusal() const;
  void slot_wait_expired();
  void deploy_all(const std::vector<worker_id>& slots);
  void release_slots();
  void cancel_running_tasks();
  void restart();
  void end(job_status terminal);
  execution_vertex* find_current(const execution_attempt_id& attempt);

  asio::any_io_executor executor_;
  std::shared_ptr<execution_graph> graph_;
  std::shared_ptr<worker_registry> workers_;
  std::shared_ptr<task_deployment_gateway> deployer_;
  options options_;
  restart_strategy restart_strategy_;
  std::string job_graph_bytes_;
  std::uint32_t slots_needed_ = 0;
  std::vector<worker_id> slot_workers_;  // slot k -> worker; empty when nothing is placed
  // Hashed: the control plane asks for the worker of an attempt for every trigger, ack and
  // notification, which at 10,000 subtasks made an ordered map's lookups a tenth of the
  // coordinator's CPU.
  std::unordered_map<subtask_id, worker_id> placement_;
  bool waiting_for_slots_ = false;
  std::string waiting_reason_;
  std::int32_t restarts_ = 0;
  std::int64_t start_time_ms_ = 0;
  std::int64_t end_time_ms_ = 0;
  std::function<void(std::int32_t)> restart_listener_;
  std::function<void()> cause_listener_;
  // A task's failure as the job's cause says it.
  static std::string failed_task_cause(const execution_vertex& s, const std::string& message);
  // The report of the failed task behind a symptom: its cause becomes the job's.
  void replace_symptom(execution_vertex& s, const std::string& message);

  std::optional<std::string> failure_cause_;
  // The cause is a task canceled without a request: the symptom of another task's failure,
  // whose own report may come right after it (the two travel on different task threads).
  bool cause_is_symptom_ = false;
  std::optional<checkpoint_id> restored_from_;
  std::shared_ptr<coordinator_timer> restart_timer_;
  std::shared_ptr<coordinator_timer> slot_wait_timer_;
  // Ends the sources behind a final checkpoint; with checkpointing only (reset on failover).
  std::shared_ptr<final_checkpoint_tracker> job_end_;
};

}  // namespace snapflow
