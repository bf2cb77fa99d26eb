#include "transport/rest/listen_socket.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

namespace snapflow::rest {

namespace {

struct addrinfo_deleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using addrinfo_list = std::unique_ptr<addrinfo, addrinfo_deleter>;

result<addrinfo_list> resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) return error{"cannot resolve '" + host + "': " + gai_strerror(rc)};
  return addrinfo_list(found);
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6&>(addr).sin6_port);
}

}  // namespace

result<listen_socket> listen_socket::open(const std::string& host, int port, int backlog) {
  auto found = resolve(host, port, true);
  if (!found) return found.err();
  std::string why = "no address";
  for (addrinfo* a = found->get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                            a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, backlog) == 0)
      return listen_socket(fd, bound_port(fd));
    const int e = errno;
    ::close(fd);
    if (e == EADDRINUSE)
      return error{"port in use: " + host + ":" + std::to_string(port) +
                   " is already served by another process"};
    why = std::strerror(e);
  }
  return error{"cannot listen on " + host + ":" + std::to_string(port) + ": " + why};
}

listen_socket::listen_socket(listen_socket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

listen_socket& listen_socket::operator=(listen_socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

listen_socket::~listen_socket() { close(); }

void listen_socket::close() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

bool is_loopback_host(const std::string& host) {
  if (host.empty()) return false;
  auto found = resolve(host, 0, false);
  if (!found) return false;
  bool any = false;
  for (addrinfo* a = found->get(); a != nullptr; a = a->ai_next) {
    any = true;
    if (a->ai_family == AF_INET) {
      const auto& in = reinterpret_cast<const sockaddr_in&>(*a->ai_addr);
      if ((ntohl(in.sin_addr.s_addr) >> 24) != 127) return false;
    } else if (a->ai_family == AF_INET6) {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(*a->ai_addr);
      if (!IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr)) return false;
    } else {
      return false;
    }
  }
  return any;
}

}  // namespace snapflow::rest
