#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <vector>

namespace snapflow::api {

// An event-time window [start, end) in milliseconds (Flink's TimeWindow). Its results carry
// max_timestamp() as their event time, and it fires once the watermark reaches it.
struct time_window {
  std::int64_t start = 0;
  std::int64_t end = 0;

  std::int64_t max_timestamp() const { return end - 1; }
  // Overlapping or touching ([0, 10) and [10, 20)), as Flink's TimeWindow: sessions that touch
  // merge.
  bool intersects(const time_window& o) const { return start <= o.end && o.start <= end; }
  time_window cover(const time_window& o) const {
    return {std::min(start, o.start), std::max(end, o.end)};
  }
  bool operator==(const time_window&) const = default;
};

namespace window_detail {
// The start of the window of `size` (shifted by `offset`) that holds `t`, also for negative t.
inline std::int64_t window_start(std::int64_t t, std::int64_t offset, std::int64_t size) {
  const std::int64_t r = (t - offset) % size;
  return t - (r < 0 ? r + size : r);
}
inline std::int64_t positive_ms(std::chrono::milliseconds d, const char* what) {
  if (d.count() <= 0) throw std::invalid_argument(std::string(what) + " must be positive");
  return d.count();
}
// The sum of non-negative terms, held at INT64_MAX where it would overflow.
inline std::int64_t saturating_sum(std::initializer_list<std::int64_t> terms) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  std::int64_t sum = 0;
  for (std::int64_t t : terms) sum = t > max - sum ? max : sum + t;
  return sum;
}
// How far from the int64 limits an element's time must lie for the window operators' arithmetic
// to fit: its windows' starts and ends, the next window's end (a sliding window's timer
// registers it) and those ends plus the allowed lateness. `span` is what one window reaches
// beyond an element's time (an assigner's reach_ms()); twice it covers the next window.
inline std::int64_t reach_for(std::int64_t span, std::int64_t lateness) {
  return saturating_sum({span, span, lateness, 2});
}
// Whether `t` lies at least `reach` away from both int64 limits. A reach held at INT64_MAX by
// saturation is beyond every time.
inline bool within_limits(std::int64_t t, std::int64_t reach) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
  return reach < max && t <= max - reach && t >= min + reach;
}
}  // namespace window_detail

// Windows of `size` that start every `slide` from `offset` cut into slices of gcd(size, slide):
// every window is a whole number of slices and every slice lies in the same windows as all of
// its elements, so a window operator keeps one accumulator per slice instead of one per window
// an element is in (size / slide of them for sliding windows), and combines a window's slices
// when it fires (Flink SQL's window slicing).
struct window_slicing {
  std::int64_t size = 0;
  std::int64_t slide = 0;
  std::int64_t offset = 0;
  std::int64_t slice = 0;

  window_slicing(std::int64_t size_ms, std::int64_t slide_ms, std::int64_t offset_ms)
      : size(size_ms), slide(slide_ms), offset(offset_ms), slice(std::gcd(size_ms, slide_ms)) {}

  std::int64_t slice_start(std::int64_t t) const {
    return window_detail::window_start(t, offset, slice);
  }
  // The windows slice `start` lies in, the latest first.
  std::vector<time_window> windows_of(std::int64_t slice_start) const {
    std::vector<time_window> out;
    const std::int64_t last = window_detail::window_start(slice_start, offset, slide);
    for (std::int64_t s = last; s > slice_start - size; s -= slide) out.push_back({s, s + size});
    return out;
  }
  // The max timestamp of the last window slice `start` lies in: after it no window needs it.
  std::int64_t last_max_timestamp(std::int64_t slice_start) const {
    return window_detail::window_start(slice_start, offset, slide) + size - 1;
  }
  // The window whose max timestamp is `t`, if one ends there.
  std::optional<time_window> window_ending_at(std::int64_t t) const {
    const std::int64_t start = t + 1 - size;
    if (window_detail::window_start(start, offset, slide) != start) return std::nullopt;
    return time_window{start, start + size};
  }
};

// Fixed-size, non-overlapping windows (Flink's TumblingEventTimeWindows).
struct tumbling_event_time_windows {
  static constexpr bool merging = false;
  std::int64_t size_ms;
  std::int64_t offset_ms;

  explicit tumbling_event_time_windows(std::chrono::milliseconds size,
                                       std::chrono::milliseconds offset = {})
      : size_ms(window_detail::positive_ms(size, "a tumbling window's size")),
        offset_ms(offset.count() % size_ms) {}

  std::vector<time_window> assign(std::int64_t t) const {
    const std::int64_t start = window_detail::window_start(t, offset_ms, size_ms);
    return {{start, start + size_ms}};
  }
  window_slicing slicing() const { return {size_ms, size_ms, offset_ms}; }
  std::int64_t reach_ms() const { return size_ms; }
};

// Windows of `size` starting every `slide` (Flink's SlidingEventTimeWindows): each element is in
// size / slide of them (rounded up).
struct sliding_event_time_windows {
  static constexpr bool merging = false;
  std::int64_t size_ms;
  std::int64_t slide_ms;

  sliding_event_time_windows(std::chrono::milliseconds size, std::chrono::milliseconds slide)
      : size_ms(window_detail::positive_ms(size, "a sliding window's size")),
        slide_ms(window_detail::positive_ms(slide, "a sliding window's slide")) {}

  std::vector<time_window> assign(std::int64_t t) const {
    std::vector<time_window> out;
    const std::int64_t last = window_detail::window_start(t, 0, slide_ms);
    for (std::int64_t start = last; start > t - size_ms; start -= slide_ms)
      out.push_back({start, start + size_ms});
    return out;
  }
  window_slicing slicing() const { return {size_ms, slide_ms, 0}; }
  std::int64_t reach_ms() const { return window_detail::saturating_sum({size_ms, slide_ms}); }
};

// Sessions (Flink's EventTimeSessionWindows): each element opens [t, t + gap), and windows of
// one key that overlap merge, so a session ends after `gap` without an element.
struct event_time_session_windows {
  static constexpr bool merging = true;
  std::int64_t gap_ms;

  explicit event_time_session_windows(std::chrono::milliseconds gap)
      : gap_ms(window_detail::positive_ms(gap, "a session gap")) {}

  std::vector<time_window> assign(std::int64_t t) const { return {{t, t + gap_ms}}; }
  std::int64_t reach_ms() const { return gap_ms; }
};

// Sessions: the windows of `existing` that `fresh` overlaps, transitively through the merged
// cover (a window that bridges two sessions merges all three). Returns the cover and the indexes
// of the merged ones.
inline time_window merge_sessions(const std::vector<time_window>& existing, time_window fresh,
                                  std::vector<std::size_t>& merged) {
  merged.clear();
  std::vector<bool> taken(existing.size(), false);
  bool grew = true;
  while (grew) {
    grew = false;
    for (std::size_t i = 0; i < existing.size(); ++i) {
      if (taken[i] || !fresh.intersects(existing[i])) continue;
      taken[i] = true;
      merged.push_back(i);
      fresh = fresh.cover(existing[i]);
      grew = true;
    }
  }
  return fresh;
}

}  // namespace snapflow::api
