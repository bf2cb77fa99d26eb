#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace snapflow {

// A cumulative latency histogram with fixed bucket bounds, in the shape Prometheus expects:
// counts per upper bound (each observation counts in its own bucket and every larger one),
// plus the sum and the count. Fixed bounds keep observe() O(1) and allocation-free, so it can
// sit on the coordinator's ack path. Coordinator thread only.
class latency_histogram {
 public:
  // Upper bounds in microseconds, from 50 us (a zmq hop is ~50 us here) to 30 s; larger
  // values land only in the implicit +Inf bucket.
  static constexpr std::array<std::int64_t, 18> bounds_us{
      50,     100,     250,     500,     1'000,     2'500,     5'000,     10'000,     25'000,
      50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000, 30'000'000};

  // Negative durations (clock skew between processes) count as 0.
  void observe(std::int64_t duration_us);

  // Observations <= bounds_us[i], cumulative as Prometheus's `le` buckets are.
  std::uint64_t cumulative_count(std::size_t bucket) const;
  std::uint64_t count() const { return count_; }
  std::int64_t sum_us() const { return sum_us_; }

 private:
  std::array<std::uint64_t, bounds_us.size()> buckets_{};  // not cumulative
  std::uint64_t count_ = 0;
  std::int64_t sum_us_ = 0;
};

// The stages of a checkpoint as one subtask sees it, measured from its ack: trigger sent ->
// barrier at the subtask (Flink's checkpoint start delay) -> aligned (all inputs delivered the
// barrier) -> snapshot done (sync + async parts) -> ack received by the coordinator. One
// observation per stage per acknowledging subtask.
struct checkpoint_stage_histograms {
  latency_histogram trigger_to_barrier;
  latency_histogram barrier_to_aligned;
  latency_histogram aligned_to_snapshot_done;
  latency_histogram snapshot_done_to_ack;
};

}  // namespace snapflow
