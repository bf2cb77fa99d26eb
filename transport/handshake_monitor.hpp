#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <system_error>
#include <thread>

#include <zmq.hpp>

namespace snapflow::transport {

// How a connection's ZMTP/CURVE handshake failed, as a ZeroMQ socket monitor reports it.
enum class handshake_failure {
  no_detail,  // the peer dropped the connection mid-handshake (e.g. a wrong server key)
  protocol,   // a malformed or undecryptable handshake (ZeroMQ does not retry it)
  auth,       // the ZAP handler denied the key (ZeroMQ does not retry it)
};

const char* to_string(handshake_failure f);

struct handshake_event {
  handshake_failure failure = handshake_failure::no_detail;
  std::uint32_t detail = 0;  // errno, ZMQ_PROTOCOL_ERROR_*, or the ZAP status code
  std::string endpoint;      // the endpoint the event names
};

// Watches one socket's handshakes (zmq_socket_monitor) so that a CURVE misconfiguration is
// never silent: without it a refused handshake is invisible to the application (no frame ever
// arrives). A thread of its own reads the monitor's PAIR socket and calls `on_failure` there
// (the callback must be thread-safe: log, or post to an executor). Create it right after the
// watched socket, on the thread that owns that socket; stop() (or the destructor) before that
// socket is closed.
class handshake_monitor {
 public:
  using failure_handler = std::function<void(const handshake_event&)>;

  handshake_monitor() = default;
  ~handshake_monitor();
  handshake_monitor(const handshake_monitor&) = delete;
  handshake_monitor& operator=(const handshake_monitor&) = delete;

  // Starts watching `socket` (a zmq socket handle). An error leaves nothing running.
  std::error_code start(zmq::context_t& context, zmq::socket_ref socket, failure_handler on_failure);
  // Joins the thread; idempotent. Waits at most one poll interval (100 ms).
  void stop();

 private:
  void run(zmq::socket_t monitor);

  failure_handler on_failure_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace snapflow::transport
