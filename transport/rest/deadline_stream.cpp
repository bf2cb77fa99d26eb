#include "transport/rest/deadline_stream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace snapflow::rest {

namespace {

void ip_and_port(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

}  // namespace

deadline_stream::deadline_stream(int fd, ssl_st* ssl, clock::time_point connection_deadline)
    : fd_(fd), ssl_(ssl), connection_deadline_(connection_deadline),
      read_deadline_(connection_deadline) {}

deadline_stream::clock::time_point deadline_stream::capped(clock::time_point deadline) const {
  return std::min(deadline, connection_deadline_);
}

bool deadline_stream::wait(short events, clock::time_point deadline) const {
  deadline = capped(deadline);
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) return false;
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

template <typename Call>
int deadline_stream::tls_retry(Call call, clock::time_point deadline) {
  for (;;) {
    ERR_clear_error();
    const int n = call();
    if (n > 0) return n;
    const int reason = SSL_get_error(ssl_, n);
    if (reason == SSL_ERROR_WANT_READ) {
      if (!wait(POLLIN, deadline)) return -1;
    } else if (reason == SSL_ERROR_WANT_WRITE) {
      if (!wait(POLLOUT, deadline)) return -1;
    } else {
      return reason == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    }
  }
}

bool deadline_stream::handshake(clock::time_point deadline) {
  return tls_retry([this] { return SSL_accept(ssl_); }, deadline) > 0;
}

bool deadline_stream::wait_for_request(clock::time_point deadline) {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  if (!wait(POLLIN, deadline)) return false;
  // A peer that closed is readable too: tell it apart without consuming a byte (plain only;
  // for TLS the first read says so).
  if (ssl_ != nullptr) return true;
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK);
  return n > 0;
}

void deadline_stream::begin_request(clock::time_point deadline, std::size_t read_budget) {
  read_deadline_ = capped(deadline);
  read_budget_ = read_budget;
}

bool deadline_stream::is_readable() const {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  return wait(POLLIN, read_deadline_);
}

bool deadline_stream::is_writable() const { return wait(POLLOUT, connection_deadline_); }

ssize_t deadline_stream::read(char* ptr, size_t size) {
  if (read_budget_ == 0) return -1;  // the request is larger than anything we accept
  size = std::min(size, read_budget_);
  if (size > static_cast<size_t>(INT32_MAX)) size = INT32_MAX;
  ssize_t n = -1;
  if (ssl_ != nullptr) {
    n = tls_retry([&] { return SSL_read(ssl_, ptr, static_cast<int>(size)); }, read_deadline_);
  } else {
    for (;;) {
      n = ::recv(fd_, ptr, size, 0);
      if (n >= 0) break;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait(POLLIN, read_deadline_)) return -1;
    }
  }
  if (n > 0) read_budget_ -= static_cast<std::size_t>(n);
  return n;
}

ssize_t deadline_stream::write(const char* ptr, size_t size) {
  if (size > static_cast<size_t>(INT32_MAX)) size = INT32_MAX;
  if (ssl_ != nullptr)
    return tls_retry([&] { return SSL_write(ssl_, ptr, static_cast<int>(size)); },
                     connection_deadline_);
  for (;;) {
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait(POLLOUT, connection_deadline_))
      return -1;
  }
}

void deadline_stream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, ip, port);
}

void deadline_stream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, ip, port);
}

}  // namespace snapflow::rest
