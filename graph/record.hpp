#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace snapflow {

// The unit of data that flows between subtasks. A fixed shape keeps the data plane cheap to
// encode: `key` drives hash partitioning, `seq` is the source sequence number (what exactly-once
// is checked against), `value` is the number operators compute with, `payload` carries text.
struct record {
  std::uint64_t key = 0;
  std::int64_t seq = 0;
  std::int64_t value = 0;
  std::string payload;

  bool operator==(const record&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const record& r) {
  return os << "record{key=" << r.key << ", seq=" << r.seq << ", value=" << r.value
            << ", payload=" << r.payload << "}";
}

}  // namespace snapflow
