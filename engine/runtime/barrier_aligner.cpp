#include "engine/runtime/barrier_aligner.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow {

namespace {

// A barrier whose checkpoint is unaligned from the first barrier on: no timeout, or forwarded
// by a subtask that already switched it.
bool unaligned_at_once(const checkpoint_barrier& b) {
  return b.options.unaligned && b.options.aligned_timeout_ms == 0;
}

}  // namespace

barrier_aligner::barrier_aligner(std::size_t num_inputs)
    : blocked_(num_inputs, false), ended_(num_inputs, false), owed_(num_inputs, false) {
  assert(num_inputs >= 1);
}

barrier_actions barrier_aligner::on_barrier(std::size_t input, const checkpoint_barrier& barrier,
                                            std::int64_t now_us, bool overtook) {
  assert(input < blocked_.size());
  barrier_actions out;
  // End-of-input is the last thing a channel carries: anything after it (a broken peer) is
  // ignored, as are stale barriers.
  if (ended_[input]) return out;
  if (barrier.id <= last_handled_id_ || aborted_ahead_.contains(barrier.id)) return out;
  if (aligning_ && barrier.id < aligning_->id) return out;  // older than the one aligned
  if (aligning_ && barrier.id == aligning_->id) {
    if (!unaligned_ && !blocked_[input] && (overtook || unaligned_at_once(barrier)))
      go_unaligned(now_us, out);
    if (unaligned_) {
      if (!owed_[input]) return out;  // a duplicate from the same input
      owed_[input] = false;
      --num_owed_;
      maybe_complete_unaligned(out);
      return out;
    }
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
  start_alignment(input, barrier, now_us, overtook, out);
  return out;
}

barrier_actions barrier_aligner::on_alignment_timeout(std::int64_t now_us) {
  barrier_actions out;
  const auto deadline = switch_deadline_us();
  if (!deadline || now_us < *deadline) return out;
  go_unaligned(now_us, out);
  maybe_complete_unaligned(out);
  return out;
}

std::optional<std::int64_t> barrier_aligner::switch_deadline_us() const {
  if (!aligning_ || unaligned_ || !aligning_->options.unaligned) return std::nullopt;
  return alignment_start_us_ + aligning_->options.aligned_timeout_ms * 1000;
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
  if (unaligned_) {
    if (owed_[input]) {
      owed_[input] = false;
      --num_owed_;
    }
    maybe_complete_unaligned(out);
  } else if (aligning_) {
    maybe_complete(now_us, out);
  }
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
                                      std::int64_t now_us, bool overtook, barrier_actions& out) {
  assert(!aligning_);
  assert(num_blocked_ == 0);
  assert(!unaligned_);
  aligning_ = barrier;
  alignment_start_us_ = now_us;
  bytes_during_alignment_ = 0;
  records_held_ = 0;
  records_after_barrier_ = 0;
  if (overtook || unaligned_at_once(barrier)) {
    go_unaligned(now_us, out);
    owed_[input] = false;
    --num_owed_;
    maybe_complete_unaligned(out);
    return;
  }
  blocked_[input] = true;
  num_blocked_ = 1;
  maybe_complete(now_us, out);
}

void barrier_aligner::go_unaligned(std::int64_t now_us, barrier_actions& out) {
  assert(aligning_);
  assert(!unaligned_);
  trigger_snapshot t{*aligning_, std::max<std::int64_t>(0, now_us - alignment_start_us_),
                     bytes_during_alignment_, records_held_, records_after_barrier_, true};
  // Downstream goes unaligned at its first barrier too: it may overtake records there.
  t.barrier.options.aligned_timeout_ms = 0;
  aligning_->options.aligned_timeout_ms = 0;
  num_owed_ = 0;
  for (std::size_t i = 0; i < owed_.size(); ++i) {
    owed_[i] = !ended_[i] && !blocked_[i];
    if (owed_[i]) ++num_owed_;
  }
  std::fill(blocked_.begin(), blocked_.end(), false);
  num_blocked_ = 0;
  unaligned_ = true;
  out.push_back(std::move(t));
}

void barrier_aligner::maybe_complete_unaligned(barrier_actions& out) {
  assert(unaligned_);
  if (num_owed_ > 0) return;
  const checkpoint_id id = aligning_->id;
  release_all();
  mark_handled(id);
  out.push_back(channel_state_complete{id});
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
  std::fill(owed_.begin(), owed_.end(), false);
  num_owed_ = 0;
  unaligned_ = false;
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
