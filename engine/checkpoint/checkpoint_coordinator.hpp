#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "engine/checkpoint/checkpoint_coordinator_core.hpp"
#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/checkpoint_task_gateway.hpp"
#include "engine/checkpoint/location_premaker.hpp"
#include "engine/checkpoint/metadata_write_placement.hpp"
#include "engine/checkpoint/ordered_work_queue.hpp"
#include "engine/clock.hpp"

namespace snapflow {

// The checkpoint coordinator as the rest of the system sees it: the sans-I/O core driven on an
// Asio executor (the coordinator thread). The periodic trigger and each pending checkpoint's ack
// collection (every ack, or the timeout) are coroutines on the checkpoint timer's executor; id
// allocation (when it touches disk), master hooks and discards
// run on the I/O executor and post their result back. Metadata writes do too, unless recent
// writes were fast enough to do inline (metadata_write_placement). A checkpoint's folder is
// created on the I/O executor when its first trigger goes out, so the metadata write finds it
// there. Every public member must be called on the coordinator executor.
class checkpoint_coordinator : public std::enable_shared_from_this<checkpoint_coordinator> {
 public:
  using request_callback = std::function<void(const request_finished&)>;

  checkpoint_coordinator(asio::any_io_executor executor, asio::any_io_executor io_executor,
                         checkpoint_coordinator_setup setup,
                         std::shared_ptr<checkpoint_task_gateway> gateway,
                         metadata_write_placement::options placement = {},
                         // Where a checkpoint folder is created; `placement` when empty.
                         std::optional<metadata_write_placement::options> location_placement = {});
  ~checkpoint_coordinator();

  // The checkpoint timer. Start waits a random delay in [min pause, interval] first, so many
  // jobs started together do not checkpoint in lockstep; then it fires every interval.
  void start_checkpoint_scheduler();
  void stop_checkpoint_scheduler();
  // The job is ending (every source ran out): no further ticks, while checkpoints in flight
  // and requests already queued go on (stop_checkpoint_scheduler would abort them). A failover
  // stops the scheduler and starts it again, which ticks again.
  void pause_periodic_triggers();
  bool periodic_triggers_paused() const { return periodic_paused_; }
  bool is_periodic_checkpointing_started() const { return core_.periodic_scheduling(); }
  std::uint64_t periodic_ticks() const { return periodic_ticks_; }

  // Manual checkpoint or savepoint; `done` runs on the coordinator executor when it ends.
  std::uint64_t trigger_checkpoint(checkpoint_trigger_kind kind, std::string target_dir = {},
                                   request_callback done = {});

  // Runs on the coordinator executor after every completed checkpoint (not savepoints).
  void add_completion_listener(std::function<void(checkpoint_id)> listener) {
    completion_listeners_.push_back(std::move(listener));
  }
  // Runs on the coordinator executor after every request ends, completed or failed, with or
  // without a checkpoint id (savepoints too): the moment to look at what is still in flight.
  void add_end_listener(std::function<void()> listener) {
    end_listeners_.push_back(std::move(listener));
  }

  // An ack's file handles are first confined to its checkpoint's folder
  // (state_handle_confinement.hpp): a refused one declines the checkpoint and touches no file.
  ack_outcome receive_ack(checkpoint_ack ack);
  // Acknowledgements refused for the state files they named (see receive_ack).
  std::uint64_t refused_state_handles() const { return refused_state_handles_; }
  void receive_decline(const checkpoint_decline& decline);
  // A subtask attempt ended (FINISHED, FAILED, CANCELED): the pending checkpoints still waiting
  // for it are aborted now (checkpoint_coordinator_core::on_task_ended); their collectors are
  // woken by the cancel_timeout the abort queues.
  void task_ended(const execution_attempt_id& subtask, execution_state final_state);
  void abort_pending_checkpoints(checkpoint_failure_reason reason, const std::string& message);
  // Changes the periodic interval of a running job; takes effect from the next tick.
  void set_interval(std::chrono::milliseconds interval);
  // Unaligned or aligned for the checkpoints triggered from now on (the REST API allows it
  // only for a job submitted unaligned, whose tasks bound and persist in-flight records).
  void set_unaligned(bool unaligned) { core_.set_unaligned(unaligned); }
  void shutdown(job_status status);

  const checkpoint_coordinator_core& core() const { return core_; }
  checkpoint_coordinator_core& core() { return core_; }
  // Pending checkpoints whose ack collection is waiting (for every ack, or its timeout).
  std::size_t armed_timeouts() const { return collections_.size(); }
  // Checkpoints whose folder creation has ended and which are still pending (tests).
  std::size_t prepared_locations() const { return prepared_.size(); }
  // Metadata writes done on the event thread instead of the I/O pool.
  std::uint64_t inline_metadata_writes() const { return metadata_placement_.inline_writes(); }
  // Checkpoint folders created on the event thread instead of the I/O pool.
  std::uint64_t inline_location_creations() const { return location_placement_.inline_writes(); }
  // Periodic checkpoints whose folder was prepared ahead, while the job waited for their tick.
  std::uint64_t locations_prepared_ahead() const { return ahead_used_; }
  // Orphan sweeps posted so far (see maybe_sweep_orphans).
  std::uint64_t orphan_sweeps() const { return sweeps_; }
  // Checkpoint folders made together (location_premaker): one parent fsync per this many.
  static constexpr std::size_t location_batch = 8;
  // How often at most completed checkpoints are followed by a sweep for orphaned folders.
  static constexpr std::int64_t orphan_sweep_interval_us = 10'000'000;
  // At shutdown the job's folder is swept once right away and once more this much later: a
  // cancelled task whose snapshot writer was still running may write a state file, and so make
  // its checkpoint's folder again, after the abort removed it.
  static constexpr std::int64_t final_sweep_delay_us = 10'000'000;
  const asio::any_io_executor& executor() const { return executor_; }

 private:
  asio::awaitable<void> periodic_trigger_loop(std::uint64_t generation);
  // One pending checkpoint's ack collection: the core's arm_timeout starts it, its
  // cancel_timeout (every ack in, or the checkpoint aborted) wakes it early.
  struct ack_collection {
    explicit ack_collection(const asio::any_io_executor& executor)
        : deadline(executor), all_acknowledged(executor) {}
    coordinator_timer deadline;
    coordinator_timer all_acknowledged;  // never expires: cancelled as the signal
    bool woken = false;                  // cancel_timeout came: every ack in, or aborted
    std::optional<write_metadata> finalize;  // every ack in: the write that completes it
  };
  // Awaits "all acknowledged" or the timeout, whichever comes first (awaitable operators),
  // then finalises: the metadata write and what follows it, or the abort as expired.
  asio::awaitable<void> ack_collector(checkpoint_id id, std::shared_ptr<ack_collection> c);
  void wake_collector(checkpoint_id id);
  void run_actions(std::optional<coordinator_action> first = std::nullopt);
  void write_checkpoint_metadata(write_metadata& a);
  void end_run();  // run_actions()'s end: flush the gateway, then post the pool work
  void perform(coordinator_action& action);
  // For pool work found while performing actions: made now outside run_actions(), after its
  // flush inside (post_location_work: through location_work_).
  void post_after_flush(std::function<void()> post);
  void post_location_work(std::function<void()> work);
  // A checkpoint's folder creation ended (on this thread, wherever it ran): its open
  // empty `_metadata`, or nothing when the creation failed (the metadata write then tries again).
  void location_prepared(checkpoint_id id, const std::string& dir,
                         std::optional<prepared_metadata> file);
  // Drops the prepared folders of checkpoints no longer pending.
  void forget_ended_preparations();
  // Creates checkpoint `id`'s folder `dir` (marked in preparing_ already): on this thread when
  // recent writes were fast, else on the pool; either way after the current run's frames.
  void prepare_location(checkpoint_id id, const std::string& dir, bool savepoint);
  // Between two periodic checkpoints (nothing pending, the last run's frames flushed): the
  // folder and open, empty `_metadata` of the next one, for the id it will most likely get (the
  // last triggered + 1), so that none of that work competes with the tasks while a checkpoint
  // is in flight. Only while recent creations were fast, on this thread.
  void prepare_ahead();
  // A folder prepared ahead that the next trigger did not take (another id, or a savepoint
  // took the id): removed on the pool. Its id is then never a periodic checkpoint's, so no
  // later preparation races the removal. (A stopped scheduler keeps it.)
  void discard_ahead();
  // At shutdown and destruction: removed at once, since its id was never handed out.
  void remove_ahead_now();
  // After a completed checkpoint, at most once per orphan_sweep_interval_us: removes, on the
  // pool, the folders of this coordinator's checkpoints that neither the store retains nor are
  // pending or being created (checkpoint_storage::sweep_orphans says how they come about).
  // Only ids this coordinator triggered: older folders (a checkpoint restored from, ones a
  // previous run retained) are not its own to remove.
  void maybe_sweep_orphans();
  // At shutdown: the same sweep, with what the store keeps, now and final_sweep_delay_us later.
  // `shared_kept`: with a value, the shared/ folder is swept too, keeping what those
  // checkpoints name (not for a suspended job, which goes on elsewhere on the same folder).
  void sweep_after_shutdown(std::set<checkpoint_id> keep,
                            std::optional<std::vector<completed_checkpoint>> shared_kept);
  std::int64_t initial_delay_us();
  // The folder an ack for `id` names its state files in.
  std::string handle_folder(checkpoint_id id) const;
  // Where checkpoint `id`'s shared files are (the job's shared/ folder); empty for a savepoint,
  // which holds only its own.
  std::filesystem::path shared_folder(checkpoint_id id) const;
  void refuse_state_handles(const checkpoint_ack& ack, const std::string& why);

  asio::any_io_executor executor_;
  // The checkpoint timer's own executor (Flink's "Checkpoint Timer"): the periodic trigger loop
  // and every ack collector run on it. A strand of the coordinator's executor, so on the one
  // coordinator thread an ack reaches its collector without a hop to another thread.
  asio::any_io_executor timer_executor_;
  asio::any_io_executor io_executor_;
  // Shared with I/O-pool work, so declared (and initialised) before core_ takes the setup.
  std::shared_ptr<checkpoint_id_counter> id_counter_;
  std::shared_ptr<master_hook_registry> hooks_;
  std::shared_ptr<checkpoint_storage> storage_;
  // Periodic checkpoints' folders, made location_batch at a time; shared with pool work.
  std::shared_ptr<location_premaker> premaker_;
  checkpoint_coordinator_core core_;
  std::shared_ptr<checkpoint_task_gateway> gateway_;

  metadata_write_placement metadata_placement_;
  // The same rule for creating a checkpoint's folder (a mkdir and two fsyncs): inline, after the
  // triggers went out, while recent creations were fast; on the pool otherwise. Inline saves a
  // pool thread's wake-up and the one of this thread for the result, both in the middle of the
  // checkpoint the tasks are working on.
  metadata_write_placement location_placement_;
  // A checkpoint's folder is created at its first trigger, on the pool. Work on a folder whose
  // creation may still be running (writing its metadata, discarding it) goes through this
  // queue, so it runs after the creation whatever threads the pool has; everything else runs
  // on the pool freely. Its items hold the coordinator weakly.
  ordered_work_queue location_work_;
  checkpoint_id last_prepared_ = 0;  // the last checkpoint whose folder creation was posted
  std::set<std::string> preparing_;  // folders whose creation was posted and has not ended
  // Checkpoints whose folder is known to be durable (its creation ended before this thread
  // looked), with their open, empty `_metadata`: only those may write their metadata inline or
  // outside location_work_.
  std::map<checkpoint_id, prepared_metadata> prepared_;
  struct ahead_location {
    checkpoint_id id = 0;
    std::string dir;
    prepared_metadata file;
  };
  std::optional<ahead_location> ahead_;  // see prepare_ahead()
  checkpoint_id ahead_failed_ = 0;        // the id whose preparation ahead failed, not retried
  checkpoint_id first_triggered_ = 0;  // the first checkpoint this coordinator triggered
  checkpoint_id last_triggered_ = 0;
  std::int64_t last_sweep_us_ = 0;
  std::uint64_t sweeps_ = 0;
  std::uint64_t ahead_used_ = 0;
  // Posts to the pool made while performing actions, in order; run_actions() makes them after
  // its flush.
  std::vector<std::function<void()>> after_flush_;
  coordinator_timer periodic_timer_;
  std::uint64_t periodic_generation_ = 0;
  std::int64_t next_tick_us_ = 0;
  std::uint64_t periodic_ticks_ = 0;
  std::map<checkpoint_id, std::shared_ptr<ack_collection>> collections_;
  std::map<std::uint64_t, request_callback> callbacks_;
  std::vector<std::function<void(checkpoint_id)>> completion_listeners_;
  std::vector<std::function<void()>> end_listeners_;
  bool periodic_paused_ = false;
  std::mt19937_64 rng_{std::random_device{}()};
  bool running_actions_ = false;
  std::uint64_t refused_state_handles_ = 0;
  static constexpr std::size_t max_refusals_logged = 1024;
  std::set<execution_attempt_id> refusal_logged_;
};

}  // namespace snapflow
