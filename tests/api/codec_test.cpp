// Payload encoding: a user struct round-trips, and every kind of bad input is an error that
// says what is wrong, never an exception escaping decode() or a crash.
#include <catch2/catch.hpp>

#include "engine/api/codec.hpp"
#include "tests/api/test_types.hpp"

using namespace snapflow;
using namespace snapflow::api;
using snapflow::api_test::event;

TEST_CASE("codec: a user struct, a string and a vector round-trip") {
  const event e{"alice", 42, -7};
  auto back = decode<event>(encode(e));
  REQUIRE(back);
  CHECK(*back == e);
  CHECK(*decode<std::string>(encode(std::string("x\0y", 3))) == std::string("x\0y", 3));
  CHECK(*decode<std::vector<int>>(encode(std::vector<int>{1, 2, 3})) == std::vector<int>{1, 2, 3});
}

TEST_CASE("codec: malformed, truncated, trailing and mistyped bytes are errors") {
  const std::string good = encode(event{"bob", 1, 2});
  SECTION("empty") { CHECK_THAT(decode<event>("").err().message, Catch::Contains("empty")); }
  SECTION("a byte msgpack never uses") {
    CHECK_THAT(decode<event>("\xc1").err().message, Catch::Contains("malformed"));
  }
  SECTION("truncated") {
    CHECK_THAT(decode<event>(good.substr(0, good.size() - 1)).err().message,
               Catch::Contains("truncated"));
  }
  SECTION("trailing bytes") {
    CHECK_THAT(decode<event>(good + "x").err().message, Catch::Contains("unexpected bytes"));
  }
  SECTION("another type") {
    CHECK_THAT(decode<event>(encode(17)).err().message, Catch::Contains("expected type"));
    CHECK_THAT(decode<std::int64_t>(encode(std::string("17"))).err().message,
               Catch::Contains("expected type"));
  }
}

TEST_CASE("codec: forged lengths and deep nesting are refused before anything is reserved") {
  // An array32 header claiming 4 billion elements, followed by nothing.
  const std::string forged("\xdd\xff\xff\xff\xff", 5);
  CHECK_FALSE(decode<std::vector<int>>(forged));
  // A str32 claiming 4 GiB.
  CHECK_FALSE(decode<std::string>(std::string("\xdb\xff\xff\xff\xff", 5)));
  // 1000 nested one-element arrays.
  const std::string deep = std::string(1000, '\x91') + '\x01';
  CHECK_THAT(decode<std::vector<int>>(deep).err().message, Catch::Contains("nested deeper"));
}

TEST_CASE("codec: decode_payload names the record and the operator") {
  const record r{3, 12, 0, "\xc1"};
  try {
    (void)decode_payload<event>(r, "enrich");
    FAIL("no decode_error");
  } catch (const decode_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("record 12") && Catch::Contains("'enrich'"));
  }
}
