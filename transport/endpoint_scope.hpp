#pragma once

#include <string_view>

namespace snapflow::transport {

// Whether a ZeroMQ endpoint a process binds can only be reached from this machine: ipc:// and
// inproc://, and tcp:// on a loopback address (127.0.0.0/8, ::1, localhost). Everything else
// (a wildcard, an interface name, any other address, a malformed endpoint) counts as reachable
// from the network, so a binary can refuse to serve it without CURVE.
bool is_loopback_endpoint(std::string_view endpoint);

// Whether a process binding `endpoint` without CURVE would serve the network in plaintext:
// not loopback, and well-formed enough to name a transport (a malformed one is left to the
// bind, which says what is wrong with it).
bool is_plaintext_risk(std::string_view endpoint);

}  // namespace snapflow::transport
