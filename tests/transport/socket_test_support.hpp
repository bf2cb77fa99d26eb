#pragma once

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

#include "tests/support/temp_folder.hpp"
#include "transport/async_socket.hpp"

namespace snapflow::transport::testing {

// Bounds a test that drives an io_context: if `bound` passes first, the context stops and the
// test fails instead of hanging. It never paces the test; the bound is only a backstop for a
// missed wake-up, which would otherwise hang forever.
class io_guard {
 public:
  io_guard(asio::io_context& io, std::chrono::seconds bound) : io_(io), timer_(io, bound) {
    timer_.async_wait([this](const std::error_code& error) {
      if (error) return;
      expired_ = true;
      io_.stop();
    });
  }
  ~io_guard() { timer_.cancel(); }

  bool expired() const { return expired_; }

  // Runs handlers until `done()` holds. Fails the test if the bound passes first.
  template <typename Done>
  void run_until(Done done) {
    while (!done() && !expired_) io_.run_one();
    REQUIRE_FALSE(expired_);
  }

 private:
  asio::io_context& io_;
  asio::steady_timer timer_;
  bool expired_ = false;
};

// A completion handler for co_spawn: a failed REQUIRE inside a coroutine leaves io.run_one()
// as an exception, which fails the test with its message.
inline void rethrow(std::exception_ptr error) {
  if (error) std::rethrow_exception(error);
}

inline std::string bind_loopback(async_socket& socket) {
  REQUIRE_FALSE(socket.bind("tcp://127.0.0.1:*"));
  return socket.last_endpoint();
}

// A fresh folder for ipc endpoints, removed with everything in it.
class temp_folder : public snapflow::testing::temp_folder {
 public:
  temp_folder() : snapflow::testing::temp_folder("snapflow-transport") {}
  std::string ipc(const std::string& name) const { return "ipc://" + (path() / name).string(); }
};

}  // namespace snapflow::transport::testing
