#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "engine/runtime/barrier_aligner.hpp"
#include "engine/runtime/barrier_tracker.hpp"
#include "engine/runtime/byte_gauge.hpp"
#include "engine/runtime/buffer_debloater.hpp"
#include "engine/runtime/channel.hpp"
#include "engine/runtime/channel_state.hpp"
#include "engine/runtime/checkpoint_responder.hpp"
#include "engine/state/keyed_state_backend.hpp"
#include "engine/state/state_backend_kind.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/output_gate.hpp"
#include "engine/runtime/pending_writes.hpp"
#include "engine/runtime/snapshot_writer.hpp"
#include "engine/runtime/stream_operator.hpp"
#include "engine/runtime/task_mailbox.hpp"
#include "engine/runtime/task_status_listener.hpp"
#include "engine/time/watermark_valve.hpp"
#include "graph/checkpoint_config.hpp"
#include "graph/job_graph.hpp"
#include "graph/operator_registry.hpp"

namespace snapflow {

// The producing side of one outgoing job edge of a subtask.
struct output_edge {
  partitioning part = partitioning::forward;
  std::uint32_t target_max_parallelism = 128;  // the target's key groups (hash edges)
  // Indexed by target subtask; exactly one for a forward edge.
  std::vector<std::shared_ptr<output_channel>> channels;
};

// Everything one subtask attempt needs. The worker fills it from a task deployment descriptor
// and its transport's channels; local_cluster from the execution graph and local channels.
struct stream_task_config {
  job_id job;
  execution_attempt_id attempt;
  job_vertex vertex;  // kind, params, uid, parallelism, max parallelism, callable
  operator_role role = operator_role::transform;
  // Every input channel of every incoming edge, in a fixed order (the barrier handler counts
  // them by index).
  std::vector<std::shared_ptr<input_channel>> inputs;
  // Where each input comes from, parallel to `inputs` (the names of the input channel states an
  // unaligned checkpoint persists). Empty: input i is {0, i}.
  std::vector<channel_address> input_addresses;
  // The partitioning of each incoming edge, by gate (channel_address::gate). Empty: hash for a
  // keyed subtask, else rebalance.
  std::vector<partitioning> input_gates;
  // The job takes unaligned checkpoints: after a restore, every subtask ends what it replays on
  // its outputs with a recovery marker, and a subtask with inputs takes nothing new before every
  // input delivered its marker (recovery alignment), so all restored in-flight records are
  // processed before any new one, in their order, at any parallelism.
  bool unaligned_checkpoints = false;
  std::vector<output_edge> outputs;
  checkpointing_mode mode = checkpointing_mode::exactly_once;
  // Sources stay alive after their last record until a checkpoint taken after it completed
  // (see task_status_listener::on_source_exhausted). Off: they end at once (no checkpointing).
  bool final_checkpoint = true;
  // checkpoint_config::inline_state_max_bytes: a state without an asynchronous part that
  // encodes to at most this is acknowledged from the task thread with its bytes inline.
  std::size_t inline_state_max_bytes = 0;
  // Where a keyed operator's state lives (checkpoint_config::state_backend).
  state_backend_kind state_backend = state_backend_kind::hashmap;
  // checkpoint_config::incremental: checkpoints (not savepoints) of a backend that keeps its
  // state as files store only what its last confirmed checkpoint did not (rocksdb).
  bool incremental_checkpoints = false;
  // A local folder the task may keep working files under (a worker's own, never shared with
  // jobs' data): the rocksdb backend's instance goes to
  // <local_state_dir>/rocksdb/<job>-<vertex>-<subtask>-<attempt> and is removed when the task
  // ends. Needed for the rocksdb backend only.
  std::filesystem::path local_state_dir;
  // The block cache of the rocksdb backend's instance (state_backend_kind.hpp says why it
  // matters).
  std::size_t rocksdb_block_cache_bytes = default_rocksdb_block_cache_bytes;
  // Restore: the checkpoint and the states of the old subtasks of this vertex that this subtask
  // needs, by old index (task_deployment_descriptor's shape; engine/jobmaster/state_assignment.hpp
  // selects them).
  std::optional<checkpoint_id> restore_checkpoint;
  std::map<std::uint32_t, subtask_state> restore_states;
  std::size_t batch_size = 256;
  // checkpoint_config::max_in_flight_bytes, set on every output and input channel (0: none).
  std::uint64_t max_in_flight_bytes = 0;
  // checkpoint_config::buffer_debloat (needs max_in_flight_bytes): the task bounds its input
  // channels to buffer_debloat_target's worth of what it consumes (buffer_debloater).
  bool buffer_debloat = false;
  std::chrono::milliseconds buffer_debloat_target{1000};
  // How often the debloater recomputes the bound. Tests make it long and step it themselves.
  std::chrono::milliseconds buffer_debloat_period{200};
  // How long a task with inputs sleeps with nothing to do before it looks again by itself.
  // Every batch, message and cancel wakes it at once; this only bounds what a missed wake-up
  // would cost. Tests make it long, so that a missed wake-up shows.
  std::chrono::milliseconds idle_recheck{1000};
  std::shared_ptr<const operator_factory> operators;  // builtin() when null
  std::shared_ptr<checkpoint_responder> responder;
  std::shared_ptr<task_status_listener> listener;
  std::shared_ptr<snapshot_writer> writer;
  // The task thread's wakeup; made by the task when null. A transport that delivers into the
  // task's input channels may share it.
  std::shared_ptr<task_wakeup> wakeup;
};

// One subtask (Flink's StreamTask): one operator on its own thread, reading its input channels,
// writing its output gates, and taking its part in checkpoints.
//
// Threading: run() is the task thread; it owns the operator, the keyed state and the barrier
// handler, so they need no locks. Other threads talk to it only through the mailbox (triggers
// and notifications: trigger_checkpoint & co. never block), cancel() and fail(). Snapshots are
// copied on the task thread at the barrier and written and acknowledged on the snapshot writer,
// except small ones (inline_state_max_bytes), acknowledged at once from the task thread: a
// hand-off to another thread costs more than encoding a few hundred bytes.
//
// Sources emit a batch of records between mailbox checks, so a trigger is served within one
// batch. Other tasks take one batch per unblocked input per round, and flush their outputs
// before they wait for more input, so a trickle of records is never held back for a full
// batch. Backpressure never blocks the thread: a batch an output channel has no room for waits
// in the gate's backlog (output_gate), the task finishes the record in progress and then takes
// no input and emits nothing until the backlog went out, waiting on its wakeup, which room,
// mail, input and cancel all notify; so triggers, notifications and cancel are served while it
// is backpressured.
class stream_task {
 public:
  explicit stream_task(stream_task_config config);
  ~stream_task();  // cancels and joins if still running
  stream_task(const stream_task&) = delete;
  stream_task& operator=(const stream_task&) = delete;

  void start();
  void join();

  // --- from any thread; never blocks ---
  void trigger_checkpoint(checkpoint_id id, std::int64_t timestamp_us,
                          const checkpoint_options& options);
  void notify_checkpoint_complete(checkpoint_id id, std::int64_t timestamp_us);
  void notify_checkpoint_aborted(checkpoint_id id, checkpoint_id latest_completed_id);
  // The final-checkpoint rule's last step: an exhausted source emits end-of-input and ends
  // (one that is not exhausted yet ends once it is).
  void finish();
  // Stops the task; it reports CANCELED.
  void cancel();
  // Simulates a crash: the task stops where it is (no flush, no commit) and reports FAILED.
  void fail(std::string cause);

  const execution_attempt_id& attempt() const { return config_.attempt; }
  const stream_task_config& config() const { return config_; }
  std::uint64_t records_in() const { return records_in_.load(std::memory_order_relaxed); }
  std::uint64_t records_out() const { return records_out_.load(std::memory_order_relaxed); }
  // The checkpoint-complete notifications the task handled since the previous call, oldest
  // first, at most max_notified_per_report (the worker's heartbeat reports them).
  std::vector<checkpoint_notified> take_notified();
  bool done() const { return done_.load(); }
  // Checkpoints this source took on the thread that delivered their trigger (tests, stats).
  std::uint64_t triggers_taken_on_caller() const {
    return triggers_on_caller_.load(std::memory_order_relaxed);
  }
  // Barriers a task with inputs handled on the thread that delivered them (tests, stats).
  std::uint64_t barriers_taken_on_caller() const {
    return barriers_on_caller_.load(std::memory_order_relaxed);
  }
  // The byte bound of each of its input channels now: max_in_flight_bytes, or what debloating
  // set (0: none). Any thread.
  std::uint64_t in_flight_bytes_bound() const {
    return in_flight_bound_.load(std::memory_order_relaxed);
  }
  // Bytes of records queued on its input channels, not taken yet (channels that count them).
  // Any thread.
  std::uint64_t buffered_input_bytes() const;
  // Tests, for a started task: waits while its thread has its turn (always, until it first
  // waits for work), then says whether it waits idle (what a trigger or a barrier needs to be
  // taken on its caller's thread) rather than ended.
  bool idle_after_turn();

 private:
  class task_output;
  struct input_cursor {
    element_batch batch;
    std::size_t next = 0;
    bool held_counted = false;  // its records were counted as held back by alignment
  };
  using barrier_handler = std::variant<barrier_aligner, barrier_tracker>;

  void run();
  result<void> initialize();
  // The keyed state backend the config asks for, in this attempt's working folder.
  result<void> create_keyed_state();
  // What an old subtask whose state was read whole left: its keyed state in the neutral form
  // (rocksdb files read for a backend that cannot take them), its operator state.
  struct read_whole {
    std::vector<keyed_state_snapshot> keyed;
    std::vector<restored_operator_state> operator_state;
  };
  // Reads the states the job master selected for this subtask: operator state into `restored`,
  // keyed state into the backend a key group at a time (stream_task.cpp says in which order).
  result<void> restore_state(std::vector<restored_operator_state>& restored);
  // A backend that cannot read keyed state stored as rocksdb files (hashmap) restores it in the
  // neutral form: each old subtask's files overlapping this subtask, read in a scratch folder,
  // kept under the old subtask's index (`old_indexes`, one per entry of `files`).
  result<void> read_keyed_files(const std::vector<keyed_files_restore>& files,
                                const std::vector<std::uint32_t>& old_indexes,
                                std::map<std::uint32_t, read_whole>& parts) const;
  // Every handed-over keyed state was cut at this vertex's max parallelism, in a valid range.
  result<void> check_restore_scopes() const;
  // A keyed subtask must have received every old subtask whose key groups overlap its own.
  result<void> check_keyed_restore_complete(std::uint32_t old_parallelism) const;
  result<void> run_source(std::unique_lock<std::mutex>& turn);
  result<void> run_inputs(std::unique_lock<std::mutex>& turn);
  result<void> process_mailbox();
  result<bool> process_input(std::size_t input);
  // Hands the barrier that came on `input` to the barrier handler and does what it says. A
  // copy: the one in the input's batch may go while the snapshot runs. true: the handler acted
  // (a snapshot or an abort, which may unblock inputs); false: it only aligned.
  result<bool> take_barrier(std::size_t input, checkpoint_barrier barrier);
  // Input `input` is blocked by alignment: count the records waiting on it (once per batch).
  void hold(std::size_t input);
  result<void> handle_trigger(const trigger_message& m);
  result<void> perform(const barrier_actions& actions);
  result<void> take_snapshot(const trigger_snapshot& t);

  // --- snapshots (stream_task_snapshot.cpp) ---
  // A checkpoint's snapshot once its synchronous part is taken: all its write needs.
  struct prepared_snapshot {
    checkpoint_barrier barrier;
    checkpoint_ack ack;
    std::shared_ptr<subtask_snapshot> snapshot;
    std::function<result<void>()> async_part;
    std::shared_ptr<deferred_keyed_snapshot> keyed_later;
    std::shared_ptr<incremental_keyed_snapshot> files_later;
  };
  // The synchronous part: operator and keyed state. Nothing when it declined the checkpoint.
  std::optional<prepared_snapshot> prepare_snapshot(const trigger_snapshot& t,
                                                    std::int64_t barrier_received_us);
  // Acknowledges at once (no state, or a small one inline) or hands the write to the writer.
  void finish_snapshot(prepared_snapshot p);

  // --- unaligned checkpoints (stream_task_unaligned.cpp) ---
  // A checkpoint whose snapshot is taken while its channel state is still being gathered:
  // inputs that owe the barrier (their records are persisted as they are processed), or, for a
  // checkpoint that may go unaligned on a timeout, a barrier still waiting in an output backlog.
  struct in_flight_checkpoint {
    prepared_snapshot prepared;
    std::map<std::size_t, std::vector<record>> inputs;  // by input index
    std::vector<persisted_channel> outputs;
    bool inputs_pending = false;
    bool outputs_pending = false;
    std::int64_t forwarded_us = 0;  // now_us() when the barrier was forwarded
    std::uint64_t persisted_bytes = 0;
  };
  // What a barrier taken ahead of its input's records overtook there, until the snapshot it
  // may trigger takes it as that input's channel state.
  struct overtaken_input {
    std::size_t input = 0;
    checkpoint_id id = 0;
    std::vector<record> records;
  };
  // Forwards the barrier of an unaligned snapshot ahead of the outputs' records and returns
  // those records as output channel states. false: torn down.
  bool forward_unaligned(const checkpoint_barrier& barrier, std::vector<persisted_channel>& out);
  // The synchronous part is done: acknowledge now, or keep it in flight.
  void hold_or_finish(prepared_snapshot p, bool unaligned, std::vector<persisted_channel> outputs);
  // Takes the barriers that overtook records on the inputs (priority barriers, and once an
  // unaligned checkpoint started, a barrier already queued on an input that owes it).
  result<void> take_overtaking_barriers();
  result<void> take_overtaking_barrier(std::size_t input);
  void add_input_state(std::size_t input, std::vector<record> records);
  void record_in_flight(std::size_t input, const record& r);
  // The aligned timeout: switches alignment to unaligned, or a barrier still in an output
  // backlog to a priority one, once due.
  result<void> check_unaligned_timeouts();
  // When check_unaligned_timeouts has something to do next (now_us() time line), if ever.
  std::optional<std::int64_t> next_unaligned_deadline_us() const;
  void on_channel_state_complete(checkpoint_id id);
  void complete_in_flight();
  void drop_in_flight(checkpoint_id id);
  channel_address input_address(std::size_t input) const;
  // The consuming subtask of channel `channel` of output `gate`.
  std::uint32_t consumer_of(std::size_t gate, std::size_t channel) const;
  // Restore: the channel states of an unaligned checkpoint go back where they were persisted,
  // ahead of anything new (input ones before the live input, output ones into the gates).
  result<void> replay_channel_state(std::vector<persisted_channel> channels);
  result<void> replay_output(persisted_channel& c);
  result<std::size_t> replay_input_of(const persisted_channel& c) const;
  // After a restore of a job with unaligned checkpoints: the markers on every output, and the
  // recovery alignment of the inputs.
  void begin_recovery_alignment();
  void on_recovery_marker(std::size_t input);
  // An input holds a barrier sent ahead of its records (lock-free).
  bool priority_barrier_waiting() const {
    for (const auto& in : inputs_)
      if (in->has_priority_barrier()) return true;
    return false;
  }
  // Input `input` delivered its marker while others have not: it waits.
  bool held_by_recovery(std::size_t input) const {
    return recovering_left_ > 0 && recovered_[input];
  }
  // Keeps the channel state of the old subtask `old_index` this subtask replays.
  result<void> keep_channel_state(std::uint32_t old_index, subtask_snapshot& snapshot);
  // Rescaled: the new subtask that replays old subtask `old_index`'s output channel state.
  std::uint32_t output_state_owner(std::uint32_t old_index, std::uint32_t old_parallelism) const;
  partitioning input_gate_kind(std::uint32_t gate) const;
  void decline(checkpoint_id id, checkpoint_failure_reason reason, const std::string& message);
  result<void> finish_inputs(std::unique_lock<std::mutex>& turn);
  // The valve passed something on: the operator handles it (and usually forwards it).
  result<void> advance_event_time(const std::optional<watermark>& w);
  // Runs the operator's processing-time work if it is due; when it next is, for the wait.
  result<void> run_processing_time();
  std::optional<std::chrono::steady_clock::time_point> processing_time_deadline() const;
  bool should_stop() const;
  // Debloating: a batch taken from an input, and the periodic update of the inputs' bound.
  void on_batch_taken(const element_batch& batch) {
    if (debloater_) debloater_->on_consumed(record_bytes(batch));
  }
  void debloat();
  bool flush_outputs();
  // Whether an output has a batch its channel did not take yet (output_gate::backlogged): the
  // task takes no input and emits nothing new until it is handed over.
  bool outputs_backlogged() const;
  // Hands backlogs over as far as the channels take them. false once a channel was cancelled.
  bool drain_outputs();
  // true: no output is backlogged (any more), the task goes on. false: it waited (idle) for
  // room, mail, input or a cancel, or was torn down; the caller starts its round again.
  // `seen`: the wakeup generation read before the round looked for work.
  bool wait_for_room(std::unique_lock<std::mutex>& turn, std::uint64_t seen);
  // After the end of input was broadcast: waits until every backlog was handed over, or the
  // task is torn down.
  void drain_before_end(std::unique_lock<std::mutex>& turn);
  void cancel_channels();
  void report(execution_state state, const std::string& message = {});
  void record_notified(checkpoint_id id);
  void wait_for_work(std::uint64_t seen, std::chrono::steady_clock::time_point deadline);
  // A source's wait: gives up its turn (turn_mutex_) while it waits, idle.
  void wait_idle(std::unique_lock<std::mutex>& turn, std::uint64_t seen,
                 std::chrono::steady_clock::time_point deadline);
  // trigger_checkpoint's fast path: runs the mailbox on the calling thread when the source is
  // idle and its outputs take the barrier without waiting. false: the task thread must do it.
  bool run_mailbox_on_caller();
  // The same for a task with inputs, run by task_wakeup::notify_barrier on the thread that
  // delivered a batch ending in a barrier: when the task is idle and its outputs take a barrier
  // without waiting, takes the batches that are a barrier alone from its inputs and handles
  // them here (alignment, and on the last barrier the forward, the snapshot and the ack).
  // Records are never processed off the task thread. false: the task thread must be woken (it
  // was busy, or something it must handle is left).
  bool run_barrier_on_caller();
  // Whether every output takes one batch now without waiting.
  bool outputs_take_a_batch_now();
  static std::int64_t now_us();

  stream_task_config config_;
  std::shared_ptr<task_wakeup> wakeup_;
  task_mailbox mailbox_;
  std::thread thread_;

  // Task thread only.
  std::unique_ptr<stream_operator> operator_;
  source_operator* source_ = nullptr;
  checkpoint_completion_listener* completion_listener_ = nullptr;  // the operator, if it is one
  std::unique_ptr<keyed_state_backend> keyed_;
  std::vector<output_gate> gates_;
  // The inputs as the task reads them: config_.inputs, with those restored from an unaligned
  // checkpoint wrapped to replay their channel state first.
  std::vector<std::shared_ptr<input_channel>> inputs_;
  std::optional<in_flight_checkpoint> in_flight_;
  bool recording_ = false;  // in_flight_ has inputs that owe the barrier
  bool scan_owed_ = false;  // look for a queued barrier on the inputs that owe it
  std::optional<overtaken_input> overtaken_;
  std::optional<buffer_debloater> debloater_;  // with config_.buffer_debloat and inputs
  std::vector<persisted_channel> restored_channels_;  // read by restore_state
  // Recovery alignment (stream_task_config::unaligned_checkpoints): inputs that delivered their
  // recovery marker, and how many have not yet; 0 once every one did.
  std::vector<bool> recovered_;
  std::size_t recovering_left_ = 0;
  std::unique_ptr<task_output> output_;
  // Event time (docs/event-time.md): the watermark over the inputs, and the timestamp of the
  // record in progress, which its outputs take unless they carry their own.
  std::optional<watermark_valve> valve_;
  std::int64_t input_timestamp_ = no_timestamp;
  std::optional<barrier_handler> handler_;
  std::vector<input_cursor> cursors_;
  std::size_t next_input_ = 0;
  checkpoint_id last_barrier_ = 0;  // newest barrier injected (source) or handled
  bool finish_requested_ = false;
  bool exhausted_ = false;
  bool outputs_cancelled_ = false;

  // The task's turn (Flink's former checkpoint lock, kept for idle tasks only). Its task
  // thread holds it except while it waits for work; a trigger that finds it free and a source
  // idle takes the checkpoint on the trigger's thread (run_mailbox_on_caller), and a barrier
  // delivered to an idle task with inputs is handled on the delivering thread
  // (run_barrier_on_caller): the barrier, snapshot and ack then cost no wake-up of the task's
  // thread, which on a busy machine is a wait for a CPU (docs/benchmarks.md, "How the runtime
  // keeps the hand-offs few").
  std::mutex turn_mutex_;
  bool idle_ = false;                    // under turn_mutex_: waiting, outputs flushed
  std::optional<error> caller_failure_;  // under turn_mutex_: ends the task on its thread
  bool on_caller_ = false;               // under turn_mutex_: a trigger's thread runs it now
  // Under turn_mutex_: snapshot writes the writer's queue had no room for on a trigger's
  // thread; the task thread submits them (and may wait there).
  std::vector<std::function<void()>> deferred_writes_;
  // This task's snapshot writes not yet ended: FINISHED waits for them (pending_writes.hpp).
  std::shared_ptr<pending_writes> writes_ = std::make_shared<pending_writes>();
  // Set by the task thread once the operator is a source that allows it.
  std::atomic<bool> trigger_on_caller_{false};
  std::atomic<std::uint64_t> triggers_on_caller_{0};
  std::atomic<std::uint64_t> barriers_on_caller_{0};

  std::atomic<bool> cancel_requested_{false};
  // Set by the task thread once the operator exists and is no completion listener: from then
  // on notifications are recorded on the caller's thread (notify_checkpoint_complete).
  std::atomic<bool> completion_not_needed_{false};
  std::atomic<bool> fail_requested_{false};
  std::mutex fail_mutex_;
  std::string fail_cause_;
  std::atomic<bool> done_{false};
  std::atomic<std::uint64_t> records_in_{0};
  std::atomic<std::uint64_t> records_out_{0};
  std::atomic<std::uint64_t> in_flight_bound_{0};
  // Written once per handled notification (by the task thread, or by the notifying thread for
  // an operator that does not listen), taken by the worker's heartbeat: a lock, since an id and
  // its time must be read together.
  std::mutex notified_mutex_;
  std::vector<checkpoint_notified> notified_;
  checkpoint_id last_notified_ = 0;  // under notified_mutex_: stale notifications are skipped
};

}  // namespace snapflow
