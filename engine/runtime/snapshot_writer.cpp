#include "engine/runtime/snapshot_writer.hpp"

#include <cassert>

namespace snapflow {

snapshot_writer::snapshot_writer(std::size_t threads, std::size_t queue_capacity)
    : capacity_(queue_capacity) {
  assert(threads >= 1);
  assert(capacity_ >= 1);
  threads_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

snapshot_writer::~snapshot_writer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  not_empty_.notify_all();
  for (auto& t : threads_) t.join();
}

void snapshot_writer::submit(std::function<void()> job) {
  assert(job);
  {
    std::unique_lock lock(mutex_);
    assert(!stopping_);
    not_full_.wait(lock, [&] { return queue_.size() < capacity_; });
    queue_.push_back(std::move(job));
  }
  not_empty_.notify_one();
}

bool snapshot_writer::try_submit(std::function<void()>& job) {
  assert(job);
  {
    std::lock_guard lock(mutex_);
    assert(!stopping_);
    if (queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(job));
  }
  not_empty_.notify_one();
  return true;
}

void snapshot_writer::drain() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
}

std::size_t snapshot_writer::completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

void snapshot_writer::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      not_empty_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    not_full_.notify_one();
    job();
    {
      std::lock_guard lock(mutex_);
      --running_;
      ++completed_;
      if (queue_.empty() && running_ == 0) idle_.notify_all();
    }
  }
}

}  // namespace snapflow
