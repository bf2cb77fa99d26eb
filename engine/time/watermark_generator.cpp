#include "engine/time/watermark_generator.hpp"

#include <algorithm>
#include <utility>

namespace snapflow {

watermark_generator::watermark_generator(std::int64_t max_out_of_orderness_ms,
                                         std::int64_t idle_ms)
    : max_out_of_orderness_ms_(std::max<std::int64_t>(0, max_out_of_orderness_ms)),
      idle_ms_(std::max<std::int64_t>(0, idle_ms)) {}

void watermark_generator::on_event(std::uint32_t split, std::int64_t timestamp,
                                   std::int64_t now_ms) {
  split_state& s = splits_[split];
  s.max_timestamp = std::max(s.max_timestamp, timestamp);
  s.last_seen_ms = now_ms;
}

std::optional<watermark> watermark_generator::on_periodic(std::int64_t now_ms) {
  if (!started_ms_) started_ms_ = now_ms;
  bool any_active = false;
  std::int64_t low = max_watermark;
  for (const auto& [_, s] : splits_) {
    if (idle_ms_ > 0 && now_ms - s.last_seen_ms >= idle_ms_) continue;
    any_active = true;
    // Saturating: a timestamp near the lowest int64 must not wrap around.
    const std::int64_t bound = max_out_of_orderness_ms_ + 1;
    const std::int64_t w =
        s.max_timestamp < min_watermark + bound ? min_watermark : s.max_timestamp - bound;
    low = std::min(low, w);
  }
  if (!any_active) {
    // Nothing seen yet and no idleness configured: wait for records.
    if (idle_ms_ == 0 || idle_) return std::nullopt;
    // A subtask that never saw a record (it owns no split, or they are all empty) goes idle
    // after idle_ms as well.
    if (splits_.empty() && now_ms - *started_ms_ < idle_ms_) return std::nullopt;
    idle_ = true;
    return watermark{emitted_, true};
  }
  const bool was_idle = std::exchange(idle_, false);
  if (low > emitted_) {
    emitted_ = low;
    return watermark{emitted_, false};
  }
  if (was_idle) return watermark{emitted_, false};
  return std::nullopt;
}

}  // namespace snapflow
