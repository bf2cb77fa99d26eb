#pragma once

#include <cstdint>
#include <limits>
#include <ostream>

namespace snapflow {

// The event time of the latest watermark a task saw or made before any (no element is below it).
inline constexpr std::int64_t min_watermark = std::numeric_limits<std::int64_t>::min();
// End of input: every event time is past.
inline constexpr std::int64_t max_watermark = std::numeric_limits<std::int64_t>::max();

// Flows in-band with the records of a channel (Flink's Watermark and WatermarkStatus in one):
// the producer will send no record with a timestamp at or below `timestamp` any more (a later
// one is late). `idle`: the producer has nothing to send for a while and must not hold back its
// consumers' event time (Flink's WatermarkStatus.IDLE); its next record or non-idle watermark
// makes it active again. Event time is in milliseconds (record.timestamp).
struct watermark {
  std::int64_t timestamp = min_watermark;
  bool idle = false;

  bool operator==(const watermark&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const watermark& w) {
  os << "watermark{" << w.timestamp;
  if (w.idle) os << ", idle";
  return os << "}";
}

}  // namespace snapflow
