#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/time/watermark.hpp"

namespace snapflow {

// A task's event time over its inputs (Flink's StatusWatermarkValve), sans-I/O: the minimum of
// the watermarks of its active inputs. An idle input does not hold it back; an ended input
// counts as the end of time. An input that comes back from idleness behind the task's
// watermark is left out until it catches up, so the task's watermark never goes back.
//
// Each call returns what the task passes on to its operator, when anything changed: a higher
// watermark, the task going idle (every input that has not ended is idle) or coming back.
class watermark_valve {
 public:
  explicit watermark_valve(std::size_t inputs);

  std::optional<watermark> on_watermark(std::size_t input, const watermark& w);
  // A record arrived on `input`: an idle input is active again. Cheap to skip when no input is
  // idle (any_idle()).
  std::optional<watermark> on_record(std::size_t input);
  std::optional<watermark> on_end(std::size_t input);

  bool any_idle() const { return idle_inputs_ != 0; }
  // The watermark passed on last (min_watermark before any).
  std::int64_t current() const { return current_; }
  bool idle() const { return idle_; }

 private:
  struct input_state {
    std::int64_t watermark = min_watermark;
    bool idle = false;
    bool aligned = true;  // at or past the task's watermark: counts in the minimum
    bool ended = false;
  };
  void set_idle(input_state& in, bool idle);
  std::optional<watermark> recompute();

  std::vector<input_state> inputs_;
  std::size_t idle_inputs_ = 0;
  std::int64_t current_ = min_watermark;
  bool idle_ = false;
};

}  // namespace snapflow
