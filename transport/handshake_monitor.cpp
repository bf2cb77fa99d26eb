#include "transport/handshake_monitor.hpp"

#include <cstring>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "transport/async_socket.hpp"

namespace snapflow::transport {

namespace {

constexpr int poll_interval_ms = 100;
constexpr int watched_events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_MONITOR_STOPPED;

std::optional<handshake_failure> failure_of(std::uint16_t event) {
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: return handshake_failure::no_detail;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: return handshake_failure::protocol;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: return handshake_failure::auth;
    default: return std::nullopt;
  }
}

std::string next_monitor_address() {
  static std::atomic<std::uint64_t> counter{0};
  return "inproc://snapflow-handshake-monitor-" + std::to_string(counter.fetch_add(1));
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

handshake_monitor::~handshake_monitor() { stop(); }

std::error_code handshake_monitor::start(zmq::context_t& context, zmq::socket_ref socket,
                                         failure_handler on_failure) {
  on_failure_ = std::move(on_failure);
  const std::string address = next_monitor_address();
  if (zmq_socket_monitor(socket.handle(), address.c_str(), watched_events) != 0)
    return {zmq_errno(), zmq_category()};
  try {
    zmq::socket_t monitor(context, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(address);
    stopping_ = false;
    thread_ = std::thread([this, m = std::move(monitor)]() mutable { run(std::move(m)); });
  } catch (const zmq::error_t& e) {
    zmq_socket_monitor(socket.handle(), nullptr, 0);
    return {e.num(), zmq_category()};
  }
  return {};
}

void handshake_monitor::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

// Each event is two frames: 6 bytes (event number, 32-bit value), then the endpoint.
void handshake_monitor::run(zmq::socket_t monitor) {
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
      if (event == ZMQ_EVENT_MONITOR_STOPPED) return;
      const auto failure = failure_of(event);
      if (!failure || !on_failure_) continue;
      try {
        on_failure_(handshake_event{*failure, value, where.to_string()});
      } catch (const std::exception& e) {
        spdlog::warn("handshake monitor: the failure handler threw: {}", e.what());
      }
    } catch (const zmq::error_t& e) {
      // ETERM: the context is going away; anything else would repeat for ever.
      if (e.num() != ETERM) spdlog::warn("handshake monitor stops: {}", e.what());
      return;
    }
  }
}

}  // namespace snapflow::transport
