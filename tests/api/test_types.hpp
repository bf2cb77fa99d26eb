#pragma once

// User types the typed API tests send through streams and state.
#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

namespace snapflow::api_test {

struct event {
  std::string user;
  std::int64_t seq = 0;
  std::int64_t amount = 0;
  bool operator==(const event&) const = default;
  MSGPACK_DEFINE_MAP(user, seq, amount);
};

struct tally {
  std::string user;
  std::int64_t seq = 0;
  std::int64_t count = 0;
  std::int64_t total = 0;
  std::vector<std::int64_t> recent;
  MSGPACK_DEFINE_MAP(user, seq, count, total, recent);
};

}  // namespace snapflow::api_test
