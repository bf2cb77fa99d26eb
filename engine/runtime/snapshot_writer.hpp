#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace snapflow {

// The asynchronous part of snapshots: a few threads that write state files (and fsync sink
// files) and then acknowledge, so the task threads go on processing records meanwhile. Shared
// by the tasks of a process. The queue is bounded: a task that outruns the disk waits in
// submit(), which slows its checkpoints down rather than growing memory.
class snapshot_writer {
 public:
  snapshot_writer(std::size_t threads, std::size_t queue_capacity = 1024);
  ~snapshot_writer();  // runs what is queued, then joins
  snapshot_writer(const snapshot_writer&) = delete;
  snapshot_writer& operator=(const snapshot_writer&) = delete;

  void submit(std::function<void()> job);
  // submit() without waiting: false (and `job` left as it was) while the queue is full.
  bool try_submit(std::function<void()>& job);
  // Waits until every job submitted so far has run (a restart waits for the old attempts'
  // acknowledgements to be out before it restores).
  void drain();
  std::size_t completed() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  std::size_t capacity_;
  std::size_t running_ = 0;
  std::size_t completed_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace snapflow
