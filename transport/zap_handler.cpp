#include "transport/zap_handler.hpp"

#include <array>
#include <chrono>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>

#include "transport/curve_keys.hpp"
#include "transport/peer_rate_limiter.hpp"

namespace snapflow::transport {

namespace {

constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";
// A well-formed request has 7 frames for CURVE; anything much longer is not ZeroMQ talking.
constexpr std::size_t max_request_frames = 16;
constexpr std::int64_t denial_log_interval_us = 10'000'000;

std::int64_t steady_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string frame_text(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

}  // namespace

zap_handler::zap_handler(zmq::context_t& context, curve_allowlist allowed_public_keys)
    : context_(context), allowed_(std::move(allowed_public_keys)) {
  std::ostringstream os;
  os << "inproc://snapflow-zap-stop-" << static_cast<const void*>(this);
  stop_endpoint_ = os.str();
}

zap_handler::~zap_handler() { stop(); }

std::error_code zap_handler::start() {
  if (thread_.joinable()) return {};
  auto requests = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::rep);
  requests->set(zmq::sockopt::linger, 0);
  if (zmq_bind(requests->handle(), zap_endpoint) != 0)
    return {zmq_errno(), std::generic_category()};
  auto stop_receiver = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
  stop_receiver->set(zmq::sockopt::linger, 0);
  if (zmq_bind(stop_receiver->handle(), stop_endpoint_.c_str()) != 0)
    return {zmq_errno(), std::generic_category()};
  stop_sender_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
  stop_sender_->set(zmq::sockopt::linger, 0);
  if (zmq_connect(stop_sender_->handle(), stop_endpoint_.c_str()) != 0)
    return {zmq_errno(), std::generic_category()};
  // The sockets move to the thread; the thread start orders their creation before their use.
  thread_ = std::thread([this, requests = std::move(requests),
                         stop_receiver = std::move(stop_receiver)]() mutable {
    run(*requests, *stop_receiver);
  });
  return {};
}

void zap_handler::stop() {
  if (!thread_.joinable()) return;
  zmq::message_t wake(std::string_view("stop"));
  (void)zmq_msg_send(wake.handle(), stop_sender_->handle(), 0);
  thread_.join();
  stop_sender_.reset();
}

void zap_handler::run(zmq::socket_t& requests, zmq::socket_t& stop_signal) {
  for (;;) {
    std::array<zmq_pollitem_t, 2> items{{{requests.handle(), 0, ZMQ_POLLIN, 0},
                                         {stop_signal.handle(), 0, ZMQ_POLLIN, 0}}};
    if (zmq_poll(items.data(), static_cast<int>(items.size()), -1) < 0) {
      if (zmq_errno() == EINTR) continue;
      spdlog::error("ZAP handler stops: {}", zmq_strerror(zmq_errno()));
      return;
    }
    if (items[1].revents & ZMQ_POLLIN) return;
    if (items[0].revents & ZMQ_POLLIN) answer(requests);
  }
}

void zap_handler::answer(zmq::socket_t& requests) {
  static thread_local peer_rate_limiter denial_log(denial_log_interval_us, 8);
  std::vector<zmq::message_t> frames;
  for (;;) {
    zmq::message_t part;
    if (zmq_msg_recv(part.handle(), requests.handle(), ZMQ_DONTWAIT) < 0) return;
    const bool more = part.more();
    if (frames.size() < max_request_frames) frames.push_back(std::move(part));
    if (!more) break;
  }
  // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
  const bool well_formed = frames.size() >= 6 && frame_text(frames[0]) == "1.0";
  const std::string request_id = frames.size() >= 2 ? frame_text(frames[1]) : std::string();
  const std::string address = frames.size() >= 4 ? frame_text(frames[3]) : std::string();
  const std::string mechanism = frames.size() >= 6 ? frame_text(frames[5]) : std::string();

  std::string status = "400";
  std::string status_text = "not allowed";
  std::string client_key;
  if (!well_formed) {
    status = "500";
    status_text = "malformed ZAP request";
  } else if (mechanism == "CURVE" && frames.size() >= 7 && frames[6].size() == 32) {
    std::array<char, z85_key_chars + 1> z85{};
    if (zmq_z85_encode(z85.data(), static_cast<const std::uint8_t*>(frames[6].data()), 32)) {
      client_key = z85.data();
      if (allowed_.contains(client_key)) {
        status = "200";
        status_text = "OK";
      }
    }
  }
  if (status == "200") {
    accepted_.fetch_add(1, std::memory_order_relaxed);
  } else {
    denied_.fetch_add(1, std::memory_order_relaxed);
    if (auto d = denial_log.allow(address, steady_now_us()); d.allowed)
      spdlog::warn("CURVE: denied a connection from {} (mechanism {}, key {}){}", address,
                   mechanism.empty() ? "?" : mechanism,
                   client_key.empty() ? "none" : client_key,
                   d.suppressed ? fmt::format("; {} more denials not logged", d.suppressed)
                                : std::string());
  }
  // A REP socket must answer every request, however malformed, or it takes no more.
  // The user id names the key, for whoever reads the connection's metadata.
  const std::string user_id = status == "200" ? client_key : std::string();
  const std::array<std::string, 6> reply{"1.0", request_id, status, status_text, user_id, ""};
  for (std::size_t i = 0; i < reply.size(); ++i) {
    zmq::message_t part(reply[i].data(), reply[i].size());
    const int flags = i + 1 < reply.size() ? ZMQ_SNDMORE : 0;
    if (zmq_msg_send(part.handle(), requests.handle(), flags) < 0) return;
  }
}

}  // namespace snapflow::transport
