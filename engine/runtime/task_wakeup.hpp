#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
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

  // A task that may take a barrier on the thread that delivers it sets a runner
  // (stream_task::run_barrier_on_caller); null removes it, after any run in progress ended.
  // The runner returns true when it took everything it found, false to have the task thread
  // woken as by notify().
  void set_barrier_runner(std::function<bool()> runner) {
    std::lock_guard run(runner_mutex_);
    runner_ = std::move(runner);
  }

  // A batch ending in a barrier was put on one of the task's inputs. The caller must hold no
  // lock the task's own work may take (its channels', its transport's): the runner may run the
  // task's checkpoint here, and on down the pipeline to the tasks it feeds (acyclic, so these
  // locks are always taken downstream). Never waits: with another thread in the runner, the
  // task thread is woken instead.
  void notify_barrier() {
    {
      std::unique_lock run(runner_mutex_, std::try_to_lock);
      if (run.owns_lock() && runner_ && runner_()) return;
    }
    notify();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::uint64_t generation_ = 0;
  std::mutex runner_mutex_;  // held while the runner runs
  std::function<bool()> runner_;
};

}  // namespace snapflow
