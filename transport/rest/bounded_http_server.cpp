#include "transport/rest/bounded_http_server.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "transport/rest/deadline_stream.hpp"

namespace snapflow::rest {

// cpp-httplib's Server with its request processing reachable: it parses a request from our
// stream, routes it and writes the response; it never listens.
class bounded_http_server::router : public httplib::Server {
 public:
  using httplib::Server::process_request;
};

namespace {

using clock = std::chrono::steady_clock;
constexpr int accept_poll_ms = 200;

// Set while a request is processed on this connection's thread: the response was given before
// the body was read, so the connection cannot carry another request.
thread_local bool close_after_response = false;

// A strict decimal Content-Length; nothing for a malformed one.
std::optional<std::uint64_t> content_length(const std::string& text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

void answer(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content("{\"errors\":[\"" + message + "\"]}", "application/json");
}

}  // namespace

bounded_http_server::bounded_http_server(http_limits limits, std::shared_ptr<tls_context> tls)
    : limits_(limits), tls_(std::move(tls)), routes_(std::make_unique<router>()) {
  routes_->set_payload_max_length(limits_.max_body_bytes);
  routes_->set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(limits_.idle_timeout).count());
  routes_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return refuse_early(req, res) ? httplib::Server::HandlerResponse::Handled
                                  : httplib::Server::HandlerResponse::Unhandled;
  });
  // A client that waits for "100 Continue" before sending its body gets the refusal instead.
  routes_->set_expect_100_continue_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        return refuse_early(req, res) ? res.status : 100;
      });
}

bounded_http_server::~bounded_http_server() { stop(); }

httplib::Server& bounded_http_server::routes() { return *routes_; }

bool bounded_http_server::refuse_early(const httplib::Request& req,
                                       httplib::Response& res) const {
  bool refused = false;
  if (guard_ && guard_(req, res)) {
    refused = true;
  } else if (req.has_header("Transfer-Encoding")) {
    answer(res, 411, "send the body with a Content-Length; chunked bodies are not accepted");
    refused = true;
  } else if (!req.has_header("Content-Length") &&
             (req.method == "POST" || req.method == "PUT" || req.method == "PATCH")) {
    answer(res, 411, "a " + req.method + " needs a Content-Length (0 without a body)");
    refused = true;
  } else if (req.has_header("Content-Length")) {
    const auto length = content_length(req.get_header_value("Content-Length"));
    if (!length) {
      answer(res, 400, "malformed Content-Length");
      refused = true;
    } else if (*length > limits_.max_body_bytes) {
      answer(res, 413, "the body is larger than " + std::to_string(limits_.max_body_bytes) +
                           " bytes");
      refused = true;
    }
  }
  if (refused) {
    // An unread body would be taken for the next request: the connection ends here.
    close_after_response = true;
    res.set_header("Connection", "close");
  }
  return refused;
}

result<int> bounded_http_server::start(const std::string& host, int port) {
  auto socket = listen_socket::open(host, port, static_cast<int>(limits_.max_connections));
  if (!socket) return socket.err();
  listener_.emplace(std::move(socket).value());
  stopping_ = false;
  acceptor_ = std::thread([this] { accept_loop(); });
  return listener_->port();
}

void bounded_http_server::accept_loop() {
  while (!stopping_) {
    pollfd p{listener_->fd(), POLLIN, 0};
    if (::poll(&p, 1, accept_poll_ms) <= 0) continue;
    const int fd = ::accept4(listener_->fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;  // the peer went away, or out of descriptors: try the next one
    {
      std::lock_guard lock(mutex_);
      if (open_.size() >= limits_.max_connections || stopping_) {
        ::close(fd);  // over the cap: the peer sees the connection end at once
        ++refused_;
        continue;
      }
      open_.insert(fd);
    }
    // Detached: stop() waits for the open_ set to empty instead of joining.
    std::thread([this, fd] {
      serve(fd);
      release(fd);
    }).detach();
  }
}

void bounded_http_server::serve(int fd) {
  if (!tls_) {
    serve_requests(fd, nullptr);
    return;
  }
  SSL* ssl = SSL_new(tls_->native());
  if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
    if (ssl != nullptr) SSL_free(ssl);
    return;
  }
  serve_requests(fd, ssl);
  SSL_shutdown(ssl);  // one attempt: a close_notify if the socket takes it, no waiting
  SSL_free(ssl);
}

void bounded_http_server::serve_requests(int fd, void* native_ssl) {
  auto* ssl = static_cast<SSL*>(native_ssl);
  const auto opened = clock::now();
  deadline_stream stream(fd, ssl, opened + limits_.connection_cap);
  if (ssl != nullptr && !stream.handshake(opened + limits_.request_timeout)) return;
  const std::size_t budget = limits_.max_body_bytes + limits_.max_header_bytes;
  for (std::size_t served = 0; served < limits_.max_requests_per_connection; ++served) {
    if (stopping_ || !stream.wait_for_request(clock::now() + limits_.idle_timeout)) return;
    stream.begin_request(clock::now() + limits_.request_timeout, budget);
    close_after_response = false;
    bool closed = false;
    const bool last = served + 1 == limits_.max_requests_per_connection;
    const bool ok = routes_->process_request(stream, last, closed, [](httplib::Request&) {});
    if (!ok || closed || close_after_response) return;
  }
}

void bounded_http_server::release(int fd) {
  std::lock_guard lock(mutex_);
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  open_.erase(fd);
  if (open_.empty()) all_closed_.notify_all();
}

void bounded_http_server::stop() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  if (listener_) listener_->close();
  std::unique_lock lock(mutex_);
  // Wakes every connection's poll: its reads and writes fail and its thread ends.
  for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  all_closed_.wait(lock, [this] { return open_.empty(); });
}

std::size_t bounded_http_server::open_connections() const {
  std::lock_guard lock(mutex_);
  return open_.size();
}

}  // namespace snapflow::rest
