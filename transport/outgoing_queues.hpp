#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

namespace snapflow::transport {

// The frames a ROUTER socket has yet to send, one bounded queue per peer, handed to the socket's
// single writer a peer at a time in turn. A peer whose ZeroMQ queue is full (it stopped reading)
// is held back for a while instead of making the writer wait, so one slow peer never delays the
// others; its own queue grows meanwhile, and the caller decides what an overflow means.
//
// Sans-I/O: the writer coroutine of coordinator_endpoint drives it and passes the time.
class outgoing_queues {
 public:
  struct frame {
    std::string peer;
    std::string payload;
  };

  // False when `peer` already has `max_frames` queued: nothing was added.
  bool push(const std::string& peer, std::string payload, std::size_t max_frames);
  // The next frame to send: peers take turns; a held-back peer is skipped until its time.
  std::optional<frame> pop(std::int64_t now_us);
  // The frame `pop` gave could not be sent in time: it goes back to the front of its peer's
  // queue and the peer is held back, for twice as long as last time (up to `max_hold_us`).
  void hold_back(frame f, std::int64_t now_us, std::int64_t first_hold_us,
                 std::int64_t max_hold_us);
  // A frame reached `peer`: its next hold-back starts short again.
  void sent(const std::string& peer);
  // Forgets everything queued for `peer`.
  void drop(const std::string& peer);

  // When the earliest held-back peer with frames may be tried again, if any peer is held back.
  std::optional<std::int64_t> next_release_us() const;
  std::size_t queued(const std::string& peer) const;
  std::size_t total() const { return total_; }
  bool empty() const { return total_ == 0; }

 private:
  struct peer_queue {
    std::deque<std::string> frames;
    std::int64_t held_until_us = 0;
    std::int64_t last_hold_us = 0;
    bool in_turn = false;  // listed in turns_
  };

  std::unordered_map<std::string, peer_queue> peers_;
  std::deque<std::string> turns_;  // peers with frames, in the order they get their turn
  std::size_t total_ = 0;
};

}  // namespace snapflow::transport
