#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace snapflow::transport {

// Decides which of many similar events get acted on (a log line, a reply to a stranger): per
// peer at most one per interval, and at most `max_per_interval` in all, so a flood of bad frames
// costs a counter increment instead of a log line each. Events held back are counted per peer
// and reported with that peer's next allowed event.
//
// Sans-I/O: the caller passes the time. Memory is bounded: at most `max_peers` peers are
// remembered; when full, peers quiet for a whole interval are forgotten, and if none is, the
// newcomer shares one slot with every other newcomer.
class peer_rate_limiter {
 public:
  peer_rate_limiter(std::int64_t interval_us, std::size_t max_per_interval,
                    std::size_t max_peers = 1024);

  struct decision {
    bool allowed = false;
    std::uint64_t suppressed = 0;  // this peer's events held back since its last allowed one
  };
  decision allow(std::string_view peer, std::int64_t now_us);

  std::size_t peers() const { return peers_.size(); }

 private:
  struct peer_state {
    std::int64_t last_allowed_us = 0;
    std::uint64_t suppressed = 0;
  };
  peer_state& slot_for(std::string_view peer, std::int64_t now_us);

  std::int64_t interval_us_;
  std::size_t max_per_interval_;
  std::size_t max_peers_;
  std::unordered_map<std::string, peer_state> peers_;
  peer_state overflow_;  // shared by peers that found the table full
  std::int64_t window_start_us_ = 0;
  std::size_t allowed_in_window_ = 0;
};

}  // namespace snapflow::transport
