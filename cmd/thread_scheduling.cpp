#include "cmd/thread_scheduling.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cmd/process_threads.hpp"

namespace snapflow {

namespace {

int linux_policy(scheduling_policy policy) {
  switch (policy) {
    case scheduling_policy::normal:
      return SCHED_OTHER;
    case scheduling_policy::batch:
      return SCHED_BATCH;
  }
  return SCHED_OTHER;
}

}  // namespace

result<scheduling_policy> parse_scheduling_policy(std::string_view text) {
  if (text == "normal") return scheduling_policy::normal;
  if (text == "batch") return scheduling_policy::batch;
  return error{"unknown scheduling policy '" + std::string(text) + "' (normal or batch)"};
}

std::string_view to_string(scheduling_policy policy) {
  switch (policy) {
    case scheduling_policy::normal:
      return "normal";
    case scheduling_policy::batch:
      return "batch";
  }
  return "?";
}

result<void> apply_scheduling_policy(scheduling_policy policy) {
  const sched_param param{};  // priority 0: the only one the fair policies take
  return for_each_thread_of_this_process([&](pid_t tid) -> result<void> {
    if (::sched_setscheduler(tid, linux_policy(policy), &param) != 0 && errno != ESRCH)
      return error{"cannot set the " + std::string(to_string(policy)) +
                   " scheduling policy on thread " + std::to_string(tid) + ": " +
                   std::strerror(errno)};
    return {};
  });
}

std::optional<scheduling_policy> thread_scheduling_policy(pid_t tid) {
  switch (::sched_getscheduler(tid)) {
    case SCHED_OTHER:
      return scheduling_policy::normal;
    case SCHED_BATCH:
      return scheduling_policy::batch;
    default:
      return std::nullopt;
  }
}

}  // namespace snapflow
