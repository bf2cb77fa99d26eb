#pragma once

#include <cstdint>
#include <memory>

namespace snapflow::api {

// Processing time as state TTL sees it, in milliseconds. The system clock in jobs; tests
// inject a manual_clock so expiry is decided by the test, not by how fast the machine runs.
class processing_clock {
 public:
  virtual ~processing_clock() = default;
  virtual std::int64_t now_ms() const = 0;

  // Wall-clock time since the epoch (TTL deadlines survive a restore on another machine).
  static std::shared_ptr<const processing_clock> system();
};

}  // namespace snapflow::api
