#pragma once

#include <string>

#include "common/result.hpp"

namespace snapflow::rest {

// A listening TCP socket of the REST server: SO_REUSEADDR only (a restart may bind while the
// old connections linger in TIME_WAIT), never SO_REUSEPORT, so a second coordinator on the same
// port fails instead of silently sharing it.
class listen_socket {
 public:
  // `port` 0 picks a free port. The error says "port in use" when another socket holds it.
  static result<listen_socket> open(const std::string& host, int port, int backlog);
  listen_socket(listen_socket&& other) noexcept;
  listen_socket& operator=(listen_socket&& other) noexcept;
  ~listen_socket();

  int fd() const { return fd_; }
  int port() const { return port_; }
  void close();

 private:
  listen_socket(int fd, int port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  int port_ = 0;
};

// True when every address `host` resolves to is a loopback address (127.0.0.0/8, ::1), so
// only this machine can connect; false for wildcards, other addresses and names that do not
// resolve.
bool is_loopback_host(const std::string& host);

}  // namespace snapflow::rest
