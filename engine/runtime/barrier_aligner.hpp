#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "engine/runtime/barrier_action.hpp"

namespace snapflow {

// Exactly-once barrier alignment for a subtask with several inputs (Flink's
// SingleCheckpointBarrierHandler in aligned mode), as a sans-I/O state machine: the task feeds
// it barriers, ends of input, aborts and time; it answers with actions and says which inputs
// are blocked.
//
// An input that delivered barrier n is blocked (the task reads nothing more from it) until
// every open input delivered n; then the snapshot is triggered and every input unblocked. So
// the snapshot reflects exactly the records before barrier n on every input.
//   - A stale barrier (id <= the last checkpoint triggered or aborted here, or older than the
//     one being aligned) is ignored: a delayed or duplicated trigger, or a barrier of a
//     checkpoint this subtask already gave up.
//   - A newer barrier while aligning aborts the older checkpoint here (declined as
//     checkpoint_declined_subsumed): its barriers on the remaining inputs may never come (the
//     coordinator may have given it up), and waiting would stall the newer one. Alignment
//     restarts for the newer id with only the input that delivered it blocked.
//   - An input that ends while aligning counts as aligned: nothing more will come from it.
//   - A notify-abort for the checkpoint being aligned releases every input.
//
// Unaligned checkpoints (barrier.options.unaligned, Flink's unaligned mode): the first barrier
// triggers the snapshot at once and blocks nothing (trigger_snapshot::unaligned); the inputs
// that have not delivered it yet owe it (owes_barrier), and the task persists what it receives
// on them until they do, which ends the checkpoint here (channel_state_complete). With an
// aligned timeout (options.aligned_timeout_ms > 0) the checkpoint starts aligned and
// on_alignment_timeout switches it to unaligned once alignment took that long: the inputs
// still open owe the barrier from then on, the blocked ones are released (what waits on them
// came after the barrier). A barrier that overtook records on its way (taken by
// input_channel::take_first_barrier) cannot be aligned on, since records before it are still
// queued behind it: it makes its checkpoint unaligned at once.
class barrier_aligner {
 public:
  explicit barrier_aligner(std::size_t num_inputs);

  // `overtook`: the barrier was taken ahead of records queued before it.
  barrier_actions on_barrier(std::size_t input, const checkpoint_barrier& barrier,
                             std::int64_t now_us, bool overtook = false);
  // Switches an aligned checkpoint that may go unaligned to unaligned once its alignment took
  // its timeout. Nothing to do before (or for a checkpoint that may not).
  barrier_actions on_alignment_timeout(std::int64_t now_us);
  // When on_alignment_timeout would switch the checkpoint being aligned, if it may.
  std::optional<std::int64_t> switch_deadline_us() const;
  barrier_actions on_end_of_input(std::size_t input, std::int64_t now_us);
  // The coordinator aborted `id` (or the task gave it up): stop aligning on it, and ignore its
  // barriers should they still come. Returns true if an alignment was released.
  bool on_checkpoint_aborted(checkpoint_id id);
  // Bytes the task processed from unblocked inputs while aligning (reported in the ack).
  void on_bytes_processed(std::uint64_t bytes) {
    if (aligning_) bytes_during_alignment_ += bytes;
  }
  // The task processed a record from `input`. One from an input that already delivered the
  // barrier being aligned would break exactly-once; the task never reads such an input, and
  // this counts it should that ever change (reported as records_after_barrier).
  void on_record_processed(std::size_t input) {
    if (aligning_ && blocked_.at(input)) ++records_after_barrier_;
  }
  // `n` records are waiting on a blocked input (reported as records_held_during_alignment).
  void on_records_held(std::uint64_t n) {
    if (aligning_) records_held_ += n;
  }

  bool is_blocked(std::size_t input) const { return blocked_.at(input); }
  // An unaligned checkpoint is in progress and `input` has not delivered its barrier yet.
  bool owes_barrier(std::size_t input) const { return unaligned_ && owed_.at(input); }
  bool is_unaligned() const { return unaligned_; }
  bool has_ended(std::size_t input) const { return ended_.at(input); }
  bool all_ended() const { return num_ended_ == blocked_.size(); }
  bool is_aligning() const { return aligning_.has_value(); }
  std::optional<checkpoint_id> aligning_id() const {
    return aligning_ ? std::optional<checkpoint_id>(aligning_->id) : std::nullopt;
  }
  // The newest checkpoint this subtask triggered or aborted; barriers up to it are stale.
  checkpoint_id last_handled_id() const { return last_handled_id_; }
  std::size_t num_inputs() const { return blocked_.size(); }
  std::size_t num_blocked() const { return num_blocked_; }

 private:
  void start_alignment(std::size_t input, const checkpoint_barrier& barrier, std::int64_t now_us,
                       bool overtook, barrier_actions& out);
  // Takes the snapshot of the checkpoint being aligned now: the open inputs not blocked owe
  // the barrier from here on.
  void go_unaligned(std::int64_t now_us, barrier_actions& out);
  void maybe_complete_unaligned(barrier_actions& out);
  void maybe_complete(std::int64_t now_us, barrier_actions& out);
  void release_all();
  void mark_handled(checkpoint_id id);

  std::vector<bool> blocked_;
  std::vector<bool> ended_;
  std::size_t num_blocked_ = 0;
  std::size_t num_ended_ = 0;
  std::optional<checkpoint_barrier> aligning_;
  // aligning_ went unaligned: its snapshot is taken, owed_ inputs have not delivered it.
  bool unaligned_ = false;
  std::vector<bool> owed_;
  std::size_t num_owed_ = 0;
  std::int64_t alignment_start_us_ = 0;
  std::uint64_t bytes_during_alignment_ = 0;
  std::uint64_t records_held_ = 0;
  std::uint64_t records_after_barrier_ = 0;
  checkpoint_id last_handled_id_ = 0;
  // Checkpoints aborted before their barrier got here; bounded (the oldest are forgotten).
  std::set<checkpoint_id> aborted_ahead_;
  static constexpr std::size_t aborted_ahead_limit = 64;
};

}  // namespace snapflow
