#include "tests/cluster/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace snapflow::testing {

child_process::child_process(std::vector<std::string> argv) {
  std::array<int, 2> out{};
  std::array<int, 2> err{};
  if (::pipe2(out.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (::pipe2(err.data(), O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error("pipe failed");
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  drainer_ = std::thread([this] { drain(); });
}

child_process::~child_process() {
  {
    std::lock_guard lock(mutex_);
    // Reaping happens under this lock too, so the pid cannot have been reused here.
    if (!exited_) ::kill(pid_, SIGKILL);
  }
  drainer_.join();
  ::close(out_fd_);
  ::close(err_fd_);
}

void child_process::drain() {
  std::array<pollfd, 2> fds{{{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}}};
  std::array<char, 4096> buffer{};
  int open = 2;
  while (open > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n > 0) {
        std::lock_guard lock(mutex_);
        (i == 0 ? out_ : err_).append(buffer.data(), static_cast<std::size_t>(n));
        changed_.notify_all();
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // poll skips negative descriptors
        --open;
      }
    }
  }
  // Wait without reaping, then reap under the lock the destructor's kill takes.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0 &&
         errno == EINTR) {
  }
  std::lock_guard lock(mutex_);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  changed_.notify_all();
}

void child_process::send_signal(int signal) {
  std::lock_guard lock(mutex_);
  if (!exited_) ::kill(pid_, signal);
}

bool child_process::wait_for(const std::string& buffer, std::string_view text,
                             std::chrono::milliseconds within) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, within, [&] {
    return buffer.find(text) != std::string::npos || exited_;
  }) && buffer.find(text) != std::string::npos;
}

bool child_process::wait_for_stdout(std::string_view text, std::chrono::milliseconds within) {
  return wait_for(out_, text, within);
}

bool child_process::wait_for_stderr(std::string_view text, std::chrono::milliseconds within) {
  return wait_for(err_, text, within);
}

std::optional<int> child_process::wait_exit(std::chrono::milliseconds within) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, within, [&] { return exited_; })) return std::nullopt;
  return exit_code_;
}

bool child_process::exited() const {
  std::lock_guard lock(mutex_);
  return exited_;
}

std::string child_process::stdout_text() const {
  std::lock_guard lock(mutex_);
  return out_;
}

std::string child_process::stderr_text() const {
  std::lock_guard lock(mutex_);
  return err_;
}

std::size_t child_process::count_in_stderr(std::string_view text) const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (auto at = err_.find(text); at != std::string::npos; at = err_.find(text, at + 1)) ++n;
  return n;
}

double child_process::cpu_seconds() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  double ticks = 0;
  // After the name: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i >= 14) ticks += std::stod(field);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double self_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string listening_field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + "=");
  if (at == std::string::npos) return {};
  const auto start = at + key.size() + 1;
  const auto end = line.find_first_of(" \n", start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace snapflow::testing
