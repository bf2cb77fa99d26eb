#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "engine/runtime/barrier_action.hpp"

namespace snapflow {

// At-least-once barrier handling (Flink's CheckpointBarrierTracker), sans-I/O: it never blocks
// an input, it only notes which inputs delivered which barrier and triggers the snapshot once
// every open input delivered it. Records that overtake a barrier on a fast input land in the
// snapshot too, so a restore may process them twice: at least once, never lost.
//   - Stale barriers (id <= the last checkpoint triggered or aborted here) are ignored.
//   - Triggering n gives up every older checkpoint still being counted (declined as subsumed):
//     the coordinator can never complete it once n's snapshot exists here.
//   - An input that ends counts as having delivered every barrier still being counted.
//   - At most `max_tracked` checkpoints are counted at once; the oldest is given up beyond.
class barrier_tracker {
 public:
  static constexpr std::size_t max_tracked = 64;

  explicit barrier_tracker(std::size_t num_inputs);

  barrier_actions on_barrier(std::size_t input, const checkpoint_barrier& barrier,
                             std::int64_t now_us);
  barrier_actions on_end_of_input(std::size_t input, std::int64_t now_us);
  // The coordinator aborted `id`: stop counting it and ignore its later barriers.
  bool on_checkpoint_aborted(checkpoint_id id);

  // The task processed a record from `input`: for every checkpoint whose barrier that input
  // already delivered, the record overtook the barrier (reported as records_after_barrier).
  void on_record_processed(std::size_t input) {
    for (auto& [_, c] : pending_)
      if (c.seen[input]) ++c.records_after_barrier;
  }

  // Never blocks: kept so a task can treat both handlers alike.
  bool is_blocked(std::size_t) const { return false; }
  bool has_ended(std::size_t input) const { return ended_.at(input); }
  bool all_ended() const { return num_ended_ == ended_.size(); }
  std::size_t num_tracked() const { return pending_.size(); }
  checkpoint_id last_handled_id() const { return last_handled_id_; }
  std::size_t num_inputs() const { return ended_.size(); }

 private:
  struct counting {
    checkpoint_barrier barrier;
    std::vector<bool> seen;
    std::size_t num_seen = 0;
    std::int64_t first_us = 0;
    std::uint64_t records_after_barrier = 0;
  };

  bool complete(const counting& c) const;
  void trigger(std::map<checkpoint_id, counting>::iterator it, std::int64_t now_us,
               barrier_actions& out);

  std::vector<bool> ended_;
  std::size_t num_ended_ = 0;
  std::map<checkpoint_id, counting> pending_;
  checkpoint_id last_handled_id_ = 0;
  // Checkpoints aborted by the coordinator whose barriers may still come; bounded.
  std::set<checkpoint_id> aborted_;
  static constexpr std::size_t aborted_limit = 64;
};

}  // namespace snapflow
