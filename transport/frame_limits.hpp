#pragma once

#include <cstddef>
#include <limits>

namespace snapflow::transport {

// The largest frame a snapflow peer accepts: larger ones are counted and refused as bad frames
// (decode_errc::frame_too_large), and the decoder believes no declared length above it. Job
// graphs in deploy_task are the largest messages by far.
inline constexpr std::size_t default_max_frame_bytes = std::size_t{16} << 20;

// What ZeroMQ itself lets through (ZMQ_MAXMSGSIZE) for a given limit: twice it, so that a frame
// somewhat over the limit (a misconfigured peer) still arrives to be counted and refused with
// its connection kept, while a grossly larger one is cut off by ZeroMQ before it is buffered:
// the connection that sent it is dropped and the peer reconnects.
constexpr std::size_t frame_ceiling_bytes(std::size_t max_frame_bytes) {
  constexpr std::size_t largest = static_cast<std::size_t>(std::numeric_limits<long long>::max());
  return max_frame_bytes > largest / 2 ? largest : max_frame_bytes * 2;
}

}  // namespace snapflow::transport
