#include "cmd/thread_scheduling.hpp"

#include <sched.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "cmd/process_threads.hpp"

namespace snapflow {

namespace {

struct policy_entry {
  scheduling_policy policy;
  std::string_view name;
  int linux_policy;
};

// The one place a policy, its name and its Linux constant meet.
constexpr std::array<policy_entry, 2> policies{{
    {scheduling_policy::normal, "normal", SCHED_OTHER},
    {scheduling_policy::batch, "batch", SCHED_BATCH},
}};

const policy_entry& entry_of(scheduling_policy policy) {
  for (const auto& e : policies)
    if (e.policy == policy) return e;
  return policies[0];  // unreachable: every enumerator has an entry
}

}  // namespace

result<scheduling_policy> parse_scheduling_policy(std::string_view text) {
  for (const auto& e : policies)
    if (e.name == text) return e.policy;
  return error{"unknown scheduling policy '" + std::string(text) + "' (normal or batch)"};
}

std::string_view to_string(scheduling_policy policy) { return entry_of(policy).name; }

int linux_policy(scheduling_policy policy) { return entry_of(policy).linux_policy; }

std::string scheduling_policy_check(const std::string& text) {
  auto parsed = parse_scheduling_policy(text);
  return parsed ? std::string() : parsed.err().message;
}

result<void> apply_scheduling_policy(scheduling_policy policy) {
  const sched_param param{};  // priority 0: the only one the fair policies take
  const int linux_policy = entry_of(policy).linux_policy;
  return for_each_thread_of_this_process([&](pid_t tid) -> result<void> {
    if (::sched_setscheduler(tid, linux_policy, &param) != 0 && errno != ESRCH)
      return error{"cannot set the " + std::string(to_string(policy)) +
                   " scheduling policy on thread " + std::to_string(tid) + ": " +
                   std::strerror(errno)};
    return {};
  });
}

std::optional<scheduling_policy> thread_scheduling_policy(pid_t tid) {
  const int current = ::sched_getscheduler(tid);
  for (const auto& e : policies)
    if (e.linux_policy == current) return e.policy;
  return std::nullopt;
}

}  // namespace snapflow
