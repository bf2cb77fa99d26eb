#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace snapflow::testing {

// A child process with its stdout and stderr captured, always reaped: the destructor sends
// SIGKILL if it still runs and waits for it, so a failing test leaves nothing behind. A thread
// drains both pipes (a child never blocks on a full pipe) and reaps the child when they close.
class child_process {
 public:
  // argv[0] is the program path. Throws std::runtime_error if it cannot be started.
  explicit child_process(std::vector<std::string> argv);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  void send_signal(int signal);

  // Waits until stdout (or stderr) contains `text`; false when `within` passes first.
  bool wait_for_stdout(std::string_view text, std::chrono::milliseconds within);
  bool wait_for_stderr(std::string_view text, std::chrono::milliseconds within);
  // The exit code (128 + signal when killed), or nothing if it still runs after `within`.
  std::optional<int> wait_exit(std::chrono::milliseconds within);
  bool exited() const;

  // User + system CPU seconds the process used so far (/proc/<pid>/stat); 0 once reaped.
  double cpu_seconds() const;

  std::string stdout_text() const;
  std::string stderr_text() const;
  // How many times `text` occurs in stderr.
  std::size_t count_in_stderr(std::string_view text) const;

 private:
  void drain();
  bool wait_for(const std::string& buffer, std::string_view text,
                std::chrono::milliseconds within);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string out_;
  std::string err_;
  bool exited_ = false;
  int exit_code_ = -1;
  std::thread drainer_;
};

// User + system CPU seconds this process used so far, all its threads together.
double self_cpu_seconds();

// The value of `key=value` in a listening line such as snapflow-coordinator prints
// ("listening control=tcp://... rest=127.0.0.1:8081"); empty when the key is not there.
std::string listening_field(const std::string& line, const std::string& key);

}  // namespace snapflow::testing
