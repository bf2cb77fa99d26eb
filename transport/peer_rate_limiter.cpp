#include "transport/peer_rate_limiter.hpp"

#include <cassert>

namespace snapflow::transport {

peer_rate_limiter::peer_rate_limiter(std::int64_t interval_us, std::size_t max_per_interval,
                                     std::size_t max_peers)
    : interval_us_(interval_us), max_per_interval_(max_per_interval), max_peers_(max_peers) {
  assert(interval_us_ > 0);
  assert(max_per_interval_ > 0);
  assert(max_peers_ > 0);
}

peer_rate_limiter::peer_state& peer_rate_limiter::slot_for(std::string_view peer,
                                                           std::int64_t now_us) {
  if (auto it = peers_.find(std::string(peer)); it != peers_.end()) return it->second;
  if (peers_.size() >= max_peers_) {
    // Forget peers that have been quiet for a whole interval and have nothing to report; a
    // bounded sweep, paid only when the table is full.
    for (auto it = peers_.begin(); it != peers_.end();) {
      const bool quiet = now_us - it->second.last_allowed_us >= interval_us_;
      it = quiet && it->second.suppressed == 0 ? peers_.erase(it) : std::next(it);
    }
    if (peers_.size() >= max_peers_) return overflow_;
  }
  // A newcomer has never been allowed: make it eligible at once.
  return peers_.emplace(std::string(peer), peer_state{now_us - interval_us_, 0}).first->second;
}

peer_rate_limiter::decision peer_rate_limiter::allow(std::string_view peer, std::int64_t now_us) {
  if (now_us - window_start_us_ >= interval_us_) {
    window_start_us_ = now_us;
    allowed_in_window_ = 0;
  }
  peer_state& s = slot_for(peer, now_us);
  const bool peer_ok = now_us - s.last_allowed_us >= interval_us_;
  if (!peer_ok || allowed_in_window_ >= max_per_interval_) {
    ++s.suppressed;
    return {false, 0};
  }
  ++allowed_in_window_;
  s.last_allowed_us = now_us;
  const std::uint64_t held_back = s.suppressed;
  s.suppressed = 0;
  return {true, held_back};
}

}  // namespace snapflow::transport
