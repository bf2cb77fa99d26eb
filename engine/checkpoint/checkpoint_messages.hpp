#pragma once

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

// Options a trigger carries down to the sources and, in the barrier, to every subtask.
struct checkpoint_options {
  checkpoint_trigger_kind kind = checkpoint_trigger_kind::periodic;
  bool exactly_once = true;
  bool unaligned = false;
  std::string target_location;  // where subtasks write state files for this checkpoint

  bool operator==(const checkpoint_options&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const checkpoint_ack& a) {
  return os << "checkpoint_ack{job=" << a.job << ", attempt=" << a.attempt << ", id=" << a.id
            << ", handles=" << a.state.handles.size() << ", size=" << a.state.state_size << "}";
}

inline std::ostream& operator<<(std::ostream& os, const checkpoint_decline& d) {
  return os << "checkpoint_decline{job=" << d.job << ", attempt=" << d.attempt << ", id=" << d.id
            << ", reason=" << d.reason << ", message=" << d.message << "}";
}

}  // namespace snapflow
