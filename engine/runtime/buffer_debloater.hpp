#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace snapflow {

// Buffer debloating (checkpoint_config::buffer_debloat): turns the bytes of records a subtask
// consumes into the byte bound of each of its input channels, so that its inputs hold about
// `target` worth of its throughput, whatever the backpressure. A fast consumer gets the
// configured maximum; a slow one small channels, so an aligned barrier waits behind less and
// an unaligned checkpoint persists less.
//
// Throughput is bytes consumed per second of *active* time: time the task spent waiting for
// input (idle_begin / idle_end) does not count, or an idle spell would shrink the channels of a
// subtask that is about to get busy. It is averaged over the last `window` periods. The bound
// is recomputed once per period and changed only when it moved by more than a quarter (or hit
// a clamp), so the producers are not told of every wobble.
//
// Task thread only; time comes in as now_us arguments (any monotonic microsecond clock), so
// tests step it by hand.
class buffer_debloater {
 public:
  struct settings {
    std::int64_t target_us = 1'000'000;  // the time's worth of throughput a subtask's inputs hold
    std::uint64_t min_bytes = 4096;      // per channel: never below (unless above max_bytes)
    std::uint64_t max_bytes = 0;         // per channel: the configured bound, > 0
    std::size_t channels = 1;            // the subtask's input channels, > 0
    std::int64_t period_us = 200'000;
    std::size_t window = 5;  // periods averaged
  };
  static constexpr std::uint64_t default_min_bytes = 4096;

  buffer_debloater(settings s, std::int64_t now_us);

  void on_consumed(std::uint64_t bytes) { bytes_ += bytes; }
  void idle_begin(std::int64_t now_us);
  void idle_end(std::int64_t now_us);
  // Once a period has passed since the last: takes its sample and returns the new bound per
  // channel if it changed (the caller announces it on every input). Nothing otherwise.
  std::optional<std::uint64_t> update(std::int64_t now_us);

  // The bound per channel in force: max_bytes until the first change.
  std::uint64_t bound() const { return bound_; }
  // Bytes per second of active time over the window, as of the last period; 0 before.
  std::uint64_t throughput() const { return throughput_; }
  std::int64_t next_update_us() const { return period_start_us_ + settings_.period_us; }

 private:
  struct sample {
    std::uint64_t bytes = 0;
    std::int64_t active_us = 0;
  };
  std::uint64_t clamp(std::uint64_t bytes) const;

  settings settings_;
  std::uint64_t bound_;
  std::uint64_t throughput_ = 0;
  std::int64_t period_start_us_;
  std::uint64_t bytes_ = 0;       // consumed this period
  std::int64_t idle_us_ = 0;      // idle this period, ended spells
  std::optional<std::int64_t> idle_since_us_;
  std::deque<sample> samples_;    // the last `window` periods, oldest first
};

}  // namespace snapflow
