#include "transport/endpoint_scope.hpp"

#include <arpa/inet.h>

#include <array>
#include <string>

namespace snapflow::transport {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The host of "HOST:PORT" or "[V6]:PORT"; empty when there is no port separator.
std::string_view host_of(std::string_view address) {
  if (starts_with(address, "[")) {
    const auto close = address.find(']');
    if (close == std::string_view::npos) return {};
    return address.substr(1, close - 1);
  }
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) return {};
  return address.substr(0, colon);
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  const std::string text(host);
  std::array<unsigned char, 16> bytes{};
  if (::inet_pton(AF_INET, text.c_str(), bytes.data()) == 1) return bytes[0] == 127;
  if (::inet_pton(AF_INET6, text.c_str(), bytes.data()) == 1) {
    static constexpr std::array<unsigned char, 16> v6_loopback{0, 0, 0, 0, 0, 0, 0, 0,
                                                               0, 0, 0, 0, 0, 0, 0, 1};
    return bytes == v6_loopback;
  }
  // A wildcard ("*"), an interface name, a host name: possibly reachable from elsewhere.
  return false;
}

}  // namespace

bool is_loopback_endpoint(std::string_view endpoint) {
  if (starts_with(endpoint, "ipc://") || starts_with(endpoint, "inproc://")) return true;
  if (!starts_with(endpoint, "tcp://")) return false;  // pgm, udp, ws, or no transport at all
  std::string_view address = endpoint.substr(6);
  // "SOURCE;DESTINATION" is a connect form; a bind never carries it, but judge the part bound.
  if (const auto semicolon = address.find(';'); semicolon != std::string_view::npos)
    address = address.substr(semicolon + 1);
  const std::string_view host = host_of(address);
  return !host.empty() && is_loopback_host(host);
}

bool is_plaintext_risk(std::string_view endpoint) {
  return endpoint.find("://") != std::string_view::npos && !is_loopback_endpoint(endpoint);
}

}  // namespace snapflow::transport
