#pragma once

#include <atomic>
#include <chrono>

#include "engine/api/processing_clock.hpp"

namespace snapflow::api {

// A processing_clock that moves only when told to (tests of state TTL). Thread-safe: a test
// thread may advance it while task threads read it.
class manual_clock final : public processing_clock {
 public:
  explicit manual_clock(std::int64_t start_ms = 0) : now_(start_ms) {}
  std::int64_t now_ms() const override { return now_.load(); }
  void set(std::int64_t ms) { now_.store(ms); }
  void advance(std::chrono::milliseconds by) { now_.fetch_add(by.count()); }

 private:
  std::atomic<std::int64_t> now_;
};

}  // namespace snapflow::api
