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
