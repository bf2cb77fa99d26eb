#include "engine/runtime/buffer_debloater.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow {

buffer_debloater::buffer_debloater(settings s, std::int64_t now_us)
    : settings_(s), bound_(s.max_bytes), period_start_us_(now_us) {
  assert(settings_.max_bytes > 0 && settings_.channels > 0 && settings_.period_us > 0 &&
         settings_.window > 0 && settings_.target_us > 0);
}

void buffer_debloater::idle_begin(std::int64_t now_us) {
  if (!idle_since_us_) idle_since_us_ = now_us;
}

void buffer_debloater::idle_end(std::int64_t now_us) {
  if (!idle_since_us_) return;
  // An idle spell that began before this period started counts from its start only.
  idle_us_ += now_us - std::max(*idle_since_us_, period_start_us_);
  idle_since_us_.reset();
}

std::optional<std::uint64_t> buffer_debloater::update(std::int64_t now_us) {
  if (now_us < next_update_us()) return std::nullopt;
  std::int64_t idle = idle_us_;
  if (idle_since_us_) {
    idle += now_us - std::max(*idle_since_us_, period_start_us_);
    idle_since_us_ = now_us;  // the spell goes on into the next period
  }
  const std::int64_t active = std::max<std::int64_t>(0, now_us - period_start_us_ - idle);
  samples_.push_back({bytes_, active});
  if (samples_.size() > settings_.window) samples_.pop_front();
  bytes_ = 0;
  idle_us_ = 0;
  period_start_us_ = now_us;

  std::uint64_t bytes = 0;
  std::int64_t active_us = 0;
  for (const auto& s : samples_) {
    bytes += s.bytes;
    active_us += s.active_us;
  }
  // Idle all window long: nothing learned, the bound stays.
  if (active_us <= 0) return std::nullopt;
  throughput_ = static_cast<std::uint64_t>(static_cast<long double>(bytes) * 1'000'000 /
                                           static_cast<long double>(active_us));
  const long double wanted = static_cast<long double>(throughput_) * settings_.target_us /
                             1'000'000 / static_cast<long double>(settings_.channels);
  const std::uint64_t next =
      clamp(wanted >= static_cast<long double>(settings_.max_bytes)
                ? settings_.max_bytes
                : static_cast<std::uint64_t>(wanted));
  if (next == bound_) return std::nullopt;
  const std::uint64_t step = next > bound_ ? next - bound_ : bound_ - next;
  const bool at_clamp = next == settings_.max_bytes || next == clamp(0);
  if (step * 4 <= bound_ && !at_clamp) return std::nullopt;
  bound_ = next;
  return bound_;
}

std::uint64_t buffer_debloater::clamp(std::uint64_t bytes) const {
  const std::uint64_t low = std::min(settings_.min_bytes, settings_.max_bytes);
  return std::clamp(bytes, low, settings_.max_bytes);
}

}  // namespace snapflow
