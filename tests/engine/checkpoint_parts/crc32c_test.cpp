#include <catch2/catch.hpp>

#include <string>

#include "engine/checkpoint/crc32c.hpp"

using namespace snapflow;

TEST_CASE("crc32c matches the standard check value") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
}

TEST_CASE("crc32c matches known vectors of zeros and ones") {
  // RFC 3720 (iSCSI) appendix B.4 test patterns.
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(crc32c(ascending) == 0x46DD794Eu);
}

TEST_CASE("crc32c of pieces chained through the seed equals the crc of the whole") {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  const std::uint32_t whole = crc32c(data);
  for (std::size_t cut : {0u, 1u, 7u, 8u, 9u, 500u, 999u, 1000u}) {
    const std::string_view all(data);
    CHECK(crc32c(all.substr(cut), crc32c(all.substr(0, cut))) == whole);
  }
}

TEST_CASE("crc32c gives the table implementation's result at every length and alignment") {
  // On machines with SSE4.2 crc32c() takes the CPU instruction path, with its own handling of
  // unaligned heads and short tails; both paths must agree byte for byte.
  std::string data(4096 + 16, '\0');
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (char& c : data) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x & 0xFFu);
  }
  INFO("hardware path: " << detail::crc32c_uses_hardware());
  const std::string_view all(data);
  for (std::size_t offset = 0; offset < 9; ++offset)
    for (std::size_t length : {0u, 1u, 3u, 7u, 8u, 9u, 15u, 16u, 17u, 63u, 64u, 65u, 1000u, 4096u}) {
      const std::string_view piece = all.substr(offset, length);
      CHECK(crc32c(piece) == detail::crc32c_portable(piece));
      CHECK(crc32c(piece, 0x12345678u) == detail::crc32c_portable(piece, 0x12345678u));
    }
  CHECK(detail::crc32c_portable("123456789") == 0xE3069283u);
}
