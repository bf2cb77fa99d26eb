#include "engine/runtime/barrier_tracker.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow {

barrier_tracker::barrier_tracker(std::size_t num_inputs) : ended_(num_inputs, false) {
  assert(num_inputs >= 1);
}

bool barrier_tracker::complete(const counting& c) const {
  for (std::size_t i = 0; i < ended_.size(); ++i)
    if (!ended_[i] && !c.seen[i]) return false;
  return true;
}

barrier_actions barrier_tracker::on_barrier(std::size_t input, const checkpoint_barrier& barrier,
                                            std::int64_t now_us) {
  assert(input < ended_.size());
  barrier_actions out;
  if (ended_[input]) return out;  // nothing may follow end-of-input
  if (barrier.id <= last_handled_id_ || aborted_.contains(barrier.id)) return out;
  auto it = pending_.find(barrier.id);
  if (it == pending_.end()) {
    if (pending_.size() == max_tracked) {
      // Bounded: the oldest checkpoint still counted is the least likely to complete.
      auto oldest = pending_.begin();
      out.push_back(abort_snapshot{oldest->first,
                                   checkpoint_failure_reason::checkpoint_declined_subsumed,
                                   "too many checkpoints in flight at this subtask"});
      last_handled_id_ = std::max(last_handled_id_, oldest->first);
      pending_.erase(oldest);
    }
    counting c{barrier, std::vector<bool>(ended_.size(), false), 0, now_us, 0};
    it = pending_.emplace(barrier.id, std::move(c)).first;
  }
  if (it->second.seen[input]) return out;  // duplicate from the same input
  it->second.seen[input] = true;
  ++it->second.num_seen;
  if (complete(it->second)) trigger(it, now_us, out);
  return out;
}

barrier_actions barrier_tracker::on_end_of_input(std::size_t input, std::int64_t now_us) {
  assert(input < ended_.size());
  barrier_actions out;
  if (ended_[input]) return out;
  ended_[input] = true;
  ++num_ended_;
  // Newest first: triggering it gives up the older ones anyway.
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (complete(it->second)) {
      trigger(std::next(it).base(), now_us, out);
      break;
    }
  }
  return out;
}

bool barrier_tracker::on_checkpoint_aborted(checkpoint_id id) {
  if (id <= last_handled_id_) return false;
  aborted_.insert(id);
  if (aborted_.size() > aborted_limit) aborted_.erase(aborted_.begin());
  return pending_.erase(id) > 0;
}

void barrier_tracker::trigger(std::map<checkpoint_id, counting>::iterator it, std::int64_t now_us,
                              barrier_actions& out) {
  const checkpoint_id id = it->first;
  for (auto older = pending_.begin(); older != it; ++older)
    out.push_back(
        abort_snapshot{older->first, checkpoint_failure_reason::checkpoint_declined_subsumed,
                       "checkpoint " + std::to_string(id) + " completed its barriers first"});
  // Nothing is ever held back here: records_held_during_alignment stays 0.
  out.push_back(trigger_snapshot{it->second.barrier,
                                 std::max<std::int64_t>(0, now_us - it->second.first_us), 0, 0,
                                 it->second.records_after_barrier});
  pending_.erase(pending_.begin(), std::next(it));
  last_handled_id_ = std::max(last_handled_id_, id);
  aborted_.erase(aborted_.begin(), aborted_.upper_bound(last_handled_id_));
}

}  // namespace snapflow
