#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace snapflow {

// Wakes a task thread that has nothing to do. Anything that may give it work (a batch on an
// input channel, a mailbox message, a cancel) calls notify() from any thread. The task reads
// generation() before looking for work and waits only while it is unchanged, so a notify that
// lands between the look and the wait is never lost.
class task_wakeup {
 public:
  void notify() {
    {
      std::lock_guard lock(mutex_);
      ++generation_;
    }
    cv_.notify_one();
  }

  std::uint64_t generation() const {
    std::lock_guard lock(mutex_);
    return generation_;
  }

  // Returns once the generation differs from `seen` or `deadline` passed.
  void wait(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, deadline, [&] { return generation_ != seen; });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::uint64_t generation_ = 0;
};

}  // namespace snapflow
