#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "engine/checkpoint/checkpoint_failure_manager.hpp"
#include "engine/checkpoint/checkpoint_id_counter.hpp"
#include "engine/checkpoint/checkpoint_request_decider.hpp"
#include "engine/checkpoint/checkpoint_stats_tracker.hpp"
#include "engine/checkpoint/completed_checkpoint_store.hpp"
#include "engine/checkpoint/coordinator_action.hpp"
#include "engine/checkpoint/master_hook.hpp"
#include "engine/checkpoint/pending_checkpoint.hpp"
#include "engine/checkpoint/shared_state_registry.hpp"
#include "graph/checkpoint_config.hpp"
#include "graph/execution_vertex.hpp"
#include "graph/job_status.hpp"

namespace snapflow {

// Everything the coordinator works with, handed over by execution_graph::enable_checkpointing.
struct checkpoint_coordinator_setup {
  job_id job;
  checkpoint_config config;
  std::vector<execution_vertex*> tasks_to_trigger;
  std::vector<execution_vertex*> tasks_to_acknowledge;
  std::vector<execution_vertex*> tasks_to_confirm;
  std::filesystem::path job_dir;  // <state-dir>/<job-id>: checkpoints go to chk-<id> below it
  std::shared_ptr<master_hook_registry> hooks;
  std::shared_ptr<checkpoint_id_counter> id_counter;
  std::shared_ptr<completed_checkpoint_store> store;
  std::shared_ptr<checkpoint_stats_tracker> stats;
  std::shared_ptr<checkpoint_failure_manager> failure_manager;
};

// How the core handled one acknowledgement (tests and logs read it).
enum class ack_outcome : std::uint8_t {
  ignored_wrong_job,  // another job's ack: nothing touched
  accepted,           // recorded; more acks to come
  completed,          // the last ack: metadata write requested
  duplicate,          // that subtask had acked already
  unknown_attempt,    // not an attempt the checkpoint waits for: its state discarded
  late_discarded,     // the checkpoint was aborted: its state discarded, stats updated
  late_ignored,       // a completed or unknown checkpoint: nothing to do
  refused_state_handle,  // named a file outside its checkpoint's folder: declined, nothing touched
};

std::string_view to_string(ack_outcome outcome);

// The CheckpointCoordinator as a sans-I/O state machine (docs/architecture.md): events go in
// (requests, ids, hook results, acks, declines, timeouts, storage results), actions come out
// (take_actions()). It never reads a clock, touches a disk or a socket, so tests step it by hand;
// checkpoint_coordinator drives it on an Asio executor.
class checkpoint_coordinator_core {
 public:
  explicit checkpoint_coordinator_core(checkpoint_coordinator_setup setup);

  // --- periodic scheduling (the driver owns the timer; the core owns the flag) ---
  void start_periodic_scheduling() { periodic_scheduling_ = true; }
  // RUNNING was left: stops periodic requests and aborts pending checkpoints (suspend reason).
  void stop_periodic_scheduling(std::int64_t now_us);
  bool periodic_scheduling() const { return periodic_scheduling_; }

  // --- requests ---
  // Queues a request and starts it if the decider allows; returns its request id. The outcome
  // arrives as a request_finished action (for periodic requests too).
  std::uint64_t request_checkpoint(checkpoint_trigger_kind kind, std::int64_t now_us,
                                   std::string target_dir = {});
  std::uint64_t on_tick(std::int64_t now_us) {
    return request_checkpoint(checkpoint_trigger_kind::periodic, now_us);
  }

  // --- results of actions ---
  void on_checkpoint_id(std::uint64_t request_id, result<checkpoint_id> id, std::int64_t now_us);
  void on_master_hooks_done(checkpoint_id id, result<std::map<std::string, std::string>> states,
                            std::int64_t now_us);
  void on_timeout(checkpoint_id id, std::int64_t now_us);
  void on_metadata_written(checkpoint_id id, result<void> written, std::int64_t now_us);

  // --- messages from tasks ---
  ack_outcome on_ack(checkpoint_ack ack, std::int64_t now_us);
  void on_decline(const checkpoint_decline& decline, std::int64_t now_us);
  // Subtask attempt `subtask` reached `final_state` (FINISHED, FAILED or CANCELED; other states
  // are ignored). Every pending checkpoint still waiting for its ack is aborted at once:
  // FINISHED with checkpoint_declined_task_closing, FAILED/CANCELED with task_failure (neither
  // counts toward the tolerable failures), with abort notifications to the tasks. An ack that
  // arrived before the end was recorded first (tasks report FINISHED after their snapshot
  // writes), so a checkpoint already acknowledged by it goes on.
  void on_task_ended(const execution_attempt_id& subtask, execution_state final_state,
                     std::int64_t now_us);

  // --- job lifecycle ---
  // A task failed / the job fails over: every pending checkpoint is aborted (not counted).
  void abort_pending_checkpoints(checkpoint_failure_reason reason, const std::string& message,
                                 std::int64_t now_us);
  // The job reached `status` for good here: stops, aborts pending and queued work, and asks to
  // delete the retained checkpoints the retention policy does not keep.
  void shutdown(job_status status, std::int64_t now_us);
  bool is_shutdown() const { return shutdown_; }

  // The latest completed checkpoint, for restore; reports it to stats and restores the master
  // hooks from it. Empty when nothing completed.
  result<std::optional<completed_checkpoint>> restore_latest_checkpoint(std::int64_t now_us);

  std::vector<coordinator_action> take_actions();
  bool has_actions() const { return !actions_.empty(); }

  // --- views ---
  const checkpoint_config& config() const { return config_; }
  const job_id& job() const { return job_; }
  std::size_t num_pending() const { return pending_.size(); }
  // Where checkpoint `id` (periodic or manual, not a savepoint) keeps its state and metadata.
  std::string checkpoint_location(checkpoint_id id) const;
  const pending_checkpoint* find_pending(checkpoint_id id) const;
  std::vector<checkpoint_id> pending_ids() const;
  bool is_triggering() const { return triggering_.has_value(); }
  std::size_t num_queued_requests() const { return decider_.queued(); }
  checkpoint_id latest_completed_id() const;
  const completed_checkpoint_store& store() const { return *store_; }
  const shared_state_registry& shared_state() const { return shared_; }
  const checkpoint_stats_tracker& stats() const { return *stats_; }
  checkpoint_stats_tracker& stats() { return *stats_; }
  const checkpoint_failure_manager& failure_manager() const { return *failure_manager_; }
  const master_hook_registry& hooks() const { return *hooks_; }
  checkpoint_id_counter& id_counter() { return *id_counter_; }
  std::int64_t checkpoint_timeout_us() const { return config_.timeout.count() * 1000; }

  // Runtime change of the periodic interval (the driver re-arms its timer).
  void set_interval(std::chrono::milliseconds interval) { config_.interval = interval; }
  // Runtime switch between unaligned and aligned checkpoints, for the checkpoints triggered
  // from now on (their trigger options carry it; one in flight keeps its own).
  void set_unaligned(bool unaligned) { config_.unaligned = unaligned; }

 private:
  struct triggering_request {
    checkpoint_request request;
    std::optional<checkpoint_id> id;  // set once allocated
  };

  coordinator_load load(std::int64_t now_us) const;
  void apply(checkpoint_request_decider::decision decision, std::int64_t now_us);
  void start_trigger(const checkpoint_request& request, std::int64_t now_us);
  void send_triggers(pending_checkpoint& pending);
  void finish_trigger(std::int64_t now_us);
  void fail_request(const checkpoint_request& request, checkpoint_failure_reason reason,
                    std::string message, std::int64_t now_us);
  void finalize(pending_checkpoint& pending, std::int64_t now_us);
  void abort(checkpoint_id id, checkpoint_failure_reason reason, const std::string& message,
             std::int64_t now_us, std::optional<execution_attempt_id> failing_task = {},
             bool write_in_flight = true);
  void remember_aborted(checkpoint_id id);
  bool was_aborted(checkpoint_id id) const;
  std::string location_for(const checkpoint_request& request, checkpoint_id id) const;
  bool all_trigger_tasks_running(std::string* not_running) const;
  // Deletes what a failed checkpoint or a late acknowledgement wrote (not what it reused).
  void discard_unused(std::vector<state_handle> handles);
  // Adds a durable checkpoint to the store and the shared-state registry, and deletes what it
  // subsumed. An error leaves both as they were.
  result<void> keep_completed(const completed_checkpoint& completed);
  // Deletes the shared files released while checkpoints that have all ended now were pending.
  void release_shared_after_pending();
  // Why `request` cannot become a checkpoint now (with a message), or nothing if it can: a
  // trigger subtask not RUNNING, or an acknowledging subtask that has ended.
  std::optional<checkpoint_failure_reason> trigger_refusal(const checkpoint_request& request,
                                                           std::string* message) const;

  job_id job_;
  checkpoint_config config_;
  std::vector<execution_vertex*> tasks_to_trigger_;
  std::vector<execution_vertex*> tasks_to_acknowledge_;
  std::vector<execution_vertex*> tasks_to_confirm_;
  std::filesystem::path job_dir_;
  std::shared_ptr<master_hook_registry> hooks_;
  std::shared_ptr<checkpoint_id_counter> id_counter_;
  std::shared_ptr<completed_checkpoint_store> store_;
  shared_state_registry shared_;  // the shared files store_'s checkpoints use
  std::shared_ptr<checkpoint_stats_tracker> stats_;
  std::shared_ptr<checkpoint_failure_manager> failure_manager_;
  checkpoint_request_decider decider_;

  std::map<checkpoint_id, pending_checkpoint> pending_;
  std::optional<triggering_request> triggering_;
  std::deque<checkpoint_id> recently_aborted_;
  // Checkpoints aborted while their metadata write ran: their folder goes once the write ends.
  std::map<checkpoint_id, discard_location> discard_after_write_;  // bounded: late acks for these are discarded
  std::vector<coordinator_action> actions_;
  std::uint64_t next_request_id_ = 1;
  std::optional<std::int64_t> last_completion_us_;
  std::int64_t last_trigger_timestamp_us_ = 0;
  bool periodic_scheduling_ = false;
  bool shutdown_ = false;
  // Set while abort_pending_checkpoints runs: an abort then starts no queued request.
  bool holding_queue_ = false;

  static constexpr std::size_t recently_aborted_limit = 256;
};

}  // namespace snapflow
