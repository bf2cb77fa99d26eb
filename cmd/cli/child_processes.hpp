#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/result.hpp"

namespace snapflow::cli {

// The coordinator and workers `snapflow local` starts. Every child is reaped when this object
// goes away (SIGTERM, a grace period, then SIGKILL), so Ctrl-C or an error never leaves
// processes behind. Each child runs in a process group of its own: a Ctrl-C typed at the
// terminal reaches `snapflow local` only, which then cancels the job and stops its children in
// order, instead of every process dying at once.
class child_processes {
 public:
  child_processes() = default;
  ~child_processes();
  child_processes(const child_processes&) = delete;
  child_processes& operator=(const child_processes&) = delete;

  struct child {
    std::string name;
    pid_t pid = -1;      // -1 once reaped
    int stdout_fd = -1;  // read end of its stdout when captured, else -1
    std::string program;
    std::vector<std::string> args;
    bool capture_stdout = false;
  };

  struct exit_event {
    std::size_t index = 0;
    std::string description;  // "worker-1 exited, killed by signal 9 (Killed)"
  };

  // Starts `program` with `args`. With capture_stdout the child's stdout is a pipe the caller
  // reads (read_line); its stderr is inherited either way.
  result<std::size_t> spawn(std::string name, const std::string& program,
                            const std::vector<std::string>& args, bool capture_stdout);
  // Starts child `index` again, with the program and arguments it was first started with,
  // once it has been reaped. Returns the new pid.
  result<pid_t> respawn(std::size_t index);
  // One line of a captured stdout, waiting at most `timeout`.
  std::optional<std::string> read_line(std::size_t index, std::chrono::milliseconds timeout);
  // Children that exited since the last call, with a description of how.
  std::vector<exit_event> reap_exited();
  void stop_all(std::chrono::milliseconds grace);
  const std::vector<child>& children() const { return children_; }

 private:
  result<pid_t> start(child& c);

  std::vector<child> children_;
  std::vector<std::string> buffers_;
};

}  // namespace snapflow::cli
