#include "transport/outgoing_queues.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace snapflow::transport {

bool outgoing_queues::push(const std::string& peer, std::string payload, std::size_t max_frames) {
  peer_queue& q = peers_[peer];
  if (q.frames.size() >= max_frames) return false;
  q.frames.push_back(std::move(payload));
  ++total_;
  if (!q.in_turn) {
    q.in_turn = true;
    turns_.push_back(peer);
  }
  return true;
}

std::optional<outgoing_queues::frame> outgoing_queues::pop(std::int64_t now_us) {
  // Each peer is looked at once at most: held-back peers go to the back of the line.
  for (std::size_t looked = 0, n = turns_.size(); looked < n; ++looked) {
    std::string peer = std::move(turns_.front());
    turns_.pop_front();
    auto it = peers_.find(peer);
    assert(it != peers_.end());
    peer_queue& q = it->second;
    assert(q.in_turn);
    assert(!q.frames.empty());
    if (q.held_until_us > now_us) {
      turns_.push_back(std::move(peer));
      continue;
    }
    frame f{peer, std::move(q.frames.front())};
    q.frames.pop_front();
    --total_;
    if (!q.frames.empty()) {
      turns_.push_back(std::move(peer));
    } else if (q.last_hold_us == 0) {
      peers_.erase(it);  // nothing to remember: keeps the table as small as the traffic
    } else {
      q.in_turn = false;
    }
    return f;
  }
  return std::nullopt;
}

void outgoing_queues::hold_back(frame f, std::int64_t now_us, std::int64_t first_hold_us,
                                std::int64_t max_hold_us) {
  assert(first_hold_us > 0);
  assert(max_hold_us >= first_hold_us);
  peer_queue& q = peers_[f.peer];
  const std::int64_t hold =
      q.last_hold_us == 0 ? first_hold_us : std::min(q.last_hold_us * 2, max_hold_us);
  q.last_hold_us = hold;
  q.held_until_us = now_us + hold;
  q.frames.push_front(std::move(f.payload));
  ++total_;
  if (!q.in_turn) {
    q.in_turn = true;
    turns_.push_back(std::move(f.peer));
  }
}

void outgoing_queues::sent(const std::string& peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  it->second.last_hold_us = 0;
  it->second.held_until_us = 0;
  if (it->second.frames.empty()) peers_.erase(it);
}

void outgoing_queues::drop(const std::string& peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  assert(total_ >= it->second.frames.size());
  total_ -= it->second.frames.size();
  if (it->second.in_turn) std::erase(turns_, peer);
  peers_.erase(it);
}

std::optional<std::int64_t> outgoing_queues::next_release_us() const {
  std::optional<std::int64_t> earliest;
  for (const auto& peer : turns_) {
    const std::int64_t until = peers_.at(peer).held_until_us;
    if (!earliest || until < *earliest) earliest = until;
  }
  return earliest;
}

std::size_t outgoing_queues::queued(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second.frames.size();
}

}  // namespace snapflow::transport
