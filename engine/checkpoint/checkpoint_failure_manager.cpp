#include "engine/checkpoint/checkpoint_failure_manager.hpp"

#include <cassert>
#include <sstream>
#include <utility>

namespace snapflow {

checkpoint_failure_manager::checkpoint_failure_manager(int tolerable_failures, callbacks cb)
    : tolerable_failures_(tolerable_failures), callbacks_(std::move(cb)) {
  assert(tolerable_failures >= 0);
  assert(callbacks_.fail_job);
  assert(callbacks_.fail_job_due_to_task_failure);
}

void checkpoint_failure_manager::handle_checkpoint_failure(
    std::optional<checkpoint_id> id, checkpoint_failure_reason reason, const std::string& message,
    std::optional<execution_attempt_id> failing_task) {
  if (!counts_toward_tolerable(reason)) return;
  if (job_failed_) return;
  if (id) {
    if (last_success_ && *id <= *last_success_) return;
    if (!counted_.insert(*id).second) return;
  }
  ++count_;
  assert(count_ <= tolerable_failures_ + 1);
  assert(counted_.size() <= static_cast<std::size_t>(count_));
  if (count_ <= tolerable_failures_) return;

  // Set before calling out: the callback may re-enter (reset on an immediate restart).
  job_failed_ = true;
  std::ostringstream cause;
  cause << "exceeded the tolerable number of failed checkpoints (" << tolerable_failures_
        << "): " << count_ << " failed in a row, the last ";
  if (id)
    cause << "checkpoint " << *id;
  else
    cause << "checkpoint request";
  cause << " with " << reason;
  if (!message.empty()) cause << ": " << message;
  if (failing_task)
    callbacks_.fail_job_due_to_task_failure(cause.str(), *failing_task);
  else
    callbacks_.fail_job(cause.str());
}

void checkpoint_failure_manager::handle_checkpoint_success(checkpoint_id id) {
  // Completions arrive in id order, but a stale one must not move the mark back.
  if (!last_success_ || id > *last_success_) last_success_ = id;
  reset();
}

void checkpoint_failure_manager::reset() {
  count_ = 0;
  job_failed_ = false;
  counted_.clear();
}

}  // namespace snapflow
