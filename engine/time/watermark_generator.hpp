#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "engine/time/watermark.hpp"

namespace snapflow {

// Watermarks of one source subtask from the timestamps it saw (Flink's
// BoundedOutOfOrdernessWatermarks with withIdleness, per split as a FLIP-27 source does), sans
// I/O: the caller passes the time.
//
// Per split, the watermark is its highest timestamp - max_out_of_orderness - 1 (a record may come
// that much later than a newer one and still be on time). The subtask's watermark is the minimum
// over its active splits; a split without a record for `idle_ms` of processing time is idle and
// left out (idle_ms 0: never), and once every split is idle the subtask says so (an idle
// watermark), so that its consumers' event time goes on without it. A split's next record makes
// it active again. What is emitted never goes back.
class watermark_generator {
 public:
  watermark_generator(std::int64_t max_out_of_orderness_ms, std::int64_t idle_ms);

  void on_event(std::uint32_t split, std::int64_t timestamp, std::int64_t now_ms);
  // What to emit now, if anything changed since the last call.
  std::optional<watermark> on_periodic(std::int64_t now_ms);

  std::int64_t emitted() const { return emitted_; }
  bool idle() const { return idle_; }

 private:
  struct split_state {
    std::int64_t max_timestamp = min_watermark;
    std::int64_t last_seen_ms = 0;
  };
  std::int64_t max_out_of_orderness_ms_;
  std::int64_t idle_ms_;
  std::map<std::uint32_t, split_state> splits_;
  std::optional<std::int64_t> started_ms_;  // the first on_periodic
  std::int64_t emitted_ = min_watermark;
  bool idle_ = false;
};

}  // namespace snapflow
