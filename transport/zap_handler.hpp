#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include <zmq.hpp>

#include "transport/curve_keys.hpp"

namespace snapflow::transport {

// Answers ZeroMQ's authentication requests (ZAP, ZeroMQ RFC 27) for one context: a CURVE client
// whose public key is on the allowlist gets in, every other request is denied (any other
// mechanism, an unknown key). ZeroMQ sends the requests to inproc://zeromq.zap.01; this serves
// that endpoint with a REP socket on its own thread, because ZAP messages are multipart and a
// handshake waits for the answer, whatever the event loop is doing.
//
// Start it before binding the socket it protects: a CURVE server with no ZAP handler in its
// context lets every client with a valid handshake in. Stop it after closing that socket.
class zap_handler {
 public:
  // Worker id bindings in the allowlist are the coordinator endpoint's to check; ZAP only lets
  // listed keys in.
  zap_handler(zmq::context_t& context, curve_allowlist allowed_public_keys);
  ~zap_handler();
  zap_handler(const zap_handler&) = delete;
  zap_handler& operator=(const zap_handler&) = delete;

  // Binds inproc://zeromq.zap.01 (one handler per context) and starts the thread.
  std::error_code start();
  void stop();

  std::uint64_t accepted() const { return accepted_.load(std::memory_order_relaxed); }
  std::uint64_t denied() const { return denied_.load(std::memory_order_relaxed); }

 private:
  void run(zmq::socket_t& requests, zmq::socket_t& stop_signal);
  void answer(zmq::socket_t& requests);

  zmq::context_t& context_;
  curve_allowlist allowed_;
  std::string stop_endpoint_;
  std::unique_ptr<zmq::socket_t> stop_sender_;  // used by the thread that calls stop()
  std::thread thread_;
  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> denied_{0};
};

}  // namespace snapflow::transport
