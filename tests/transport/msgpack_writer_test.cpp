#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <msgpack.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/transport/frame_builder.hpp"
#include "transport/msgpack_writer.hpp"

using namespace snapflow::wire;
using snapflow::wire::testing::frame_builder;

namespace {

// The bytes msgpack-c's packer writes, through frame_builder's sink.
template <typename Pack>
std::string by_msgpack_c(Pack pack) {
  frame_builder f;
  msgpack::packer<frame_builder> pk(f);
  pack(pk);
  return f.bytes();
}

template <typename Write>
std::string by_writer(Write write, std::size_t expected_bytes = 16) {
  std::string out;
  msgpack_writer w(out, expected_bytes);
  write(w);
  w.finish();
  return out;
}

// Every format boundary of a length or count, and a little either side.
std::vector<std::uint32_t> lengths() {
  std::vector<std::uint32_t> out;
  for (std::uint32_t edge : {0u, 15u, 16u, 31u, 32u, 255u, 256u, 65535u, 65536u, 70000u})
    for (std::uint32_t d : {0u, 1u}) out.push_back(edge + d);
  return out;
}

}  // namespace

TEST_CASE("the writer writes integers in the formats msgpack-c picks, at every boundary") {
  std::vector<std::uint64_t> unsigned_values;
  for (int bits = 0; bits <= 64; ++bits) {
    const std::uint64_t p = bits == 64 ? 0 : std::uint64_t{1} << bits;
    for (std::uint64_t v : {p - 1, p, p + 1}) unsigned_values.push_back(v);
  }
  for (std::uint64_t v : unsigned_values) {
    INFO(v);
    CHECK(by_writer([&](msgpack_writer& w) { w.uint(v); }) ==
          by_msgpack_c([&](auto& pk) { pk.pack_uint64(v); }));
    const auto s = static_cast<std::int64_t>(v);
    CHECK(by_writer([&](msgpack_writer& w) { w.sint(s); }) ==
          by_msgpack_c([&](auto& pk) { pk.pack_int64(s); }));
    const auto negated = static_cast<std::int64_t>(0 - v);  // wraps at 2^63, no overflow
    CHECK(by_writer([&](msgpack_writer& w) { w.sint(negated); }) ==
          by_msgpack_c([&](auto& pk) { pk.pack_int64(negated); }));
  }
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  CHECK(by_writer([&](msgpack_writer& w) { w.sint(min); }) ==
        by_msgpack_c([&](auto& pk) { pk.pack_int64(min); }));
}

TEST_CASE("the writer writes strings, bins, arrays and maps as msgpack-c does, at every size") {
  for (std::uint32_t n : lengths()) {
    INFO(n);
    const std::string text(n, 's');
    CHECK(by_writer([&](msgpack_writer& w) { w.str(text); }) ==
          by_msgpack_c([&](auto& pk) {
            pk.pack_str(n);
            pk.pack_str_body(text.data(), n);
          }));
    CHECK(by_writer([&](msgpack_writer& w) { w.bin(text); }) ==
          by_msgpack_c([&](auto& pk) {
            pk.pack_bin(n);
            pk.pack_bin_body(text.data(), n);
          }));
    CHECK(by_writer([&](msgpack_writer& w) { w.array(n); }) ==
          by_msgpack_c([&](auto& pk) { pk.pack_array(n); }));
    CHECK(by_writer([&](msgpack_writer& w) { w.map(n); }) ==
          by_msgpack_c([&](auto& pk) { pk.pack_map(n); }));
  }
  CHECK(by_writer([](msgpack_writer& w) {
          w.boolean(true);
          w.boolean(false);
          w.nil();
        }) == by_msgpack_c([](auto& pk) {
          pk.pack_true();
          pk.pack_false();
          pk.pack_nil();
        }));
}

TEST_CASE("the writer grows its string past the size it expected, keeping what it wrote") {
  std::mt19937_64 rng(99);
  const std::string written = by_writer(
      [&](msgpack_writer& w) {
        w.array(200);
        for (int i = 0; i < 200; ++i) {
          const std::string s(rng() % 40, static_cast<char>('a' + i % 26));
          w.str(s);
        }
      },
      1);
  rng.seed(99);
  const std::string reference = by_msgpack_c([&](auto& pk) {
    pk.pack_array(200);
    for (int i = 0; i < 200; ++i) {
      const std::string s(rng() % 40, static_cast<char>('a' + i % 26));
      pk.pack_str(static_cast<std::uint32_t>(s.size()));
      pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
    }
  });
  CHECK(written == reference);
}
