#include "transport/data/data_zap_handler.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>

#include <spdlog/spdlog.h>

#include "transport/curve_keys.hpp"
#include "transport/peer_rate_limiter.hpp"

namespace snapflow::data {

namespace {

using std::chrono::steady_clock;

constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";
// A CURVE request has 9 frames behind a ROUTER (routing id, delimiter, 7 of RFC 27); anything
// much longer is not libzmq asking.
constexpr std::size_t max_request_frames = 16;
// Handshakes that may wait for a deployment at once; more are denied at once (a flood of
// connections with made-up keys must not grow this without bound).
constexpr std::size_t max_waiting = 1024;
constexpr std::int64_t denial_log_interval_us = 10'000'000;

std::int64_t steady_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             steady_clock::now().time_since_epoch())
      .count();
}

std::string frame_text(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

}  // namespace

data_zap_handler::data_zap_handler(zmq::context_t& context,
                                   std::chrono::milliseconds unvouched_wait)
    : context_(context),
      unvouched_wait_(unvouched_wait),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  assert(unvouched_wait_.count() >= 0);
}

data_zap_handler::~data_zap_handler() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::error_code data_zap_handler::start() {
  if (thread_.joinable()) return {};
  if (wake_fd_ < 0) return {errno, std::generic_category()};
  auto requests = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
  requests->set(zmq::sockopt::linger, 0);
  if (zmq_bind(requests->handle(), zap_endpoint) != 0)
    return {zmq_errno(), std::generic_category()};
  // The socket moves to the thread; the thread start orders its creation before its use.
  thread_ = std::thread([this, requests = std::move(requests)]() mutable {
    run(*requests);
    requests->close();
  });
  return {};
}

void data_zap_handler::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  wake();
  thread_.join();
}

void data_zap_handler::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void data_zap_handler::vouch(const std::string& public_key) {
  {
    std::lock_guard lock(mutex_);
    ++vouched_[public_key];
  }
  wake();  // a handshake may be waiting for this key
}

void data_zap_handler::withdraw(const std::string& public_key) {
  std::lock_guard lock(mutex_);
  auto it = vouched_.find(public_key);
  assert(it != vouched_.end());
  if (it == vouched_.end()) return;
  if (--it->second == 0) vouched_.erase(it);
}

bool data_zap_handler::vouched(const std::string& public_key) const {
  std::lock_guard lock(mutex_);
  return vouched_.contains(public_key);
}

void data_zap_handler::run(zmq::socket_t& requests) {
  while (!stopping_.load()) {
    std::array<zmq_pollitem_t, 2> items{
        {{requests.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}}};
    long timeout_ms = -1;
    if (!waiting_.empty()) {
      const auto next =
          std::min_element(waiting_.begin(), waiting_.end(), [](const auto& a, const auto& b) {
            return a.deadline < b.deadline;
          })->deadline;
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(next - steady_clock::now()).count();
      timeout_ms = std::max<long>(left, 0);
    }
    if (zmq_poll(items.data(), static_cast<int>(items.size()), timeout_ms) < 0) {
      if (zmq_errno() == EINTR) continue;
      spdlog::error("data plane ZAP handler stops: {}", zmq_strerror(zmq_errno()));
      return;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      std::uint64_t ignored = 0;
      [[maybe_unused]] auto n = ::read(wake_fd_, &ignored, sizeof ignored);
    }
    const auto now = steady_clock::now();
    // Requests come one per connection; drain in bounded turns.
    for (int i = 0; i < 64 && (items[0].revents & ZMQ_POLLIN); ++i) {
      if (!(requests.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      take_request(requests, now);
    }
    answer_waiting(requests, now);
    waiting_count_.store(waiting_.size(), std::memory_order_relaxed);
  }
  // Whatever still waits is denied: the data plane is closing.
  for (const auto& r : waiting_) reply(requests, r, false, "the data plane is closing");
  waiting_.clear();
  waiting_count_.store(0, std::memory_order_relaxed);
}

void data_zap_handler::take_request(zmq::socket_t& requests, steady_clock::time_point now) {
  std::vector<zmq::message_t> frames;
  for (;;) {
    zmq::message_t part;
    if (zmq_msg_recv(part.handle(), requests.handle(), ZMQ_DONTWAIT) < 0) return;
    const bool more = part.more();
    if (frames.size() < max_request_frames) frames.push_back(std::move(part));
    if (!more) break;
  }
  // [routing id][delimiter] then RFC 27: version, request id, domain, address, identity,
  // mechanism, credentials...
  if (frames.size() < 2) return;  // cannot even be answered
  waiting_request r;
  r.routing_id = frame_text(frames[0]);
  r.request_id = frames.size() >= 4 ? frame_text(frames[3]) : std::string();
  r.address = frames.size() >= 6 ? frame_text(frames[5]) : std::string();
  r.deadline = now + unvouched_wait_;
  const bool well_formed =
      frames.size() >= 8 && frames[1].size() == 0 && frame_text(frames[2]) == "1.0";
  if (!well_formed) return reply(requests, r, false, "malformed ZAP request");
  const std::string mechanism = frame_text(frames[7]);
  if (mechanism != "CURVE" || frames.size() < 9 || frames[8].size() != 32)
    return reply(requests, r, false, "not a CURVE handshake");
  std::array<char, transport::z85_key_chars + 1> z85{};
  if (!zmq_z85_encode(z85.data(), static_cast<const std::uint8_t*>(frames[8].data()), 32))
    return reply(requests, r, false, "not a CURVE key");
  r.public_key = z85.data();
  if (vouched(r.public_key)) return reply(requests, r, true, "OK");
  if (waiting_.size() >= max_waiting)
    return reply(requests, r, false, "too many handshakes waiting for a deployment");
  waiting_.push_back(std::move(r));
}

void data_zap_handler::answer_waiting(zmq::socket_t& requests, steady_clock::time_point now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (vouched(it->public_key)) {
      reply(requests, *it, true, "OK");
    } else if (it->deadline <= now) {
      reply(requests, *it, false, "no channel deployed here names this key");
    } else {
      ++it;
      continue;
    }
    it = waiting_.erase(it);
  }
}

void data_zap_handler::reply(zmq::socket_t& requests, const waiting_request& r, bool allowed,
                             const char* why) {
  static thread_local transport::peer_rate_limiter denial_log(denial_log_interval_us, 8);
  if (allowed) {
    accepted_.fetch_add(1, std::memory_order_relaxed);
  } else {
    denied_.fetch_add(1, std::memory_order_relaxed);
    if (auto d = denial_log.allow(r.address, steady_now_us()); d.allowed)
      spdlog::warn(
          "data plane CURVE: denied a connection from {} (key {}): {}{}", r.address,
          r.public_key.empty() ? "none" : r.public_key, why,
          d.suppressed ? fmt::format("; {} more denials not logged", d.suppressed) : std::string());
  }
  // The user id names the key: the data plane checks each frame's sender against the channel.
  const std::array<std::string, 8> parts{r.routing_id,
                                         "",
                                         "1.0",
                                         r.request_id,
                                         allowed ? "200" : "400",
                                         why,
                                         allowed ? r.public_key : "",
                                         ""};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    zmq::message_t part(parts[i].data(), parts[i].size());
    const int flags = i + 1 < parts.size() ? ZMQ_SNDMORE : 0;
    // A connection that went away meanwhile has no pipe left: ROUTER drops the reply.
    if (zmq_msg_send(part.handle(), requests.handle(), flags | ZMQ_DONTWAIT) < 0) return;
  }
}

}  // namespace snapflow::data
