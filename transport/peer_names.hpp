#pragma once

#include <string>
#include <string_view>

namespace snapflow::transport {

// A peer-supplied name (a routing id, a worker or job id) fit for a log line: printable ASCII
// up to 64 characters as it is, anything else as hex ("0x0080f2a1c3", ZeroMQ's generated
// routing ids), cut short so a hostile peer cannot flood or garble the log.
std::string printable_peer(std::string_view id);

}  // namespace snapflow::transport
