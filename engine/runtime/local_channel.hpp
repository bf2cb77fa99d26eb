#pragma once

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
class local_channel final : public output_channel, public input_channel {
 public:
  // At most `capacity_batches` batches wait for the consumer.
  explicit local_channel(std::size_t capacity_batches);
  ~local_channel() override;  // what it still queues leaves the gauge
  local_channel(const local_channel&) = delete;
  local_channel& operator=(const local_channel&) = delete;

  bool send(element_batch batch) override;
  bool can_send_now() override;
  std::optional<element_batch> try_take() override;
  void set_wakeup(std::shared_ptr<task_wakeup> wakeup) override;
  void cancel() override;

  // Counts the bytes of queued batches in `gauge` from now on (the worker's buffered-bytes
  // figure). Set before the first send.
  void set_gauge(std::shared_ptr<byte_gauge> gauge);

  std::size_t capacity() const { return capacity_; }
  std::size_t queued_batches() const;
  // The most batches ever queued at once (tests check the bound).
  std::size_t high_water_mark() const;
  bool cancelled() const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable not_full_;
  std::deque<element_batch> queue_;
  std::shared_ptr<task_wakeup> wakeup_;
  std::shared_ptr<byte_gauge> gauge_;
  std::uint64_t queued_bytes_ = 0;  // counted in gauge_
  std::size_t high_water_mark_ = 0;
  bool cancelled_ = false;
};

}  // namespace snapflow
