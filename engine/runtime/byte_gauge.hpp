#pragma once

#include <atomic>
#include <cstdint>

#include "engine/runtime/stream_element.hpp"

namespace snapflow {

// Bytes held by a set of buffers (a worker's channel buffers), and the most ever held at once:
// what shows that backpressure keeps memory bounded. Any thread; lock-free. A buffer adds a
// batch's bytes when it takes the batch in and subtracts the same amount when it lets it go, so
// each add happens before its matching subtraction.
class byte_gauge {
 public:
  void add(std::uint64_t bytes) {
    const std::uint64_t now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::uint64_t high = high_water_.load(std::memory_order_relaxed);
    while (now > high && !high_water_.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
    }
  }
  void subtract(std::uint64_t bytes) { current_.fetch_sub(bytes, std::memory_order_relaxed); }

  std::uint64_t current() const { return current_.load(std::memory_order_relaxed); }
  std::uint64_t high_water() const { return high_water_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> current_{0};
  std::atomic<std::uint64_t> high_water_{0};
};

// What a batch occupies in memory: its element slots (capacity, not size: a batch reserves
// room for a full one) plus the record payloads on the heap. Barriers' small strings are left
// out; they are a handful per checkpoint.
// Roughly what one record costs to move or persist (alignment and channel state metrics).
inline std::uint64_t approximate_bytes(const record& r) { return sizeof(record) + r.payload.size(); }

// The bytes of the records of a batch, as approximate_bytes(record) counts them: what the byte
// bound of a channel (checkpoint_config::max_in_flight_bytes) and channel state count.
inline std::uint64_t record_bytes(const element_batch& batch) {
  std::uint64_t bytes = 0;
  for (const auto& e : batch)
    if (const auto* r = std::get_if<record>(&e)) bytes += approximate_bytes(*r);
  return bytes;
}

inline std::uint64_t approximate_bytes(const element_batch& batch) {
  std::uint64_t bytes = batch.capacity() * sizeof(stream_element);
  for (const auto& e : batch)
    if (const auto* r = std::get_if<record>(&e)) bytes += r->payload.size();
  return bytes;
}

}  // namespace snapflow
