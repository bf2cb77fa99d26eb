#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "graph/checkpoint_config.hpp"
#include "graph/ids.hpp"

// The control-plane messages between the coordinator and its workers, as plain data. How they
// are laid out on the wire (envelope.hpp) and which field means what (docs/protocol.md) live
// elsewhere; these structs only carry values, so the engine can be tested without any bytes.
// Each struct names its wire type ("t") in `wire_type`.
namespace snapflow::wire {

// The envelope version this build writes. A frame with any other version is refused, so a
// change that older peers cannot read must bump it; adding an optional field must not.
inline constexpr std::uint32_t current_protocol_version = 1;

// A file a subtask wrote for a checkpoint, as the storage layer describes it: the checksum is
// the CRC-32C of the whole file, verified on restore. A small state travels inline instead
// (`inline_state`, with `path` empty); size and checksum then describe those bytes.
struct state_handle {
  std::string path;
  std::uint64_t size_bytes = 0;
  std::uint32_t checksum = 0;
  std::optional<std::string> inline_state;
  // "shared_new" or "shared_reused" for a file in the job's shared/ folder (incremental
  // checkpoints, docs/protocol.md); absent for the checkpoint's own files.
  std::optional<std::string> sharing;

  bool operator==(const state_handle&) const = default;
};

// Where one subtask of a job runs: its worker's data endpoint, for the task's output channels.
struct subtask_endpoint {
  subtask_id subtask;
  std::string endpoint;
  // With CURVE on the data plane: the Z85 public key of the worker serving `endpoint`, the key
  // it registered with. Left out without CURVE, so those frames stay as they were.
  std::optional<std::string> public_key;

  bool operator==(const subtask_endpoint&) const = default;
};

// The state one subtask of the previous run left in the checkpoint being restored. Keyed by
// that old subtask index, so state can be redistributed when the parallelism changed.
struct subtask_restore_state {
  std::uint32_t subtask = 0;
  std::vector<state_handle> state_handles;
  std::uint64_t state_size_bytes = 0;
  // Keyed state: the max parallelism it was cut at and its key groups [first, last], so the
  // worker can refuse it before reading a file. max_parallelism 0: not keyed.
  std::uint32_t max_parallelism = 0;
  std::uint32_t first_key_group = 0;
  std::uint32_t last_key_group = 0;

  bool operator==(const subtask_restore_state&) const = default;
};

// Lifecycle of one deployed subtask attempt as its worker reports it.
enum class task_state : std::uint8_t { deploying, running, finished, failed, canceled };

std::string_view to_string(task_state state);
std::optional<task_state> parse_task_state(std::string_view text);

// A folder a worker lets jobs read and write files under (its --data-root). A record of its
// own so fields can be added.
struct data_root {
  std::string path;

  bool operator==(const data_root&) const = default;
};

// A user program a worker was started from (snapflow::run_program): the fingerprint of the job
// graph whose callables it holds, and the program's name for messages.
struct worker_program {
  std::string fingerprint;
  std::string name;

  bool operator==(const worker_program&) const = default;
};

// worker -> coordinator, first message on a new connection.
struct register_worker {
  static constexpr std::string_view wire_type = "register_worker";

  std::string worker_id;  // also the DEALER routing id
  std::uint32_t slots = 0;
  std::string data_endpoint;  // where the worker's data channels accept connections
  std::uint32_t protocol_version = current_protocol_version;  // the version it speaks
  std::int64_t pid = 0;
  // Picked afresh whenever the worker starts over with no tasks (process start, or after it
  // dropped its tasks because the coordinator was gone): a register_worker that repeats the
  // session of the current registration is a resend, not a new incarnation.
  std::uint64_t session = 0;
  // It reads the *_batch messages (trigger, notify complete / aborted) in frames of up to this
  // many bytes. 0, and absent from older workers: it is sent one message per attempt.
  std::uint64_t max_batch_bytes = 0;
  // The folders its tasks' file paths must lie under, the first one the folder relative paths
  // resolve against. Absent from older workers: the coordinator then checks nothing at
  // submission for this worker (the worker itself still checks at deployment).
  std::vector<data_root> data_roots;
  // The user programs whose callables it holds. Absent from older workers and from workers
  // without a program: the coordinator then deploys to it only jobs that name no program.
  std::vector<worker_program> programs;

  bool operator==(const register_worker&) const = default;
};

// coordinator -> worker, the answer to register_worker.
struct register_ack {
  static constexpr std::string_view wire_type = "register_ack";

  bool accepted = false;
  std::string reason;  // why not, when refused
  std::uint32_t heartbeat_interval_ms = 0;
  std::uint32_t heartbeat_timeout_ms = 0;
  // The coordinator reads acknowledge_checkpoint_batch in frames of up to this many bytes. 0,
  // and absent from older coordinators: it is sent one acknowledgement per frame.
  std::uint64_t max_batch_bytes = 0;

  bool operator==(const register_ack&) const = default;
};

// coordinator -> worker: the answer to anything but register_worker from a routing id that is
// not registered (the coordinator restarted, or declared the worker lost). The worker drops its
// tasks and registers again.
struct not_registered {
  static constexpr std::string_view wire_type = "not_registered";

  std::string reason;

  bool operator==(const not_registered&) const = default;
};

// When an attempt handled notify_checkpoint_complete for `checkpoint`: the worker's clock, us
// since the epoch (the clock of barrier_received_timestamp_us).
struct checkpoint_notified {
  checkpoint_id checkpoint = 0;
  std::int64_t timestamp_us = 0;

  bool operator==(const checkpoint_notified&) const = default;
};

// Records one attempt read and wrote since it started, carried by a worker's heartbeat.
struct task_io {
  job_id job;
  execution_attempt_id attempt;
  std::uint64_t records_in = 0;
  std::uint64_t records_out = 0;
  // The completion notifications it handled since the previous heartbeat, oldest first; left
  // out when there are none, so the entry is the same bytes older workers send.
  std::optional<std::vector<checkpoint_notified>> notified;
  // task_io_counters' byte bound of its input channels and the bytes queued on them; left out
  // when 0 (an attempt without a byte bound), so older peers read the same bytes.
  std::uint64_t in_flight_bytes_bound = 0;
  std::uint64_t buffered_in_bytes = 0;

  bool operator==(const task_io&) const = default;
};

// Both ways: the worker sends one every heartbeat_interval_ms, the coordinator answers each.
struct heartbeat {
  static constexpr std::string_view wire_type = "heartbeat";

  std::string sender;  // worker id, or "coordinator"
  std::int64_t timestamp_ms = 0;
  // worker -> coordinator: its tasks' record counters; left out when there are none, so a
  // heartbeat without tasks is the same frame older workers send.
  std::optional<std::vector<task_io>> tasks;

  bool operator==(const heartbeat&) const = default;
};

// coordinator -> worker: run one subtask attempt.
struct deploy_task {
  static constexpr std::string_view wire_type = "deploy_task";

  job_id job;
  execution_attempt_id attempt;
  std::string job_graph;  // the whole job graph, msgpack bytes (graph/job_graph_codec.hpp)
  std::vector<subtask_endpoint> subtask_endpoints;  // this subtask and its neighbours
  std::optional<checkpoint_id> restore_checkpoint_id;
  std::vector<subtask_restore_state> restore_states;  // this vertex's old subtasks
  std::string checkpoint_dir;  // where this attempt writes its checkpoints' state files

  bool operator==(const deploy_task&) const = default;
};

// coordinator -> worker: stop one subtask attempt.
struct cancel_task {
  static constexpr std::string_view wire_type = "cancel_task";

  job_id job;
  execution_attempt_id attempt;

  bool operator==(const cancel_task&) const = default;
};

// worker -> coordinator: an attempt changed state.
struct task_state_update {
  static constexpr std::string_view wire_type = "task_state_update";

  job_id job;
  execution_attempt_id attempt;
  task_state state = task_state::deploying;
  std::string failure_message;  // set when state is failed

  bool operator==(const task_state_update&) const = default;
};

// coordinator -> worker: a source attempt injects the barrier for `checkpoint`.
struct trigger_checkpoint {
  static constexpr std::string_view wire_type = "trigger_checkpoint";

  job_id job;
  execution_attempt_id attempt;
  checkpoint_id checkpoint = 0;
  std::int64_t timestamp_ms = 0;
  bool is_savepoint = false;
  std::string savepoint_dir;
  checkpointing_mode mode = checkpointing_mode::exactly_once;
  bool unaligned = false;
  // The folder this checkpoint's state files go to (chk-<id> or the savepoint's folder); the
  // source passes it on in the barrier. Empty: the worker's configured default.
  std::string target_location;
  std::int64_t aligned_timeout_ms = 0;  // checkpoint_options::aligned_timeout_ms

  bool operator==(const trigger_checkpoint&) const = default;
};

// worker -> coordinator: an attempt finished its snapshot for `checkpoint`.
struct acknowledge_checkpoint {
  static constexpr std::string_view wire_type = "acknowledge_checkpoint";

  job_id job;
  execution_attempt_id attempt;
  checkpoint_id checkpoint = 0;
  std::vector<state_handle> state_handles;
  std::uint64_t state_size_bytes = 0;
  std::int64_t sync_duration_us = 0;
  std::int64_t async_duration_us = 0;
  std::int64_t alignment_duration_us = 0;
  std::uint64_t bytes_processed_during_alignment = 0;
  // Records held back on inputs blocked by alignment (exactly-once), and records processed from
  // an input after it delivered the barrier, before the snapshot (at-least-once).
  std::uint64_t records_held_during_alignment = 0;
  std::uint64_t records_after_barrier = 0;
  // The sender's clock, us since the epoch, when the first barrier reached the attempt; 0 =
  // not measured. The coordinator derives the checkpoint start delay from it.
  std::int64_t barrier_received_timestamp_us = 0;
  // Keyed state: as in subtask_restore_state. max_parallelism 0: not keyed.
  std::uint32_t max_parallelism = 0;
  std::uint32_t first_key_group = 0;
  std::uint32_t last_key_group = 0;
  // The checkpoint went unaligned at the attempt, and the in-flight bytes it persisted.
  bool unaligned = false;
  std::uint64_t persisted_data_bytes = 0;

  bool operator==(const acknowledge_checkpoint&) const = default;
};

// worker -> coordinator: an attempt cannot take part in `checkpoint`.
struct decline_checkpoint {
  static constexpr std::string_view wire_type = "decline_checkpoint";

  job_id job;
  execution_attempt_id attempt;
  checkpoint_id checkpoint = 0;
  // A checkpoint_failure_reason name, e.g. "checkpoint_declined_task_not_ready". Kept as text
  // so a newer worker's reason still decodes; the coordinator maps names it does not know to
  // checkpoint_declined.
  std::string reason;
  std::string message;

  bool operator==(const decline_checkpoint&) const = default;
};

// coordinator -> worker: `checkpoint` is durable (two-phase-commit sinks commit now).
struct notify_checkpoint_complete {
  static constexpr std::string_view wire_type = "notify_checkpoint_complete";

  job_id job;
  execution_attempt_id attempt;
  checkpoint_id checkpoint = 0;

  bool operator==(const notify_checkpoint_complete&) const = default;
};

// coordinator -> worker: `checkpoint` will never complete.
struct notify_checkpoint_aborted {
  static constexpr std::string_view wire_type = "notify_checkpoint_aborted";

  job_id job;
  execution_attempt_id attempt;
  checkpoint_id checkpoint = 0;
  std::optional<checkpoint_id> latest_completed_checkpoint_id;

  bool operator==(const notify_checkpoint_aborted&) const = default;
};

// worker -> coordinator: a bounded source attempt emitted its last record. It stays running,
// still taking checkpoints, until told to finish (the final-checkpoint rule, docs/protocol.md).
struct source_exhausted {
  static constexpr std::string_view wire_type = "source_exhausted";

  job_id job;
  execution_attempt_id attempt;
  // The newest barrier it injected before its last record, 0 for none: every checkpoint with a
  // greater id was taken after its last record.
  checkpoint_id last_barrier = 0;

  bool operator==(const source_exhausted&) const = default;
};

// coordinator -> worker: an exhausted source ends now; its end of input flows downstream.
struct finish_task {
  static constexpr std::string_view wire_type = "finish_task";

  job_id job;
  execution_attempt_id attempt;

  bool operator==(const finish_task&) const = default;
};

// Batches: one frame where there would be one per attempt. A sender only coalesces messages that
// are ready in the same turn of its event loop (it never waits to fill a batch), and sends a
// batch of one as the single message. Each entry is handled exactly as the single message
// would be, checks included: a bad entry is refused on its own, the others still count.

// coordinator -> worker: trigger_checkpoint for each of `attempts`, all of job `job` and run by
// this worker, with the same checkpoint, timestamp and options.
struct trigger_checkpoint_batch {
  static constexpr std::string_view wire_type = "trigger_checkpoint_batch";

  job_id job;
  checkpoint_id checkpoint = 0;
  std::int64_t timestamp_ms = 0;
  bool is_savepoint = false;
  std::string savepoint_dir;
  checkpointing_mode mode = checkpointing_mode::exactly_once;
  bool unaligned = false;
  std::string target_location;
  std::vector<execution_attempt_id> attempts;
  std::int64_t aligned_timeout_ms = 0;

  // The single message this batch stands for, for one of its attempts.
  trigger_checkpoint entry(const execution_attempt_id& attempt) const;
  // Whether `m` differs from this batch's entries in its attempt only.
  bool takes(const trigger_checkpoint& m) const;

  bool operator==(const trigger_checkpoint_batch&) const = default;
};

// coordinator -> worker: notify_checkpoint_complete for each of `attempts`.
struct notify_checkpoint_complete_batch {
  static constexpr std::string_view wire_type = "notify_checkpoint_complete_batch";

  job_id job;
  checkpoint_id checkpoint = 0;
  std::vector<execution_attempt_id> attempts;

  bool operator==(const notify_checkpoint_complete_batch&) const = default;
};

// coordinator -> worker: notify_checkpoint_aborted for each of `attempts`.
struct notify_checkpoint_aborted_batch {
  static constexpr std::string_view wire_type = "notify_checkpoint_aborted_batch";

  job_id job;
  checkpoint_id checkpoint = 0;
  std::optional<checkpoint_id> latest_completed_checkpoint_id;
  std::vector<execution_attempt_id> attempts;

  bool operator==(const notify_checkpoint_aborted_batch&) const = default;
};

// worker -> coordinator: acknowledgements that were ready together, each a whole
// acknowledge_checkpoint (its own job, attempt and checkpoint), in the order they were made.
struct acknowledge_checkpoint_batch {
  static constexpr std::string_view wire_type = "acknowledge_checkpoint_batch";

  std::vector<acknowledge_checkpoint> acks;

  bool operator==(const acknowledge_checkpoint_batch&) const = default;
};

using message =
    std::variant<register_worker, register_ack, heartbeat, deploy_task, cancel_task,
                 task_state_update, trigger_checkpoint, acknowledge_checkpoint, decline_checkpoint,
                 notify_checkpoint_complete, notify_checkpoint_aborted, not_registered,
                 source_exhausted, finish_task, trigger_checkpoint_batch,
                 notify_checkpoint_complete_batch, notify_checkpoint_aborted_batch,
                 acknowledge_checkpoint_batch>;

// The "t" of a message on the wire, e.g. "trigger_checkpoint".
std::string_view type_name(const message& m);

std::ostream& operator<<(std::ostream& os, task_state state);
std::ostream& operator<<(std::ostream& os, const state_handle& h);
std::ostream& operator<<(std::ostream& os, const subtask_endpoint& e);
std::ostream& operator<<(std::ostream& os, const data_root& r);
std::ostream& operator<<(std::ostream& os, const worker_program& p);
std::ostream& operator<<(std::ostream& os, const subtask_restore_state& r);
std::ostream& operator<<(std::ostream& os, const register_worker& m);
std::ostream& operator<<(std::ostream& os, const register_ack& m);
std::ostream& operator<<(std::ostream& os, const not_registered& m);
std::ostream& operator<<(std::ostream& os, const checkpoint_notified& n);
std::ostream& operator<<(std::ostream& os, const task_io& t);
std::ostream& operator<<(std::ostream& os, const heartbeat& m);
std::ostream& operator<<(std::ostream& os, const deploy_task& m);
std::ostream& operator<<(std::ostream& os, const cancel_task& m);
std::ostream& operator<<(std::ostream& os, const task_state_update& m);
std::ostream& operator<<(std::ostream& os, const trigger_checkpoint& m);
std::ostream& operator<<(std::ostream& os, const acknowledge_checkpoint& m);
std::ostream& operator<<(std::ostream& os, const decline_checkpoint& m);
std::ostream& operator<<(std::ostream& os, const notify_checkpoint_complete& m);
std::ostream& operator<<(std::ostream& os, const notify_checkpoint_aborted& m);
std::ostream& operator<<(std::ostream& os, const source_exhausted& m);
std::ostream& operator<<(std::ostream& os, const finish_task& m);
std::ostream& operator<<(std::ostream& os, const trigger_checkpoint_batch& m);
std::ostream& operator<<(std::ostream& os, const notify_checkpoint_complete_batch& m);
std::ostream& operator<<(std::ostream& os, const notify_checkpoint_aborted_batch& m);
std::ostream& operator<<(std::ostream& os, const acknowledge_checkpoint_batch& m);
std::ostream& operator<<(std::ostream& os, const message& m);

}  // namespace snapflow::wire
