#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <httplib.h>

#include "common/result.hpp"
#include "transport/rest/listen_socket.hpp"
#include "transport/rest/tls_context.hpp"

namespace snapflow::rest {

// What one client may take of the REST server. The defaults keep the API answering with a
// hundred hostile connections open: each costs a thread for at most `connection_cap`.
struct http_limits {
  std::size_t max_connections = 128;  // more are closed as soon as they are accepted
  std::chrono::milliseconds idle_timeout{5'000};      // keep-alive wait for the next request
  std::chrono::milliseconds request_timeout{15'000};  // a whole request must arrive within
  std::chrono::milliseconds connection_cap{60'000};   // hard end of any connection
  std::size_t max_body_bytes = 16 << 20;
  std::size_t max_header_bytes = 64 << 10;
  std::size_t max_requests_per_connection = 1000;
};

// An HTTP(S) server whose accept loop and connections are its own, with cpp-httplib parsing
// requests and routing them to the handlers registered on routes(). cpp-httplib's own
// listener has no bound on connections and no deadline for a whole request, so a few
// slow-sending peers could occupy all its threads; here every connection has a thread of its
// own, at most `max_connections` of them, each with the deadlines of http_limits.
//
// Before a request's body is read, the guard (if set) may answer it (e.g. 401); then requests
// with a body the server will not read are answered at once and the connection closed:
// Transfer-Encoding (chunked) -> 411, a POST/PUT/PATCH without Content-Length -> 411, a
// Content-Length over max_body_bytes -> 413.
class bounded_http_server {
 public:
  // Answers (status set, returns true) to refuse a request before its body is read.
  using guard = std::function<bool(const httplib::Request&, httplib::Response&)>;

  // `tls`: nullptr for plain HTTP.
  bounded_http_server(http_limits limits, std::shared_ptr<tls_context> tls);
  ~bounded_http_server();
  bounded_http_server(const bounded_http_server&) = delete;
  bounded_http_server& operator=(const bounded_http_server&) = delete;

  httplib::Server& routes();
  void set_guard(guard g) { guard_ = std::move(g); }

  // Binds host:port (0 = any free port) and starts accepting; returns the bound port.
  result<int> start(const std::string& host, int port);
  // Stops accepting, ends every connection and waits for their threads. Idempotent.
  void stop();

  std::size_t open_connections() const;
  std::uint64_t refused_connections() const { return refused_.load(); }
  const http_limits& limits() const { return limits_; }

 private:
  class router;

  void accept_loop();
  void serve(int fd);
  void serve_requests(int fd, void* ssl);
  // The checks before a body is read; true when `res` answers the request.
  bool refuse_early(const httplib::Request& req, httplib::Response& res) const;
  void release(int fd);

  http_limits limits_;
  std::shared_ptr<tls_context> tls_;
  std::unique_ptr<router> routes_;
  guard guard_;
  std::optional<listen_socket> listener_;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> refused_{0};
  mutable std::mutex mutex_;
  std::condition_variable all_closed_;
  std::set<int> open_;  // sockets of connections being served
};

}  // namespace snapflow::rest
