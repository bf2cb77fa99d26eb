#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

namespace snapflow {

// A record's event time when it has none (a job that does not use event time): the lowest
// int64, which no watermark is below.
inline constexpr std::int64_t no_timestamp = std::numeric_limits<std::int64_t>::min();

// The unit of data that flows between subtasks. A fixed shape keeps the data plane cheap to
// encode: `key` drives hash partitioning, `seq` is the source sequence number (what exactly-once
// is checked against), `value` is the number operators compute with, `payload` carries text.
// `timestamp` is the event time in milliseconds (docs/event-time.md), no_timestamp unless an
// assigner set it; it is last so that the positional initialisation {key, seq, value, payload}
// leaves it unset, and an operator's output without one takes its input's (stream_task).
struct record {
  std::uint64_t key = 0;
  std::int64_t seq = 0;
  std::int64_t value = 0;
  std::string payload;
  std::int64_t timestamp = no_timestamp;

  bool operator==(const record&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const record& r) {
  return os << "record{key=" << r.key << ", seq=" << r.seq << ", value=" << r.value
            << ", payload=" << r.payload;
  if (r.timestamp != no_timestamp) os << ", ts=" << r.timestamp;
  return os << "}";
}

}  // namespace snapflow
