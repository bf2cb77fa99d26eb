#pragma once

#include <chrono>
#include <cstddef>

#include <httplib.h>

struct ssl_st;

namespace snapflow::rest {

// One accepted HTTP connection as cpp-httplib's Stream, plain or TLS, over a non-blocking
// socket. Every wait has a deadline, so a peer that sends (or reads) one byte a minute cannot
// hold the connection: reads end at the request's deadline, writes at the connection's, and
// both at the connection's hard cap. A request may read at most `read_budget` bytes (headers
// and body), which bounds what a peer makes the server parse.
class deadline_stream : public httplib::Stream {
 public:
  using clock = std::chrono::steady_clock;

  // `ssl`: nullptr for plain HTTP; else owned by the caller, already attached to `fd`.
  deadline_stream(int fd, ssl_st* ssl, clock::time_point connection_deadline);

  // TLS only: the handshake, which must complete by `deadline`.
  bool handshake(clock::time_point deadline);
  // Waits for the first byte of the next request (an idle keep-alive connection); false when
  // the peer closed, `deadline` passed or the connection's cap did.
  bool wait_for_request(clock::time_point deadline);
  // Starts a request: what it reads must arrive by `deadline`, at most `read_budget` bytes.
  void begin_request(clock::time_point deadline, std::size_t read_budget);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  using httplib::Stream::write;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  // Polls for `events` until `deadline` (capped by the connection's); false on timeout/error.
  bool wait(short events, clock::time_point deadline) const;
  clock::time_point capped(clock::time_point deadline) const;
  // TLS: retries an SSL_* call while it wants to read or write, until `deadline`.
  template <typename Call>
  int tls_retry(Call call, clock::time_point deadline);

  int fd_;
  ssl_st* ssl_;
  clock::time_point connection_deadline_;
  clock::time_point read_deadline_;
  std::size_t read_budget_ = 0;
};

}  // namespace snapflow::rest
