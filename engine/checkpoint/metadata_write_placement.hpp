#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "engine/checkpoint/completed_checkpoint.hpp"

namespace snapflow {

// Where the coordinator writes a checkpoint's _metadata: inline on its event thread, or on its
// I/O pool.
//
// The pool keeps a slow disk (an fsync can take tens of milliseconds) from stalling the acks,
// triggers and heartbeats the event thread serves. But each trip costs two thread hand-offs,
// to the pool and back, and on a fast disk (tmpfs, a drive with a power-safe write cache)
// those wake-ups are most of the time between the last ack and "complete" (docs/benchmarks.md,
// "Where a checkpoint's time goes"). So every write is timed, wherever it ran, and a write goes
// inline only while the last `window` writes were all faster than `inline_max` and the metadata is
// small. One slow write sends the following `window` writes back to the pool, where they are
// timed again. The most the event thread can be stalled is one write that turns slow with no
// warning. Savepoints always go to the pool: they may be on another disk.
//
// Not thread-safe: the coordinator calls it on its event thread only (a pool write's time
// travels back with its result).
class metadata_write_placement {
 public:
  struct options {
    // A write this slow or slower sends the next `window` writes to the pool. Zero: every
    // write goes to the pool.
    std::chrono::microseconds inline_max{500};
    // Fast writes in a row needed before writing inline (at least 1).
    std::size_t window = 8;
    // Metadata larger than this (estimated_metadata_bytes) is encoded and written on the pool:
    // the encoding itself grows with the checkpoint.
    std::size_t inline_max_bytes = 64 * 1024;
  };

  metadata_write_placement() = default;
  explicit metadata_write_placement(options o);

  bool write_inline(const completed_checkpoint& checkpoint) const;
  // The time part of write_inline: the last `window` writes were all fast. The coordinator
  // places a checkpoint folder's creation with a second instance of this class.
  bool recent_writes_fast() const;
  // How long one write took, inline or on the pool.
  void record(std::chrono::microseconds took);

  std::uint64_t inline_writes() const { return inline_writes_; }
  void count_inline_write() { ++inline_writes_; }
  const options& settings() const { return options_; }

 private:
  options options_;
  std::size_t fast_in_a_row_ = 0;
  std::uint64_t inline_writes_ = 0;
};

// About how many bytes a checkpoint's _metadata encodes to (an upper estimate).
std::size_t estimated_metadata_bytes(const completed_checkpoint& checkpoint);

}  // namespace snapflow
