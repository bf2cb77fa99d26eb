#include "engine/time/watermark_valve.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace snapflow {

watermark_valve::watermark_valve(std::size_t inputs) : inputs_(inputs) {}

void watermark_valve::set_idle(input_state& in, bool idle) {
  if (in.idle == idle) return;
  in.idle = idle;
  if (idle) {
    ++idle_inputs_;
  } else {
    --idle_inputs_;
    // Back from idleness: counted again only once it caught up with the task.
    in.aligned = in.watermark >= current_;
  }
}

std::optional<watermark> watermark_valve::on_watermark(std::size_t input, const watermark& w) {
  assert(input < inputs_.size());
  input_state& in = inputs_[input];
  if (in.ended) return std::nullopt;
  if (w.idle) {
    set_idle(in, true);
    return recompute();
  }
  set_idle(in, false);
  // A watermark never goes back: a lower one (a producer restarted behind) is ignored.
  if (w.timestamp > in.watermark) in.watermark = w.timestamp;
  if (in.watermark >= current_) in.aligned = true;
  return recompute();
}

std::optional<watermark> watermark_valve::on_record(std::size_t input) {
  assert(input < inputs_.size());
  input_state& in = inputs_[input];
  if (!in.idle || in.ended) return std::nullopt;
  set_idle(in, false);
  return recompute();
}

std::optional<watermark> watermark_valve::on_end(std::size_t input) {
  assert(input < inputs_.size());
  input_state& in = inputs_[input];
  if (in.ended) return std::nullopt;
  set_idle(in, false);
  in.ended = true;
  in.watermark = max_watermark;
  in.aligned = true;
  return recompute();
}

std::optional<watermark> watermark_valve::recompute() {
  bool any_open = false;
  bool any_active = false;
  bool any_aligned = false;
  std::int64_t low = max_watermark;
  for (const auto& in : inputs_) {
    if (in.ended) continue;
    any_open = true;
    if (in.idle) continue;
    any_active = true;
    if (!in.aligned) continue;
    any_aligned = true;
    low = std::min(low, in.watermark);
  }
  // Active inputs all behind the task (back from idleness): active, but no step until one
  // catches up.
  if (any_active && !any_aligned) low = current_;
  if (any_open && !any_active) {
    if (idle_) return std::nullopt;
    idle_ = true;
    return watermark{current_, true};
  }
  const bool was_idle = std::exchange(idle_, false);
  if (low > current_) {
    current_ = low;
    return watermark{current_, false};
  }
  if (was_idle) return watermark{current_, false};
  return std::nullopt;
}

}  // namespace snapflow
