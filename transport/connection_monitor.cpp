#include "transport/connection_monitor.hpp"

#include <cstring>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "transport/async_socket.hpp"

namespace snapflow::transport {

namespace {

constexpr int poll_interval_ms = 100;
// Not ZMQ_EVENT_MONITOR_STOPPED: ZeroMQ sends every event with a blocking send, and that one
// goes out when the monitor is detached, when nobody may be reading any more.
constexpr int watched_events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

std::optional<handshake_failure> failure_of(std::uint16_t event) {
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: return handshake_failure::no_detail;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: return handshake_failure::protocol;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: return handshake_failure::auth;
    default: return std::nullopt;
  }
}

// A handler that throws is logged; the monitor reads on.
template <typename Call>
void call_handler(const char* which, Call call) {
  try {
    call();
  } catch (const std::exception& e) {
    spdlog::warn("connection monitor: the {} handler threw: {}", which, e.what());
  }
}

std::string next_monitor_address() {
  static std::atomic<std::uint64_t> counter{0};
  return "inproc://snapflow-connection-monitor-" + std::to_string(counter.fetch_add(1));
}

}  // namespace

const char* to_string(handshake_failure f) {
  switch (f) {
    case handshake_failure::no_detail: return "the peer closed the connection during the handshake";
    case handshake_failure::protocol: return "the handshake broke the protocol";
    case handshake_failure::auth: return "the peer's authentication refused this key";
  }
  return "unknown";
}

connection_monitor::~connection_monitor() { stop(); }

std::error_code connection_monitor::start(zmq::context_t& context, zmq::socket_ref socket,
                                          failure_handler on_failure,
                                          disconnect_handler on_disconnected) {
  on_failure_ = std::move(on_failure);
  on_disconnected_ = std::move(on_disconnected);
  const std::string address = next_monitor_address();
  const int events = watched_events | (on_disconnected_ ? ZMQ_EVENT_DISCONNECTED : 0);
  stop();  // at most one watch per monitor
  if (zmq_socket_monitor(socket.handle(), address.c_str(), events) != 0)
    return {zmq_errno(), zmq_category()};
  watched_ = socket.handle();
  try {
    zmq::socket_t monitor(context, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(address);
    stopping_ = false;
    thread_ = std::thread([this, m = std::move(monitor)]() mutable { run(std::move(m)); });
  } catch (const zmq::error_t& e) {
    detach();
    return {e.num(), zmq_category()};
  }
  return {};
}

// Detached first, while the reader still reads: ZeroMQ sends each event with a blocking send
// from whichever of its threads saw it, and a monitor left attached to a socket whose reader
// has gone blocks the next one for ever. When that thread is the context's reaper, no socket
// of the context is ever destroyed again, and each keeps its connections open (a worker's
// closed control socket kept its routing id at the coordinator, and the worker never got back
// in).
void connection_monitor::stop() {
  detach();
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void connection_monitor::detach() {
  if (watched_ == nullptr) return;
  // Thread-safe against the socket's own use: ZeroMQ guards its monitor with a mutex of its own.
  zmq_socket_monitor(watched_, nullptr, 0);
  watched_ = nullptr;
}

// Each event is two frames: 6 bytes (event number, 32-bit value), then the endpoint.
void connection_monitor::run(zmq::socket_t monitor) {
  while (!stopping_.load()) {
    zmq::pollitem_t item{monitor.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(poll_interval_ms)) == 0) continue;
      zmq::message_t head;
      zmq::message_t where;
      if (!monitor.recv(head, zmq::recv_flags::dontwait)) continue;
      if (!head.more() || !monitor.recv(where, zmq::recv_flags::dontwait)) continue;
      if (head.size() < 6) continue;
      std::uint16_t event = 0;
      std::uint32_t value = 0;
      std::memcpy(&event, head.data(), sizeof event);
      std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof value);
      if (event == ZMQ_EVENT_DISCONNECTED) {
        if (on_disconnected_) call_handler("disconnect", [&] { on_disconnected_(static_cast<int>(value)); });
        continue;
      }
      const auto failure = failure_of(event);
      if (!failure || !on_failure_) continue;
      call_handler("failure", [&] { on_failure_(handshake_event{*failure, value, where.to_string()}); });
    } catch (const zmq::error_t& e) {
      // ETERM: the context is going away; anything else would repeat for ever.
      if (e.num() != ETERM) spdlog::warn("connection monitor stops: {}", e.what());
      return;
    }
  }
}

}  // namespace snapflow::transport
