#include "cmd/cli/child_processes.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace snapflow::cli {

child_processes::~child_processes() { stop_all(std::chrono::milliseconds(3000)); }

result<std::size_t> child_processes::spawn(std::string name, const std::string& program,
                                           const std::vector<std::string>& args,
                                           bool capture_stdout) {
  child c{std::move(name), -1, -1, program, args, capture_stdout};
  if (auto started = start(c); !started) return started.err();
  children_.push_back(std::move(c));
  buffers_.emplace_back();
  return children_.size() - 1;
}

result<pid_t> child_processes::respawn(std::size_t index) {
  auto& c = children_.at(index);
  if (c.pid > 0) return error{c.name + " is still running (pid " + std::to_string(c.pid) + ")"};
  if (c.stdout_fd >= 0) {
    ::close(c.stdout_fd);
    c.stdout_fd = -1;
  }
  buffers_.at(index).clear();
  if (auto started = start(c); !started) return started.err();
  return c.pid;
}

result<pid_t> child_processes::start(child& c) {
  int pipe_fds[2] = {-1, -1};
  if (c.capture_stdout && ::pipe(pipe_fds) != 0)
    return error{"cannot create a pipe: " + std::string(std::strerror(errno))};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (c.capture_stdout) {
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  }
  // A process group of its own (see the class comment).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // SIGPIPE back to its default, which `snapflow local` ignores for itself.
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &default_signals);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(c.program.c_str()));
  for (const auto& a : c.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, c.program.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (c.capture_stdout) ::close(pipe_fds[1]);
  if (rc != 0) {
    if (c.capture_stdout) ::close(pipe_fds[0]);
    return error{"cannot start " + c.program + ": " + std::strerror(rc)};
  }
  c.pid = pid;
  c.stdout_fd = c.capture_stdout ? pipe_fds[0] : -1;
  return pid;
}

std::optional<std::string> child_processes::read_line(std::size_t index,
                                                      std::chrono::milliseconds timeout) {
  auto& c = children_.at(index);
  auto& buffer = buffers_.at(index);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = buffer.find('\n'); nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return line;
    }
    if (c.stdout_fd < 0) return std::nullopt;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{c.stdout_fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n <= 0) continue;
    char chunk[4096];
    ssize_t got = ::read(c.stdout_fd, chunk, sizeof chunk);
    if (got <= 0) {
      ::close(c.stdout_fd);
      c.stdout_fd = -1;
      continue;
    }
    buffer.append(chunk, static_cast<std::size_t>(got));
  }
}

std::vector<child_processes::exit_event> child_processes::reap_exited() {
  std::vector<exit_event> out;
  for (std::size_t i = 0; i < children_.size(); ++i) {
    auto& c = children_[i];
    if (c.pid <= 0) continue;
    int status = 0;
    pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r != c.pid) continue;
    c.pid = -1;
    if (WIFEXITED(status))
      out.push_back({i, c.name + " exited with status " + std::to_string(WEXITSTATUS(status))});
    else if (WIFSIGNALED(status))
      out.push_back({i, c.name + " exited, killed by signal " + std::to_string(WTERMSIG(status)) +
                            " (" + strsignal(WTERMSIG(status)) + ")"});
    else
      out.push_back({i, c.name + " exited"});
  }
  return out;
}

void child_processes::stop_all(std::chrono::milliseconds grace) {
  // Workers first, the coordinator (spawned first) last: it sees them leave cleanly.
  for (auto it = children_.rbegin(); it != children_.rend(); ++it)
    if (it->pid > 0) ::kill(it->pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (auto& c : children_) {
    while (c.pid > 0) {
      int status = 0;
      pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid || (r < 0 && errno == ECHILD)) {
        c.pid = -1;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, &status, 0);
        c.pid = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (c.stdout_fd >= 0) {
      ::close(c.stdout_fd);
      c.stdout_fd = -1;
    }
  }
}

}  // namespace snapflow::cli
