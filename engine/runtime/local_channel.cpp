#include "engine/runtime/local_channel.hpp"

#include <algorithm>
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
    const std::uint64_t bytes = record_bytes(batch);
    not_full_.wait(lock, [&] { return cancelled_ || has_room(bytes); });
    if (cancelled_) return false;
    push(std::move(batch));
    wakeup = wakeup_;
  }
  notify_consumer(wakeup, ends_in_barrier);
  return true;
}

send_status local_channel::try_send(element_batch& batch) {
  assert(!batch.empty());
  const bool ends_in_barrier = std::holds_alternative<checkpoint_barrier>(batch.back());
  std::shared_ptr<task_wakeup> wakeup;
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) return send_status::cancelled;
    if (!has_room(record_bytes(batch))) {
      room_wanted_ = true;
      return send_status::no_room;
    }
    push(std::move(batch));
    wakeup = wakeup_;
  }
  notify_consumer(wakeup, ends_in_barrier);
  return send_status::sent;
}

bool local_channel::has_room(std::uint64_t bytes) const {
  if (queue_.size() - priority_queued_.load() >= capacity_) return false;
  const std::uint64_t bound = in_flight_bytes_bound();
  const std::uint64_t queued = queued_record_bytes_.load();
  return bytes == 0 || bound == 0 || queued == 0 || queued + bytes <= bound;
}

std::uint64_t local_channel::in_flight_bytes_bound() const {
  const std::uint64_t configured = max_bytes_.load();
  const std::uint64_t announced = announced_bytes_.load();
  if (configured == 0) return announced;
  if (announced == 0) return configured;
  return std::min(configured, announced);
}

void local_channel::set_max_in_flight_bytes(std::uint64_t bytes) {
  max_bytes_.store(bytes);
  bound_changed();
}

void local_channel::announce_in_flight_bytes(std::uint64_t bytes) {
  if (announced_bytes_.exchange(bytes) == bytes) return;
  bound_changed();
}

void local_channel::bound_changed() {
  std::shared_ptr<task_wakeup> producer;
  {
    std::lock_guard lock(mutex_);
    producer = room_came(true);
  }
  not_full_.notify_all();
  if (producer) producer->notify();
}

void local_channel::push(element_batch batch) {
  queued_record_bytes_.store(queued_record_bytes_.load() + record_bytes(batch));
  if (gauge_) {
    const std::uint64_t bytes = approximate_bytes(batch);
    queued_bytes_ += bytes;
    gauge_->add(bytes);
  }
  queue_.push_back(queued{std::move(batch), false});
  const std::size_t counted = queue_.size() - priority_queued_.load();
  assert(counted <= capacity_);
  if (counted > high_water_mark_) high_water_mark_ = counted;
}

void local_channel::notify_consumer(const std::shared_ptr<task_wakeup>& wakeup,
                                    bool ends_in_barrier) {
  if (!wakeup) return;
  if (ends_in_barrier)
    wakeup->notify_barrier();
  else
    wakeup->notify();
}

std::shared_ptr<task_wakeup> local_channel::room_came(bool freed) {
  if (!freed || !room_wanted_) return nullptr;
  room_wanted_ = false;
  return room_wakeup_;
}

void local_channel::set_room_wakeup(std::shared_ptr<task_wakeup> wakeup) {
  std::lock_guard lock(mutex_);
  room_wakeup_ = std::move(wakeup);
}

bool local_channel::send_priority(element_batch batch) {
  assert(is_single_barrier(batch));
  std::shared_ptr<task_wakeup> wakeup;
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) return false;
    if (gauge_) {
      const std::uint64_t bytes = approximate_bytes(batch);
      queued_bytes_ += bytes;
      gauge_->add(bytes);
    }
    queue_.push_back(queued{std::move(batch), true});
    priority_queued_.fetch_add(1);
    wakeup = wakeup_;
  }
  // A plain wake-up, not notify_barrier: a barrier runner takes the barrier at the front of
  // the queue, and this one is behind the batches it overtakes; the task thread finds it.
  if (wakeup) wakeup->notify();
  return true;
}

bool local_channel::can_send_now() {
  // One producer: room seen here is still there at its next send.
  std::lock_guard lock(mutex_);
  return !cancelled_ && has_room(0);
}

element_batch local_channel::extract(std::deque<queued>::iterator at, bool& freed) {
  if (gauge_) {
    const std::uint64_t bytes = approximate_bytes(at->batch);
    queued_bytes_ -= bytes;
    gauge_->subtract(bytes);
  }
  queued_record_bytes_.store(queued_record_bytes_.load() - record_bytes(at->batch));
  freed = !at->priority;
  if (at->priority) priority_queued_.fetch_sub(1);
  element_batch batch = std::move(at->batch);
  queue_.erase(at);
  return batch;
}

std::optional<element_batch> local_channel::try_take() {
  std::optional<element_batch> out;
  bool freed = false;
  std::shared_ptr<task_wakeup> producer;
  {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return std::nullopt;
    out = extract(queue_.begin(), freed);
    producer = room_came(freed);
  }
  if (freed) not_full_.notify_one();
  if (producer) producer->notify();
  return out;
}

std::optional<queued_barrier> local_channel::take_first_barrier() {
  std::optional<queued_barrier> out;
  bool freed = false;
  std::shared_ptr<task_wakeup> producer;
  {
    std::lock_guard lock(mutex_);
    out = take_first_barrier_of(queue_, [&](auto it) { return extract(it, freed); });
    producer = room_came(freed);
  }
  if (freed) not_full_.notify_one();
  if (producer) producer->notify();
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
  std::shared_ptr<task_wakeup> producer;
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    queue_.clear();
    priority_queued_ = 0;
    queued_record_bytes_ = 0;
    if (gauge_) gauge_->subtract(queued_bytes_);
    queued_bytes_ = 0;
    wakeup = wakeup_;
    producer = room_wakeup_;
  }
  not_full_.notify_all();
  if (wakeup) wakeup->notify();
  if (producer) producer->notify();
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
