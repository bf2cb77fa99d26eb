#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "graph/result.hpp"

namespace snapflow::cli {

// The coordinator and workers `snapflow local` starts. Every child is reaped when this object
// goes away (SIGTERM, a grace period, then SIGKILL), so Ctrl-C or an error never leaves
// processes behind.
class child_processes {
 public:
  child_processes() = default;
  ~child_processes();
  child_processes(const child_processes&) = delete;
  child_processes& operator=(const child_processes&) = delete;

  struct child {
    std::string name;
    pid_t pid = -1;
    int stdout_fd = -1;  // read end of its stdout when captured, else -1
  };

  // Starts `program` with `args`. With capture_stdout the child's stdout is a pipe the caller
  // reads (read_line); its stderr is inherited either way.
  result<std::size_t> spawn(std::string name, const std::string& program,
                            const std::vector<std::string>& args, bool capture_stdout);
  // One line of a captured stdout, waiting at most `timeout`.
  std::optional<std::string> read_line(std::size_t index, std::chrono::milliseconds timeout);
  // Children that exited since the last call, with a description of how.
  std::vector<std::string> reap_exited();
  void stop_all(std::chrono::milliseconds grace);
  const std::vector<child>& children() const { return children_; }

 private:
  std::vector<child> children_;
  std::vector<std::string> buffers_;
};

}  // namespace snapflow::cli
