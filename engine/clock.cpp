#include "engine/clock.hpp"

#include <atomic>
#include <cassert>

namespace snapflow {

namespace {

std::atomic<bool> manual_active{false};
std::atomic<std::int64_t> manual_now_us{0};

struct real_origin {
  std::int64_t epoch_us;
  std::chrono::steady_clock::time_point steady;
};

const real_origin& origin() {
  static const real_origin o{
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count(),
      std::chrono::steady_clock::now()};
  return o;
}

}  // namespace

coordinator_clock::time_point coordinator_clock::now() noexcept {
  if (manual_active.load(std::memory_order_acquire))
    return time_point(duration(manual_now_us.load(std::memory_order_acquire)));
  const real_origin& o = origin();
  auto elapsed = std::chrono::duration_cast<duration>(std::chrono::steady_clock::now() - o.steady);
  return time_point(duration(o.epoch_us) + elapsed);
}

manual_clock::manual_clock(std::int64_t start_us) {
  bool was = manual_active.exchange(true);
  assert(!was && "only one manual_clock at a time");
  (void)was;
  manual_now_us.store(start_us);
}

manual_clock::~manual_clock() { manual_active.store(false); }

std::int64_t manual_clock::now_us() const { return manual_now_us.load(); }

void manual_clock::advance(std::chrono::microseconds by) {
  assert(by.count() >= 0);
  manual_now_us.fetch_add(by.count());
}

void manual_clock::set(std::int64_t now_us) {
  assert(now_us >= manual_now_us.load());
  manual_now_us.store(now_us);
}

coordinator_clock::duration coordinator_wait_traits::to_wait_duration(
    const coordinator_clock::duration& d) {
  if (manual_active.load(std::memory_order_relaxed)) return coordinator_clock::duration(0);
  return d;
}

coordinator_clock::duration coordinator_wait_traits::to_wait_duration(
    const coordinator_clock::time_point& t) {
  return to_wait_duration(t - coordinator_clock::now());
}

}  // namespace snapflow
