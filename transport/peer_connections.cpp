#include "transport/peer_connections.hpp"

namespace snapflow::transport {

std::vector<std::string> peer_connections::frame_from(const std::string& peer, int fd) {
  std::vector<std::string> lost;
  if (fd < 0) return lost;
  if (auto own = fd_of_.find(peer); own != fd_of_.end()) {
    if (own->second == fd) return lost;  // the usual case: the same connection as before
    release(own->second);                // reconnected: the old connection's close is stale
  }
  if (auto holder = peer_on_.find(fd); holder != peer_on_.end()) {
    // `fd` was reused: the connection its holder had closed before this one opened.
    lost.push_back(holder->second);
    fd_of_.erase(holder->second);
    release(fd);
  }
  fd_of_[peer] = fd;
  peer_on_[fd] = peer;
  return lost;
}

std::optional<std::string> peer_connections::closed(int fd) {
  if (auto stale = stale_closes_.find(fd); stale != stale_closes_.end()) {
    if (--stale->second == 0) stale_closes_.erase(stale);
    return std::nullopt;
  }
  auto holder = peer_on_.find(fd);
  if (holder == peer_on_.end()) return std::nullopt;
  std::string peer = std::move(holder->second);
  peer_on_.erase(holder);
  fd_of_.erase(peer);
  return peer;
}

void peer_connections::forget(const std::string& peer) {
  auto own = fd_of_.find(peer);
  if (own == fd_of_.end()) return;
  // Its connection closes sooner or later (a heartbeat timeout closes it too) and that report
  // must not hit whoever holds the descriptor by then. Should the peer speak again on the same
  // connection, its close report is skipped and only the heartbeat timeout sees it go: a late
  // detection, never a live peer declared lost.
  release(own->second);
  fd_of_.erase(own);
}

void peer_connections::release(int fd) {
  peer_on_.erase(fd);
  ++stale_closes_[fd];
}

}  // namespace snapflow::transport
