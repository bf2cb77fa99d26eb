#pragma once

#include <chrono>
#include <cstdint>

#include <asio/basic_waitable_timer.hpp>

namespace snapflow {

// The coordinator's time: microseconds since the Unix epoch, but monotonic (the wall clock read
// once at start plus steady time since), so timestamps are meaningful to people and never go
// back. Usable as an Asio clock, which lets tests drive the real coroutines with a manual clock.
struct coordinator_clock {
  using duration = std::chrono::microseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<coordinator_clock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept;
  static std::int64_t now_us() noexcept { return now().time_since_epoch().count(); }
  static time_point from_us(std::int64_t us) { return time_point(duration(us)); }
};

// Test only: while one exists, coordinator_clock::now() returns its time and coordinator timers
// never block the reactor (drive them with io_context::poll() after advance()). At most one at a
// time.
class manual_clock {
 public:
  explicit manual_clock(std::int64_t start_us = 1'000'000'000);
  ~manual_clock();
  manual_clock(const manual_clock&) = delete;
  manual_clock& operator=(const manual_clock&) = delete;

  std::int64_t now_us() const;
  void advance(std::chrono::microseconds by);
  void set(std::int64_t now_us);
};

// Timers on a manual clock must not make the reactor sleep for real.
struct coordinator_wait_traits {
  static coordinator_clock::duration to_wait_duration(const coordinator_clock::duration& d);
  static coordinator_clock::duration to_wait_duration(const coordinator_clock::time_point& t);
};

using coordinator_timer = asio::basic_waitable_timer<coordinator_clock, coordinator_wait_traits>;

}  // namespace snapflow
