#pragma once

#include <cstddef>

namespace snapflow::transport {

// The largest frame a snapflow socket accepts (ZMQ_MAXMSGSIZE) and the decoder believes a
// declared length can be. Job graphs in deploy_task are the largest messages by far.
inline constexpr std::size_t default_max_frame_bytes = std::size_t{16} << 20;

}  // namespace snapflow::transport
