#include "engine/hop_trace.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>

namespace snapflow::hop_trace {

namespace {

std::atomic<std::FILE*> trace_file{nullptr};
std::mutex write_mutex;  // one line at a time; also guards start() and stop()
std::once_flag from_environment;

// Creates the folder if needed: every process of a cluster writes its own file into it, and
// the first one to start cannot know whether another made it already.
std::FILE* open_in(const std::string& folder, std::string& why) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    why = "cannot create the folder " + folder + ": " + ec.message();
    return nullptr;
  }
  const std::string path =
      folder + "/hops-" + std::to_string(static_cast<long>(::getpid())) + ".txt";
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) why = "cannot open " + path + ": " + std::strerror(errno);
  return f;
}

void start_from_environment() {
  std::call_once(from_environment, [] {
    std::lock_guard lock(write_mutex);
    const char* folder = std::getenv("SNAPFLOW_HOP_TRACE");
    std::string why;
    std::FILE* f = folder == nullptr || *folder == '\0' ? nullptr : open_in(folder, why);
    if (f != nullptr)
      trace_file.store(f, std::memory_order_release);
    else if (!why.empty())
      std::fprintf(stderr, "SNAPFLOW_HOP_TRACE: %s; hop tracing is off\n", why.c_str());
    // start() may have run first (it reads the environment first too, so not before this).
    detail::may_trace.store(trace_file.load(std::memory_order_acquire) != nullptr,
                            std::memory_order_relaxed);
  });
}

}  // namespace

std::atomic<bool> detail::may_trace{true};

bool enabled() {
  start_from_environment();
  return trace_file.load(std::memory_order_acquire) != nullptr;
}

std::optional<std::string> start(const std::string& folder) {
  start_from_environment();  // so a later first record cannot replace this file
  std::string why;
  std::FILE* f = open_in(folder, why);
  if (f == nullptr) return why;
  std::lock_guard lock(write_mutex);
  if (std::FILE* old = trace_file.exchange(f, std::memory_order_acq_rel)) std::fclose(old);
  detail::may_trace.store(true, std::memory_order_relaxed);
  return std::nullopt;
}

void stop() {
  start_from_environment();
  std::lock_guard lock(write_mutex);
  if (std::FILE* old = trace_file.exchange(nullptr, std::memory_order_acq_rel)) std::fclose(old);
  detail::may_trace.store(false, std::memory_order_relaxed);
}

void detail::record_traced(const char* event, std::int64_t value) {
  start_from_environment();
  if (trace_file.load(std::memory_order_acquire) == nullptr) return;
  const long tid = ::syscall(SYS_gettid);
  std::lock_guard lock(write_mutex);
  std::FILE* f = trace_file.load(std::memory_order_acquire);  // stop() may have run meanwhile
  if (f == nullptr) return;
  // Stamped under the lock, so each file is in time order.
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const long long us = static_cast<long long>(now.tv_sec) * 1'000'000 + now.tv_nsec / 1000;
  std::fprintf(f, "%lld %ld %s %lld\n", us, tid, event, static_cast<long long>(value));
  std::fflush(f);  // a killed process keeps what it traced
}

}  // namespace snapflow::hop_trace
