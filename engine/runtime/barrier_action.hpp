#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "engine/checkpoint/checkpoint_failure_reason.hpp"
#include "engine/runtime/stream_element.hpp"

namespace snapflow {

// What a barrier handler (barrier_aligner, barrier_tracker) asks its task to do. The handlers
// are sans-I/O: they only count and decide; the task snapshots, forwards and declines.

// Every input delivered the barrier (or ended): forward it, snapshot, acknowledge.
struct trigger_snapshot {
  checkpoint_barrier barrier;
  std::int64_t alignment_duration_us = 0;
  std::uint64_t bytes_processed_during_alignment = 0;
  // Records that reached the subtask on an input blocked by alignment and waited for it to end
  // (exactly-once only; the first batch waiting on each blocked input is counted, so a lower
  // bound of what the channels held back).
  std::uint64_t records_held_during_alignment = 0;
  // Records processed from an input after it delivered this barrier, before the snapshot: they
  // overtook the barrier into the snapshot and may be replayed after a restore (at-least-once).
  // Always 0 under exactly-once, where such an input is blocked; measured, not assumed.
  std::uint64_t records_after_barrier = 0;
  // The checkpoint went unaligned here (exactly-once only): the snapshot is taken before every
  // input delivered the barrier. Records that arrive on an input until its barrier does are
  // processed and also persisted as that input's channel state; channel_state_complete follows
  // once every input delivered the barrier or ended.
  bool unaligned = false;

  bool operator==(const trigger_snapshot&) const = default;
};

// Every input delivered the barrier of unaligned checkpoint `id` (or ended): its channel state
// is complete, the subtask may acknowledge.
struct channel_state_complete {
  checkpoint_id id = 0;

  bool operator==(const channel_state_complete&) const = default;
};

// This subtask gives checkpoint `id` up: decline it with `reason`.
struct abort_snapshot {
  checkpoint_id id = 0;
  checkpoint_failure_reason reason = checkpoint_failure_reason::checkpoint_declined;
  std::string message;

  bool operator==(const abort_snapshot&) const = default;
};

using barrier_action = std::variant<trigger_snapshot, abort_snapshot, channel_state_complete>;
using barrier_actions = std::vector<barrier_action>;

inline std::ostream& operator<<(std::ostream& os, const barrier_action& a) {
  if (const auto* t = std::get_if<trigger_snapshot>(&a))
    return os << "trigger_snapshot{id=" << t->barrier.id
              << ", alignment_us=" << t->alignment_duration_us
              << ", held=" << t->records_held_during_alignment
              << ", after_barrier=" << t->records_after_barrier
              << ", unaligned=" << t->unaligned << "}";
  if (const auto* c = std::get_if<channel_state_complete>(&a))
    return os << "channel_state_complete{id=" << c->id << "}";
  const auto& ab = std::get<abort_snapshot>(a);
  return os << "abort_snapshot{id=" << ab.id << ", reason=" << ab.reason << ", " << ab.message
            << "}";
}

}  // namespace snapflow
