#include "engine/checkpoint/checkpoint_failure_reason.hpp"

#include <array>

namespace snapflow {

namespace {
constexpr std::array<std::string_view, checkpoint_failure_reason_count> names = {
    "periodic_scheduler_shutdown",
    "too_many_checkpoint_requests",
    "minimum_time_between_checkpoints",
    "not_all_required_tasks_running",
    "io_exception",
    "checkpoint_expired",
    "checkpoint_subsumed",
    "checkpoint_declined",
    "checkpoint_declined_task_not_ready",
    "checkpoint_declined_subsumed",
    "checkpoint_declined_on_cancellation_barrier",
    "checkpoint_async_exception",
    "finalize_checkpoint_failure",
    "trigger_checkpoint_failure",
    "checkpoint_coordinator_shutdown",
    "checkpoint_coordinator_suspend",
    "task_failure",
    "job_failover",
    "checkpoint_declined_task_closing",
};
}  // namespace

std::string_view to_string(checkpoint_failure_reason reason) {
  auto i = static_cast<std::size_t>(reason);
  return i < names.size() ? names[i] : std::string_view("unknown");
}

std::optional<checkpoint_failure_reason> parse_checkpoint_failure_reason(std::string_view text) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<checkpoint_failure_reason>(i);
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, checkpoint_failure_reason reason) {
  return os << to_string(reason);
}

bool counts_toward_tolerable(checkpoint_failure_reason reason) {
  using enum checkpoint_failure_reason;
  // Every reason listed, no default: a new reason must be decided on here (-Wswitch).
  switch (reason) {
    case io_exception:
    case checkpoint_async_exception:
    case checkpoint_declined:
    case checkpoint_expired:
      return true;
    case periodic_scheduler_shutdown:
    case too_many_checkpoint_requests:
    case minimum_time_between_checkpoints:
    case not_all_required_tasks_running:
    case checkpoint_subsumed:
    case checkpoint_declined_task_not_ready:
    case checkpoint_declined_subsumed:
    case checkpoint_declined_on_cancellation_barrier:
    case checkpoint_declined_task_closing:
    case finalize_checkpoint_failure:
    case trigger_checkpoint_failure:
    case checkpoint_coordinator_shutdown:
    case checkpoint_coordinator_suspend:
    case task_failure:
    case job_failover:
      return false;
  }
  return false;  // not a reason (a corrupt value): nothing to count
}

}  // namespace snapflow
