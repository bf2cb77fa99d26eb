#include "engine/runtime/local_channel.hpp"

#include <cassert>
#include <variant>

namespace snapflow {

local_channel::local_channel(std::size_t capacity_batches) : capacity_(capacity_batches) {
  assert(capacity_ >= 1);
}

bool local_channel::send(element_batch batch) {
  assert(!batch.empty());
  const bool ends_in_barrier = std::holds_alternative<checkpoint_barrier>(batch.back());
  std::shared_ptr<task_wakeup> wakeup;
  {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return cancelled_ || queue_.size() < capacity_; });
    if (cancelled_) return false;
    if (gauge_) {
      const std::uint64_t bytes = approximate_bytes(batch);
      queued_bytes_ += bytes;
      gauge_->add(bytes);
    }
    queue_.push_back(std::move(batch));
    assert(queue_.size() <= capacity_);
    if (queue_.size() > high_water_mark_) high_water_mark_ = queue_.size();
    wakeup = wakeup_;
  }
  if (wakeup) {
    if (ends_in_barrier)
      wakeup->notify_barrier();
    else
      wakeup->notify();
  }
  return true;
}

bool local_channel::can_send_now() {
  // One producer: room seen here is still there at its next send.
  std::lock_guard lock(mutex_);
  return !cancelled_ && queue_.size() < capacity_;
}

std::optional<element_batch> local_channel::try_take() {
  std::optional<element_batch> out;
  {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return std::nullopt;
    out = std::move(queue_.front());
    queue_.pop_front();
    if (gauge_) {
      const std::uint64_t bytes = approximate_bytes(*out);
      queued_bytes_ -= bytes;
      gauge_->subtract(bytes);
    }
  }
  not_full_.notify_one();
  return out;
}

void local_channel::set_gauge(std::shared_ptr<byte_gauge> gauge) {
  std::lock_guard lock(mutex_);
  assert(queue_.empty());
  gauge_ = std::move(gauge);
}

local_channel::~local_channel() {
  if (gauge_) gauge_->subtract(queued_bytes_);
}

void local_channel::set_wakeup(std::shared_ptr<task_wakeup> wakeup) {
  std::lock_guard lock(mutex_);
  wakeup_ = std::move(wakeup);
}

void local_channel::cancel() {
  std::shared_ptr<task_wakeup> wakeup;
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    queue_.clear();
    if (gauge_) gauge_->subtract(queued_bytes_);
    queued_bytes_ = 0;
    wakeup = wakeup_;
  }
  not_full_.notify_all();
  if (wakeup) wakeup->notify();
}

std::size_t local_channel::queued_batches() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

std::size_t local_channel::high_water_mark() const {
  std::lock_guard lock(mutex_);
  return high_water_mark_;
}

bool local_channel::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

}  // namespace snapflow
