#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

#include "engine/runtime/byte_gauge.hpp"
#include "engine/runtime/channel.hpp"

namespace snapflow {

// A data channel between two subtasks of one process: a bounded queue of batches shared by both
// ends. Thread-safe: one producer thread and one consumer thread (any thread may cancel).
// Batches sent by send_priority join the back of the queue beyond the capacity: they do not
// count against it, so they neither wait for room nor hold a later send back. A try_send that
// found the queue full has the consumer's next take notify the producer's room wakeup.
//
// Byte bound (set_max_in_flight_bytes, announce_in_flight_bytes): the bytes of records queued
// count too: a batch with records goes only while they stay within the bound with it, or while
// nothing with records is queued. A batch without records (a barrier, an end of input) is held
// by the batch count only: it adds no bytes.
class local_channel final : public output_channel, public input_channel {
 public:
  // At most `capacity_batches` batches wait for the consumer.
  explicit local_channel(std::size_t capacity_batches);
  ~local_channel() override;  // what it still queues leaves the gauge
  local_channel(const local_channel&) = delete;
  local_channel& operator=(const local_channel&) = delete;

  bool send(element_batch batch) override;
  send_status try_send(element_batch& batch) override;
  void set_room_wakeup(std::shared_ptr<task_wakeup> wakeup) override;
  bool send_priority(element_batch batch) override;
  bool can_send_now() override;
  std::optional<element_batch> try_take() override;
  std::optional<queued_barrier> take_first_barrier() override;
  bool has_priority_barrier() const override { return priority_queued_.load() > 0; }
  void set_wakeup(std::shared_ptr<task_wakeup> wakeup) override;
  void cancel() override;
  // Both ends share it: the producer's and the consumer's configured bound are the same.
  void set_max_in_flight_bytes(std::uint64_t bytes) override;
  std::uint64_t in_flight_bytes_bound() const override;
  void announce_in_flight_bytes(std::uint64_t bytes) override;
  std::uint64_t buffered_record_bytes() const override { return queued_record_bytes_.load(); }

  // Counts the bytes of queued batches in `gauge` from now on (the worker's buffered-bytes
  // figure). Set before the first send.
  void set_gauge(std::shared_ptr<byte_gauge> gauge);

  std::size_t capacity() const { return capacity_; }
  // Batches queued, priority ones included.
  std::size_t queued_batches() const;
  // The most batches ever queued at once, priority ones left out (tests check the bound).
  std::size_t high_water_mark() const;
  bool cancelled() const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable not_full_;
  struct queued {
    element_batch batch;
    bool priority = false;  // by send_priority: not counted against capacity_
  };
  // Whether one more batch of send() with `bytes` of records fits. Under mutex_.
  bool has_room(std::uint64_t bytes) const;
  // After the bound grew: a producer waiting for room may go. Outside mutex_.
  void bound_changed();
  // Takes the queued batch at `at` out of the queue and the gauge. Under mutex_; `freed` says
  // whether it held room (a blocked send() may go now).
  element_batch extract(std::deque<queued>::iterator at, bool& freed);
  // Queues a batch of send() or try_send() that has room. Under mutex_.
  void push(element_batch batch);
  // After a take freed room (`freed`): the producer's wakeup to notify, when a try_send is
  // waiting for room (once per no_room). Under mutex_.
  std::shared_ptr<task_wakeup> room_came(bool freed);
  // Outside mutex_: the consumer's wakeup (a batch ending in a barrier may be taken on the
  // caller's thread, task_wakeup::notify_barrier).
  static void notify_consumer(const std::shared_ptr<task_wakeup>& wakeup, bool ends_in_barrier);

  std::deque<queued> queue_;
  std::atomic<std::size_t> priority_queued_{0};  // written under mutex_
  std::shared_ptr<task_wakeup> wakeup_;       // the consumer's
  std::shared_ptr<task_wakeup> room_wakeup_;  // the producer's (try_send)
  bool room_wanted_ = false;  // a try_send found no room; no wakeup since
  std::shared_ptr<byte_gauge> gauge_;
  std::uint64_t queued_bytes_ = 0;  // counted in gauge_
  std::size_t high_water_mark_ = 0;
  bool cancelled_ = false;
  std::atomic<std::uint64_t> max_bytes_{0};        // configured; 0: none
  std::atomic<std::uint64_t> announced_bytes_{0};  // by the consumer (debloating); 0: none
  std::atomic<std::uint64_t> queued_record_bytes_{0};  // written under mutex_
};

}  // namespace snapflow
