// The data plane's frame codec: what goes in comes out, and hostile bytes are refused.
#include <catch2/catch.hpp>
#include <msgpack.hpp>
#include <random>

#include "transport/data/data_frame.hpp"

using namespace snapflow;
using namespace snapflow::data;

namespace {

channel_key sample_key() { return channel_key{"job-1", 3, 1, 7, 2, 5}; }

// The header keys every frame has, written by hand: "v", "t", "job" and the channel's numbers
// (8 keys), plus "seq" for a data frame (9).
template <typename Packer>
void pack_header_fields(Packer& pk, const std::string& type) {
  for (auto [k, v] : {std::pair{"v", 1}, {"src", 1}, {"p", 0}, {"dst", 2}, {"c", 0}, {"a", 0}}) {
    pk.pack(std::string(k));
    pk.pack(v);
  }
  pk.pack(std::string("t"));
  pk.pack(type);
  pk.pack(std::string("job"));
  pk.pack(std::string("j"));
  if (type != "data") return;
  pk.pack(std::string("seq"));
  pk.pack(5);
}

data_frame sample_frame() {
  data_frame f;
  f.key = sample_key();
  f.seq = 42;
  f.elements.push_back(record{9, -4, 1234567890123, "text,with\0bytes"});
  f.elements.push_back(record{});
  checkpoint_barrier b;
  b.id = 17;
  b.timestamp_us = 1'700'000'000'000'000;
  b.options.kind = checkpoint_trigger_kind::savepoint;
  b.options.exactly_once = false;
  b.options.unaligned = true;
  b.options.target_location = "/state/job-1/chk-17";
  f.elements.push_back(b);
  f.elements.push_back(end_of_input{});
  return f;
}

}  // namespace

TEST_CASE("a data frame with records, a barrier and end of input round-trips") {
  const data_frame f = sample_frame();
  auto decoded = decode_data_frame(encode(f));
  REQUIRE(decoded.ok());
  const auto* back = std::get_if<data_frame>(&decoded.value());
  REQUIRE(back != nullptr);
  CHECK(*back == f);
}

TEST_CASE("an empty data frame and a credit frame round-trip") {
  data_frame empty;
  empty.key = sample_key();
  auto d1 = decode_data_frame(encode(empty));
  REQUIRE(d1.ok());
  CHECK(std::get<data_frame>(d1.value()) == empty);

  const credit_frame c{sample_key(), 1'000'000};
  auto d2 = decode_data_frame(encode(c));
  REQUIRE(d2.ok());
  CHECK(std::get<credit_frame>(d2.value()) == c);
}

TEST_CASE("a credit frame with a byte bound round-trips; one without has the same bytes as "
          "before the bound existed") {
  const credit_frame with{sample_key(), 12, 65'536};
  auto d = decode_data_frame(encode(with));
  REQUIRE(d.ok());
  CHECK(std::get<credit_frame>(d.value()) == with);
  CHECK(std::get<credit_frame>(d.value()).max_bytes == 65'536);
  const credit_frame without{sample_key(), 12};
  CHECK(encode(without).find("\xa1" "b") == std::string::npos);  // no "b" key
  CHECK(encode(with).size() > encode(without).size());
}

TEST_CASE("garbage data frames are refused, never crash") {
  const std::string good = encode(sample_frame());

  SECTION("empty and non-msgpack bytes") {
    CHECK_FALSE(decode_data_frame("").ok());
    CHECK_FALSE(decode_data_frame("\xc1").ok());
    CHECK_FALSE(decode_data_frame("hello world").ok());
  }
  SECTION("every truncation of a good frame") {
    for (std::size_t n = 0; n < good.size(); ++n)
      CHECK_FALSE(decode_data_frame(std::string_view(good).substr(0, n)).ok());
  }
  SECTION("a huge declared length is refused before allocating") {
    const std::string huge_array = "\xdd\xff\xff\xff\xff";
    auto d = decode_data_frame(huge_array, 1024);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == wire::decode_errc::too_large_declared_length);
  }
  SECTION("a wrong version, an unknown type, a wrong field type") {
    auto pack = [](auto&& body) {
      msgpack::sbuffer buf;
      msgpack::packer<msgpack::sbuffer> pk(buf);
      body(pk);
      return std::string(buf.data(), buf.size());
    };
    auto v2 = decode_data_frame(pack([](auto& pk) {
      pk.pack_map(2);
      pk.pack(std::string("v"));
      pk.pack(2);
      pk.pack(std::string("t"));
      pk.pack(std::string("data"));
    }));
    REQUIRE_FALSE(v2.ok());
    CHECK(v2.error().code == wire::decode_errc::unsupported_version);
    auto unknown = decode_data_frame(pack([](auto& pk) {
      pk.pack_map(2);
      pk.pack(std::string("v"));
      pk.pack(1);
      pk.pack(std::string("t"));
      pk.pack(std::string("bogus"));
    }));
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.error().code == wire::decode_errc::unknown_type);
    auto not_a_map = decode_data_frame(pack([](auto& pk) { pk.pack(7); }));
    REQUIRE_FALSE(not_a_map.ok());
    CHECK(not_a_map.error().code == wire::decode_errc::not_a_map);
  }
  SECTION("random bytes and random corruptions of a good frame") {
    std::mt19937 rng(1234);
    for (int i = 0; i < 2000; ++i) {
      std::string junk(rng() % 64, '\0');
      for (auto& c : junk) c = static_cast<char>(rng());
      (void)decode_data_frame(junk).ok();
      std::string corrupt = good;
      for (int k = 0; k < 3; ++k) corrupt[rng() % corrupt.size()] = static_cast<char>(rng());
      auto d = decode_data_frame(corrupt);
      if (d.ok()) SUCCEED();  // some flips still decode: fine, as long as nothing crashes
    }
  }
}

namespace {

// A data frame's header written by hand, then `elements` as they come.
template <typename Elements>
std::string hand_data_frame(Elements&& elements, std::uint32_t count) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(10);
  pack_header_fields(pk, "data");
  pk.pack(std::string("el"));
  pk.pack_array(count);
  elements(pk);
  return std::string(buf.data(), buf.size());
}

wire::decode_error error_of(const std::string& frame) {
  auto d = decode_data_frame(frame);
  REQUIRE_FALSE(d.ok());
  return d.error();
}

}  // namespace

TEST_CASE("a bad element is named by its index and item") {
  // The second element is bad each time; the first is a good record.
  auto good_record = [](auto& pk) {
    pk.pack_array(5);
    pk.pack(0);
    pk.pack(1);
    pk.pack(2);
    pk.pack(3);
    pk.pack(std::string("x"));
  };
  const auto key_as_str = error_of(hand_data_frame(
      [&](auto& pk) {
        good_record(pk);
        pk.pack_array(5);
        pk.pack(0);
        pk.pack(std::string("not a key"));
        pk.pack(1);
        pk.pack(1);
        pk.pack(std::string(""));
      },
      2));
  CHECK(key_as_str.code == wire::decode_errc::wrong_type);
  CHECK(key_as_str.detail == "el[1] key: expected an unsigned integer");
  const auto not_an_array = error_of(hand_data_frame(
      [&](auto& pk) {
        good_record(pk);
        pk.pack_map(0);
      },
      2));
  CHECK(not_an_array.detail == "el[1]: expected a non-empty array");
  const auto short_barrier = error_of(hand_data_frame(
      [&](auto& pk) {
        good_record(pk);
        pk.pack_array(2);
        pk.pack(1);
        pk.pack(7);
      },
      2));
  CHECK(short_barrier.code == wire::decode_errc::invalid_value);
  CHECK(short_barrier.detail == "el[1]: wrong number of items");
  const auto bad_tag = error_of(hand_data_frame(
      [&](auto& pk) {
        good_record(pk);
        pk.pack_array(1);
        pk.pack(4);  // 3 is a watermark
      },
      2));
  CHECK(bad_tag.detail == "el[1] tag: out of range");
  // A container where a scalar belongs is named (decoding stops there).
  const auto seq_as_map = error_of(hand_data_frame(
      [&](auto& pk) {
        good_record(pk);
        pk.pack_array(5);
        pk.pack(0);
        pk.pack(1);
        pk.pack_map(1);
        pk.pack(1);
        pk.pack(2);
        pk.pack(1);
        pk.pack(std::string(""));
      },
      2));
  CHECK(seq_as_map.detail == "el[1] seq: expected an integer");
}

TEST_CASE("header keys after the elements are found: the element array is stepped over whole") {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(10);
  pk.pack(std::string("el"));  // first, so every other lookup steps over it
  pk.pack_array(2);
  pk.pack_array(5);
  pk.pack(0);
  pk.pack(11);
  pk.pack(12);
  pk.pack(13);
  pk.pack(std::string("a record"));
  pk.pack_array(1);
  pk.pack(2);
  pack_header_fields(pk, "data");
  auto d = decode_data_frame(std::string(buf.data(), buf.size()));
  REQUIRE(d.ok());
  const auto& f = std::get<data_frame>(d.value());
  CHECK(f.seq == 5);
  CHECK(f.key == channel_key{"j", 1, 0, 2, 0, 0});
  REQUIRE(f.elements.size() == 2);
  CHECK(std::get<record>(f.elements[0]) == record{11, 12, 13, "a record"});
  CHECK(std::holds_alternative<end_of_input>(f.elements[1]));
}

TEST_CASE("header fields: nil counts as absent, a later non-nil repeat is used, a missing one "
          "is named") {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(10);
  pk.pack(std::string("n"));
  pk.pack_nil();
  pack_header_fields(pk, "credit");
  pk.pack(std::string("n"));
  pk.pack_fix_int64(77);  // a signed format holding a positive value
  auto d = decode_data_frame(std::string(buf.data(), buf.size()));
  REQUIRE(d.ok());
  CHECK(std::get<credit_frame>(d.value()).consumed == 77);

  msgpack::sbuffer missing;
  msgpack::packer<msgpack::sbuffer> pm(missing);
  pm.pack_map(2);
  pm.pack(std::string("v"));
  pm.pack(1);
  pm.pack(std::string("t"));
  pm.pack(std::string("credit"));
  const auto error = error_of(std::string(missing.data(), missing.size()));
  CHECK(error.code == wire::decode_errc::missing_field);
  CHECK(error.detail == "field 'job': required");
}

TEST_CASE("whatever corruption of a data frame decodes, decodes the same again after encoding") {
  const std::string good = encode(sample_frame());
  std::mt19937 rng(20261203);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string corrupt = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) corrupt[rng() % corrupt.size()] = static_cast<char>(rng());
    auto d = decode_data_frame(corrupt);
    if (!d.ok()) continue;
    ++accepted;
    const data_message& m = d.value();
    const std::string again = std::visit([](const auto& f) { return encode(f); }, m);
    auto d2 = decode_data_frame(again);
    REQUIRE(d2.ok());
    CHECK(d2.value() == m);
  }
  CHECK(accepted > 0);  // some flips land in values and still decode
}

TEST_CASE("a data frame carries at most max_elements_per_frame elements") {
  // Ends of input are the smallest element (2 bytes), the cheapest way to many of them.
  auto ends = [](std::uint32_t n) {
    return hand_data_frame(
        [n](auto& pk) {
          for (std::uint32_t i = 0; i < n; ++i) {
            pk.pack_array(1);
            pk.pack(2);
          }
        },
        n);
  };
  const auto limit = static_cast<std::uint32_t>(max_elements_per_frame);
  auto at_limit = decode_data_frame(ends(limit));
  REQUIRE(at_limit.ok());
  CHECK(std::get<data_frame>(at_limit.value()).elements.size() == max_elements_per_frame);

  const auto over = error_of(ends(limit + 1));
  CHECK(over.code == wire::decode_errc::invalid_value);
  CHECK_THAT(over.detail, Catch::Contains("16385 elements, at most 16384 per frame"));

  // Refused from the declared count, before any element is read: the elements need not exist
  // (the bounds check still wants the bytes, so the frame is a truncated one of 4 billion).
  const auto declared = hand_data_frame([](auto&) {}, 0xffffffffu);
  CHECK_FALSE(decode_data_frame(declared).ok());
}

TEST_CASE("a priority data frame round-trips; a frame without \"pri\" is not one") {
  data_frame f;
  f.key = sample_key();
  f.seq = 3;
  checkpoint_barrier b;
  b.id = 8;
  b.options.unaligned = true;
  f.elements.push_back(b);
  f.priority = true;
  auto decoded = decode_data_frame(encode(f));
  REQUIRE(decoded.ok());
  CHECK(std::get<data_frame>(decoded.value()) == f);

  // Without priority the frame is written as before the flag existed: no "pri" key.
  f.priority = false;
  const std::string plain = encode(f);
  CHECK(plain.find("pri") == std::string::npos);
  auto back = decode_data_frame(plain);
  REQUIRE(back.ok());
  CHECK_FALSE(std::get<data_frame>(back.value()).priority);

  // "pri": false and "pri": nil read as no priority.
  for (int variant = 0; variant < 2; ++variant) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(11);
    pack_header_fields(pk, "data");
    pk.pack(std::string("el"));
    pk.pack_array(0);
    pk.pack(std::string("pri"));
    if (variant == 0)
      pk.pack_false();
    else
      pk.pack_nil();
    auto d = decode_data_frame(std::string(buf.data(), buf.size()));
    REQUIRE(d.ok());
    CHECK_FALSE(std::get<data_frame>(d.value()).priority);
  }
}

TEST_CASE("a priority frame must carry exactly one barrier, and \"pri\" must be a bool") {
  auto frame_with = [](const element_batch& elements, bool priority) {
    return encode(data_frame{sample_key(), 0, elements, priority});
  };
  checkpoint_barrier b;
  b.id = 1;
  const element_batch cases[] = {
      {},
      {record{}},
      {end_of_input{}},
      {b, b},
      {record{}, b},
      {b, end_of_input{}},
  };
  for (const auto& elements : cases) {
    CAPTURE(elements.size());
    CHECK(decode_data_frame(frame_with(elements, false)).ok());
    auto d = decode_data_frame(frame_with(elements, true));
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == wire::decode_errc::invalid_value);
    CHECK_THAT(d.error().detail, Catch::Contains("exactly one checkpoint barrier"));
  }

  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(11);
  pack_header_fields(pk, "data");
  pk.pack(std::string("el"));
  pk.pack_array(0);
  pk.pack(std::string("pri"));
  pk.pack(1);
  auto d = decode_data_frame(std::string(buf.data(), buf.size()));
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == wire::decode_errc::wrong_type);
  CHECK_THAT(d.error().detail, Catch::Contains("pri"));
}
