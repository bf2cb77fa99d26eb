#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace snapflow::transport {

// Which connection each peer's frames arrive on, so that a connection the kernel closed (the
// peer's process crashed, its host rebooted) names its peer at once, without waiting for a
// heartbeat timeout. Connections are known by their file descriptor: a frame says which one it
// came on (received_frame::source_fd), the connection_monitor says which one closed. The two
// reports travel separately, and the kernel reuses a closed descriptor for the next connection,
// so the bookkeeping must not take a new connection for the old one:
// - a frame from peer B on descriptor d while peer A still holds d means A's connection closed
//   (descriptors are unique among open connections) and its close report is still on its way:
//   A is lost now, and that report, when it comes, is stale;
// - a frame from peer A on a new descriptor means A reconnected: its old connection's close
//   report is stale too, and A is not lost.
// A stale report is counted per descriptor and skipped. Lives on one thread.
class peer_connections {
 public:
  // A frame from `peer` arrived on descriptor `fd` (< 0: unknown, ignored). Returns the peers
  // this shows to have lost their connection.
  std::vector<std::string> frame_from(const std::string& peer, int fd);
  // The connection on `fd` closed: its peer, unless the report is stale or no peer's frames
  // came on it.
  std::optional<std::string> closed(int fd);
  // The peer is gone for another reason (heartbeat timeout, deregistered).
  void forget(const std::string& peer);

  std::size_t size() const { return fd_of_.size(); }

 private:
  void release(int fd);

  std::unordered_map<std::string, int> fd_of_;
  std::unordered_map<int, std::string> peer_on_;
  std::unordered_map<int, int> stale_closes_;
};

}  // namespace snapflow::transport
