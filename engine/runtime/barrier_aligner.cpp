#include "engine/runtime/barrier_aligner.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow {

barrier_aligner::barrier_aligner(std::size_t num_inputs)
    : blocked_(num_inputs, false), ended_(num_inputs, false) {
  assert(num_inputs >= 1);
}

barrier_actions barrier_aligner::on_barrier(std::size_t input, const checkpoint_barrier& barrier,
                                            std::int64_t now_us) {
  assert(input < blocked_.size());
  barrier_actions out;
  // End-of-input is the last thing a channel carries: anything after it (a broken peer) is
  // ignored, as are stale barriers.
  if (ended_[input]) return out;
  if (barrier.id <= last_handled_id_ || aborted_ahead_.contains(barrier.id)) return out;
  if (aligning_ && barrier.id < aligning_->id) return out;  // older than the one aligned
  if (aligning_ && barrier.id == aligning_->id) {
    if (blocked_[input]) return out;  // a duplicate from the same input
    blocked_[input] = true;
    ++num_blocked_;
    maybe_complete(now_us, out);
    return out;
  }
  if (aligning_) {
    // A newer checkpoint overtook the one being aligned: give the older one up.
    const checkpoint_id older = aligning_->id;
    out.push_back(abort_snapshot{older, checkpoint_failure_reason::checkpoint_declined_subsumed,
                                 "barrier " + std::to_string(barrier.id) +
                                     " arrived while aligning checkpoint " +
                                     std::to_string(older)});
    release_all();
    mark_handled(older);
  }
  start_alignment(input, barrier, now_us, out);
  return out;
}

barrier_actions barrier_aligner::on_end_of_input(std::size_t input, std::int64_t now_us) {
  assert(input < ended_.size());
  barrier_actions out;
  if (ended_[input]) return out;
  ended_[input] = true;
  ++num_ended_;
  if (blocked_[input]) {
    // Cannot happen with a well-behaved producer (end-of-input follows the barrier, and the
    // input is not read while blocked); keep the counts right regardless.
    blocked_[input] = false;
    --num_blocked_;
  }
  if (aligning_) maybe_complete(now_us, out);
  return out;
}

bool barrier_aligner::on_checkpoint_aborted(checkpoint_id id) {
  if (aligning_ && aligning_->id == id) {
    release_all();
    mark_handled(id);
    return true;
  }
  if (id > last_handled_id_ && (!aligning_ || id > aligning_->id)) {
    aborted_ahead_.insert(id);
    if (aborted_ahead_.size() > aborted_ahead_limit) aborted_ahead_.erase(aborted_ahead_.begin());
  }
  return false;
}

void barrier_aligner::start_alignment(std::size_t input, const checkpoint_barrier& barrier,
                                      std::int64_t now_us, barrier_actions& out) {
  assert(!aligning_);
  assert(num_blocked_ == 0);
  aligning_ = barrier;
  alignment_start_us_ = now_us;
  bytes_during_alignment_ = 0;
  records_held_ = 0;
  records_after_barrier_ = 0;
  blocked_[input] = true;
  num_blocked_ = 1;
  maybe_complete(now_us, out);
}

void barrier_aligner::maybe_complete(std::int64_t now_us, barrier_actions& out) {
  assert(aligning_);
  if (num_blocked_ + num_ended_ < blocked_.size()) return;
  trigger_snapshot t{*aligning_, std::max<std::int64_t>(0, now_us - alignment_start_us_),
                     bytes_during_alignment_, records_held_, records_after_barrier_};
  const checkpoint_id id = aligning_->id;
  release_all();
  mark_handled(id);
  out.push_back(std::move(t));
}

void barrier_aligner::release_all() {
  std::fill(blocked_.begin(), blocked_.end(), false);
  num_blocked_ = 0;
  aligning_.reset();
  bytes_during_alignment_ = 0;
  records_held_ = 0;
  records_after_barrier_ = 0;
}

void barrier_aligner::mark_handled(checkpoint_id id) {
  last_handled_id_ = std::max(last_handled_id_, id);
  // Aborts noted ahead of time are stale once their id is handled.
  aborted_ahead_.erase(aborted_ahead_.begin(), aborted_ahead_.upper_bound(last_handled_id_));
}

}  // namespace snapflow
