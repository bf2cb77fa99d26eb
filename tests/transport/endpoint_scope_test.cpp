// Which bind endpoints count as reachable from this machine only (the binaries refuse the
// others without CURVE unless --insecure is given).
#include <catch2/catch.hpp>

#include "transport/endpoint_scope.hpp"

using snapflow::transport::is_loopback_endpoint;
using snapflow::transport::is_plaintext_risk;

TEST_CASE("endpoint scope: loopback addresses, ipc and inproc are local; the rest is not") {
  CHECK(is_loopback_endpoint("tcp://127.0.0.1:6123"));
  CHECK(is_loopback_endpoint("tcp://127.0.0.1:*"));
  CHECK(is_loopback_endpoint("tcp://127.5.6.7:0"));
  CHECK(is_loopback_endpoint("tcp://localhost:6123"));
  CHECK(is_loopback_endpoint("tcp://[::1]:6123"));
  CHECK(is_loopback_endpoint("ipc:///tmp/snapflow-control"));
  CHECK(is_loopback_endpoint("inproc://control"));

  CHECK_FALSE(is_loopback_endpoint("tcp://*:6123"));
  CHECK_FALSE(is_loopback_endpoint("tcp://0.0.0.0:6123"));
  CHECK_FALSE(is_loopback_endpoint("tcp://10.0.0.7:6123"));
  CHECK_FALSE(is_loopback_endpoint("tcp://[::]:6123"));
  CHECK_FALSE(is_loopback_endpoint("tcp://[::ffff:10.0.0.1]:6123"));
  CHECK_FALSE(is_loopback_endpoint("tcp://eth0:6123"));
  CHECK_FALSE(is_loopback_endpoint("tcp://lo:6123"));  // an interface name: not judged
  CHECK_FALSE(is_loopback_endpoint("tcp://example.org:6123"));
  CHECK_FALSE(is_loopback_endpoint("tcp://127.0.0.1.example.org:6123"));
  // Malformed or other transports: not vouched for.
  CHECK_FALSE(is_loopback_endpoint("tcp://127.0.0.1"));
  CHECK_FALSE(is_loopback_endpoint("tcp://[::1"));
  CHECK_FALSE(is_loopback_endpoint("udp://127.0.0.1:6123"));
  CHECK_FALSE(is_loopback_endpoint("nowhere"));
  CHECK_FALSE(is_loopback_endpoint(""));
}

TEST_CASE("endpoint scope: a plaintext risk is a well-formed endpoint beyond loopback") {
  CHECK(is_plaintext_risk("tcp://0.0.0.0:6123"));
  CHECK(is_plaintext_risk("tcp://*:*"));
  CHECK_FALSE(is_plaintext_risk("tcp://127.0.0.1:*"));
  CHECK_FALSE(is_plaintext_risk("ipc:///tmp/x"));
  CHECK_FALSE(is_plaintext_risk("nowhere"));  // the bind refuses it, saying why
}
