#include "cmd/process_threads.hpp"

#include <filesystem>
#include <string>
#include <system_error>

namespace snapflow {

result<void> for_each_thread_of_this_process(const std::function<result<void>(pid_t)>& apply) {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/self/task", ec);
  if (ec) return apply(0);
  for (const auto& entry : tasks) {
    const auto tid = static_cast<pid_t>(std::stol(entry.path().filename().string()));
    if (auto r = apply(tid); !r) return r;
  }
  return {};
}

}  // namespace snapflow
