#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/state/keyed_state_backend.hpp"
#include "engine/time/watermark.hpp"
#include "graph/job_graph.hpp"
#include "graph/record.hpp"

namespace snapflow {

// Where an operator's records go: the task partitions them over its output edges.
class record_output {
 public:
  virtual ~record_output() = default;
  virtual void emit(record r) = 0;
  // In-band, to every consumer (docs/event-time.md). Outputs that carry no event time ignore it.
  virtual void emit_watermark(const watermark& w) { (void)w; }
};

// Operator state of one old subtask, handed to open() on restore. Which old subtasks a new one
// sees follows its kind's operator_state_redistribution (graph/operator_registry.hpp): with
// round_robin, old subtask i goes to new subtask i % p (its own index at unchanged parallelism);
// with union_all (the default), every old subtask goes to everyone. A keyed subtask also sees
// the old subtasks whose key groups overlap its own, so the operator still decides what to take
// (a sink the old subtasks whose index maps to it, a source exactly its own index).
struct restored_operator_state {
  std::uint32_t old_subtask_index = 0;
  std::uint32_t old_parallelism = 1;
  std::vector<operator_state_entry> entries;
};

// What an operator runs in: its vertex (kind, params, uid, callable), its place, its state.
struct operator_context {
  job_id job;
  const job_vertex* vertex = nullptr;  // outlives the operator
  std::uint32_t subtask_index = 0;
  std::uint32_t parallelism = 1;
  std::uint32_t attempt = 0;
  keyed_state_backend* keyed_state = nullptr;  // set for keyed operators only
  checkpoint_id restored_checkpoint = 0;       // 0 on a fresh start
};

// The operator's part of a checkpoint, taken on the task thread at the barrier.
struct operator_snapshot {
  std::vector<operator_state_entry> state;
  // Work that must be done before the checkpoint is acknowledged but need not hold up the
  // task thread (a sink fsyncing the file it just pre-committed). Runs on the snapshot writer.
  std::function<result<void>()> async_part;
};

// One operator instance in one subtask. Every member runs on the task thread. Operational
// failures (a disk, a bad file) are returned as errors and fail the task; a thrown exception
// (from user code) fails it too.
class stream_operator {
 public:
  virtual ~stream_operator() = default;

  // Before the first record. `restored` is empty on a fresh start.
  virtual result<void> open(const operator_context& context,
                            const std::vector<restored_operator_state>& restored) {
    (void)context;
    (void)restored;
    return success();
  }
  // Keyed operators find the record's key already set as the backend's current key.
  virtual result<void> process(const record& r, record_output& out) = 0;
  // Synchronous part of checkpoint `id`, at the barrier: copy what must be saved.
  virtual result<operator_snapshot> snapshot(checkpoint_id id) {
    (void)id;
    return operator_snapshot{};
  }
  virtual result<void> notify_checkpoint_aborted(checkpoint_id id) {
    (void)id;
    return success();
  }
  // Event time: the task's watermark (the minimum over its active inputs, watermark_valve)
  // advanced to `w.timestamp`, or every input went idle (`w.idle`). Fires what it is due and
  // passes it on; an operator that makes its own watermarks (an assigner) ignores it instead.
  virtual result<void> process_watermark(const watermark& w, record_output& out) {
    out.emit_watermark(w);
    return success();
  }
  // Processing time (system clock, epoch milliseconds): when the operator next wants
  // on_processing_time (a processing-time timer, a periodic watermark), if ever. The task asks
  // after each round and wakes for it.
  virtual std::optional<std::int64_t> next_processing_time() const { return std::nullopt; }
  virtual result<void> on_processing_time(std::int64_t now_ms, record_output& out) {
    (void)now_ms;
    (void)out;
    return success();
  }

  // Every input ended; the last chance to emit.
  virtual result<void> end_input(record_output& out) {
    (void)out;
    return success();
  }

  // true when snapshot() is quick, never blocks and touches nothing but this operator. Then,
  // while the task waits idle, a checkpoint may be taken on another thread instead of waking
  // the task's own: a source's on the thread that delivers the trigger
  // (stream_task::trigger_checkpoint), another task's on the thread that delivers a barrier
  // (stream_task::run_barrier_on_caller). Either holds the task's turn, so the operator is
  // never used by two threads at once. Off by default: a user's operator may do anything in
  // snapshot().
  virtual bool snapshot_on_any_thread() const { return false; }
};

// An operator that acts when a checkpoint completes (an exactly-once sink commits what the
// checkpoint covers) implements this beside stream_operator, as Flink's CheckpointListener.
// Only such an operator's task thread is woken for the notification, in order with its records;
// for every other operator the worker records the subtask as notified the moment the
// notification arrives, which saves a thread wake-up per subtask and checkpoint.
class checkpoint_completion_listener {
 public:
  virtual ~checkpoint_completion_listener() = default;
  virtual result<void> notify_checkpoint_complete(checkpoint_id id) = 0;
};

// A source: the task asks it for records between mailbox checks.
class source_operator : public stream_operator {
 public:
  struct emit_result {
    enum class status : std::uint8_t { more, wait, exhausted };
    status state = status::more;
    // For wait (a rate limit): when to ask again. The task sleeps until then unless a mailbox
    // message wakes it.
    std::chrono::steady_clock::time_point resume_at{};
  };

  // Emits at most `max_records` records.
  virtual result<emit_result> emit(record_output& out, std::size_t max_records) = 0;

  result<void> process(const record&, record_output&) final {
    return error{"a source has no input"};
  }
};

}  // namespace snapflow
