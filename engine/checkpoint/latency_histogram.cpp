#include "engine/checkpoint/latency_histogram.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow {

void latency_histogram::observe(std::int64_t duration_us) {
  const std::int64_t value = std::max<std::int64_t>(0, duration_us);
  // The first bound >= value; past the last bound only +Inf (count_) sees it.
  const auto it = std::lower_bound(bounds_us.begin(), bounds_us.end(), value);
  if (it != bounds_us.end()) ++buckets_[static_cast<std::size_t>(it - bounds_us.begin())];
  ++count_;
  sum_us_ += value;
}

std::uint64_t latency_histogram::cumulative_count(std::size_t bucket) const {
  assert(bucket < buckets_.size());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= bucket; ++i) total += buckets_[i];
  return total;
}

}  // namespace snapflow
