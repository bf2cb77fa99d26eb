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

// Watches one socket's connections with a ZeroMQ socket monitor, on a thread of its own that
// reads the monitor's PAIR socket and calls the handlers there (they must be thread-safe: log,
// or post to an executor):
// - `on_failure`: a handshake failed, so that a CURVE misconfiguration is never silent (without
//   it a refused handshake is invisible to the application: no frame ever arrives);
// - `on_disconnected` (optional): a connection closed, with its file descriptor. A crashed peer
//   process has its sockets closed by the kernel, so this is how the coordinator sees a lost
//   worker at once rather than at the heartbeat timeout (received_frame::source_fd maps the
//   descriptor to a peer). Each connection that completed its handshake reports exactly once.
// Create it right after the watched socket, on the thread that owns that socket; stop() (or the
// destructor) before that socket is closed.
class connection_monitor {
 public:
  using failure_handler = std::function<void(const handshake_event&)>;
  using disconnect_handler = std::function<void(int fd)>;

  connection_monitor() = default;
  ~connection_monitor();
  connection_monitor(const connection_monitor&) = delete;
  connection_monitor& operator=(const connection_monitor&) = delete;

  // Starts watching `socket` (a zmq socket handle). An error leaves nothing running.
  std::error_code start(zmq::context_t& context, zmq::socket_ref socket,
                        failure_handler on_failure, disconnect_handler on_disconnected = {});
  // Detaches the monitor from the socket and joins the thread; idempotent. Waits at most one
  // poll interval (100 ms). Must come before the watched socket is closed.
  void stop();

 private:
  void detach();
  void run(zmq::socket_t monitor);

  failure_handler on_failure_;
  disconnect_handler on_disconnected_;
  void* watched_ = nullptr;  // the socket a monitor is attached to, until detach()
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace snapflow::transport
