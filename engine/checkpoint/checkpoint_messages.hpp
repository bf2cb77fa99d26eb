#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "engine/checkpoint/checkpoint_failure_reason.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// What a subtask measured while taking its part of a checkpoint.
struct checkpoint_metrics {
  std::int64_t sync_duration_us = 0;
  std::int64_t async_duration_us = 0;
  std::int64_t alignment_duration_us = 0;
  std::uint64_t bytes_processed_during_alignment = 0;
  // Records held back on inputs blocked by alignment (exactly-once), and records processed
  // from an input after it delivered the barrier, before the snapshot (at-least-once; 0 under
  // exactly-once). See trigger_snapshot.
  std::uint64_t records_held_during_alignment = 0;
  std::uint64_t records_after_barrier = 0;
  // When the first barrier of the checkpoint reached the subtask (a source: when it took the
  // trigger), on the coordinator_clock time line (us since the epoch); 0 = not measured. The
  // coordinator turns it into the start delay against its own trigger timestamp, which the
  // wire's millisecond trigger timestamp could not give to microsecond precision.
  std::int64_t barrier_received_timestamp_us = 0;
  // The checkpoint went unaligned at this subtask, and the in-flight records it persisted as
  // channel state (Flink's unalignedCheckpoint and persistedData), in approximate bytes.
  bool unaligned = false;
  std::uint64_t persisted_data_bytes = 0;

  bool operator==(const checkpoint_metrics&) const = default;
};

// A subtask finished its snapshot for `id` (Flink's AcknowledgeCheckpoint).
struct checkpoint_ack {
  job_id job;
  execution_attempt_id attempt;
  checkpoint_id id = 0;
  subtask_state state;
  checkpoint_metrics metrics;

  bool operator==(const checkpoint_ack&) const = default;
};

// A subtask cannot take its part of `id` (Flink's DeclineCheckpoint).
struct checkpoint_decline {
  job_id job;
  execution_attempt_id attempt;
  checkpoint_id id = 0;
  checkpoint_failure_reason reason = checkpoint_failure_reason::checkpoint_declined;
  std::string message;

  bool operator==(const checkpoint_decline&) const = default;
};

// A subtask attempt handled the notification that checkpoint `id` completed (its sinks
// committed), at `timestamp_us` on the coordinator_clock time line of its process. Workers
// collect these and report them with their next heartbeat, not one message each, so the
// coordinator learns when the last subtask was notified without traffic on the notify path.
struct checkpoint_notified {
  checkpoint_id id = 0;
  std::int64_t timestamp_us = 0;

  bool operator==(const checkpoint_notified&) const = default;
};

// The most notifications one attempt keeps for its next report; older ones are dropped first
// (their checkpoints' time to all notified stays unknown). 256 covers more than two heartbeat
// intervals (1 s by default) of checkpoints every 10 ms, at ~40 bytes each on the wire.
inline constexpr std::size_t max_notified_per_report = 256;

// Options a trigger carries down to the sources and, in the barrier, to every subtask.
struct checkpoint_options {
  checkpoint_trigger_kind kind = checkpoint_trigger_kind::periodic;
  bool exactly_once = true;
  bool unaligned = false;
  std::string target_location;  // where subtasks write state files for this checkpoint
  // With unaligned: how long a subtask aligns before it switches this checkpoint to unaligned
  // (checkpoint_config::aligned_checkpoint_timeout); 0: unaligned from the first barrier. A
  // subtask that switched forwards the barrier with 0, so that downstream goes unaligned too.
  std::int64_t aligned_timeout_ms = 0;

  bool operator==(const checkpoint_options&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const checkpoint_ack& a) {
  return os << "checkpoint_ack{job=" << a.job << ", attempt=" << a.attempt << ", id=" << a.id
            << ", handles=" << a.state.handles.size() << ", size=" << a.state.state_size << "}";
}

inline std::ostream& operator<<(std::ostream& os, const checkpoint_notified& n) {
  return os << "checkpoint_notified{id=" << n.id << ", us=" << n.timestamp_us << "}";
}

inline std::ostream& operator<<(std::ostream& os, const checkpoint_decline& d) {
  return os << "checkpoint_decline{job=" << d.job << ", attempt=" << d.attempt << ", id=" << d.id
            << ", reason=" << d.reason << ", message=" << d.message << "}";
}

}  // namespace snapflow
