#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <msgpack.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/transport/frame_builder.hpp"
#include "transport/envelope.hpp"
#include "transport/msgpack_bounds.hpp"
#include "transport/msgpack_view.hpp"

using namespace snapflow;
using namespace snapflow::wire;
using snapflow::wire::testing::frame_builder;

namespace {

const std::uint8_t* bytes_of(const std::string& s) {
  return reinterpret_cast<const std::uint8_t*>(s.data());
}

// One canonical spelling of a value, from msgpack-c's object tree: the reference the cursor is
// held to.
void spell(const msgpack::object& o, std::string& out) {
  switch (o.type) {
    case msgpack::type::NIL:
      out += "nil";
      break;
    case msgpack::type::BOOLEAN:
      out += o.via.boolean ? "true" : "false";
      break;
    case msgpack::type::POSITIVE_INTEGER:
      out += "+" + std::to_string(o.via.u64);
      break;
    case msgpack::type::NEGATIVE_INTEGER:
      out += std::to_string(o.via.i64);
      break;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      out += "float";
      break;
    case msgpack::type::STR:
      out += "s'" + std::string(o.via.str.ptr, o.via.str.size) + "'";
      break;
    case msgpack::type::BIN:
      out += "b'" + std::string(o.via.bin.ptr, o.via.bin.size) + "'";
      break;
    case msgpack::type::EXT:
      out += "ext" + std::to_string(o.via.ext.size);
      break;
    case msgpack::type::ARRAY:
      out += "[";
      for (std::uint32_t i = 0; i < o.via.array.size; ++i) spell(o.via.array.ptr[i], out += " ");
      out += "]";
      break;
    case msgpack::type::MAP:
      out += "{";
      for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
        spell(o.via.map.ptr[i].key, out += " ");
        spell(o.via.map.ptr[i].val, out += ":");
      }
      out += "}";
      break;
  }
}

// The same spelling, from the cursor.
void spell(msgpack_cursor& c, std::string& out) {
  using k = msgpack_value::kind;
  const msgpack_value v = c.read();
  switch (v.type) {
    case k::nil:
      out += "nil";
      break;
    case k::boolean:
      out += v.boolean() ? "true" : "false";
      break;
    case k::positive_integer:
      out += "+" + std::to_string(v.u64);
      break;
    case k::negative_integer:
      out += std::to_string(v.i64);
      break;
    case k::floating:
      out += "float";
      break;
    case k::str:
      out += "s'" + std::string(v.bytes()) + "'";
      break;
    case k::bin:
      out += "b'" + std::string(v.bytes()) + "'";
      break;
    case k::ext:
      out += "ext" + std::to_string(v.size);
      break;
    case k::array:
      out += "[";
      for (std::uint32_t i = 0; i < v.size; ++i) spell(c, out += " ");
      out += "]";
      break;
    case k::map:
      out += "{";
      for (std::uint32_t i = 0; i < v.size; ++i) {
        spell(c, out += " ");
        spell(c, out += ":");
      }
      out += "}";
      break;
  }
}

std::string spelled_by_msgpack_c(const std::string& frame) {
  const msgpack::object_handle h = msgpack::unpack(frame.data(), frame.size());
  std::string out;
  spell(h.get(), out);
  return out;
}

// Spells the frame through the cursor and checks that it ends exactly at the frame's end, and
// that skipping the value lands there too.
std::string spelled_by_cursor(const std::string& frame) {
  msgpack_cursor reading(bytes_of(frame));
  std::string out;
  spell(reading, out);
  CHECK(reading.position() == bytes_of(frame) + frame.size());
  msgpack_cursor skipping(bytes_of(frame));
  skipping.skip(1);
  CHECK(skipping.position() == bytes_of(frame) + frame.size());
  return out;
}

// A random msgpack value in every format the packer writes, nested up to `depth`.
void random_value(msgpack::packer<frame_builder>& pk, std::mt19937_64& rng, int depth) {
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  const auto lengths = std::array<std::uint32_t, 5>{0, 5, 31, 32, 300};
  switch (pick(depth > 0 ? 12 : 10)) {
    case 0:
      pk.pack_nil();
      break;
    case 1:
      pick(2) ? pk.pack_true() : pk.pack_false();
      break;
    case 2:  // unsigned, every width
      pk.pack_uint64(rng() >> pick(64));
      break;
    case 3: {  // signed, every width, both signs, in the packer's smallest format
      const auto magnitude = static_cast<std::int64_t>(rng() >> (pick(63) + 1));
      pk.pack_int64(pick(2) ? -magnitude : magnitude);
      break;
    }
    case 4: {  // signed formats holding non-negative values, as some writers do
      switch (pick(4)) {
        case 0:
          pk.pack_fix_int8(static_cast<std::int8_t>(pick(128)));
          break;
        case 1:
          pk.pack_fix_int16(static_cast<std::int16_t>(pick(32768)));
          break;
        case 2:
          pk.pack_fix_int32(static_cast<std::int32_t>(pick(1u << 31)));
          break;
        default:
          pk.pack_fix_int64(static_cast<std::int64_t>(rng() >> 1) * (pick(2) ? -1 : 1));
          break;
      }
      break;
    }
    case 5:
      pick(2) ? pk.pack_float(1.5f) : pk.pack_double(2.5);
      break;
    case 6: {
      // Now and then one past 65,535 bytes, for str 32.
      const std::string s(lengths[pick(lengths.size())] + (pick(50) == 0 ? 70000 : 0), 'x');
      pk.pack_str(static_cast<std::uint32_t>(s.size()));
      pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
      break;
    }
    case 7: {
      const std::string s(lengths[pick(lengths.size())] + (pick(50) == 0 ? 70000 : 0), 'b');
      pk.pack_bin(static_cast<std::uint32_t>(s.size()));
      pk.pack_bin_body(s.data(), static_cast<std::uint32_t>(s.size()));
      break;
    }
    case 8:
    case 9: {  // fixext 1..16 and ext 8/16/32
      const std::uint32_t sizes[] = {1, 2, 4, 8, 16, 0, 3, 17, 300};
      const std::string s(pick(50) == 0 ? 70000 : sizes[pick(9)], 'e');
      pk.pack_ext(s.size(), 7);
      pk.pack_ext_body(s.data(), static_cast<std::uint32_t>(s.size()));
      break;
    }
    case 10: {
      // Now and then 17 elements, past the fixarray format.
      const std::uint32_t n = pick(10) ? static_cast<std::uint32_t>(pick(5)) : 17;
      pk.pack_array(n);
      for (std::uint32_t i = 0; i < n; ++i) random_value(pk, rng, depth - 1);
      break;
    }
    default: {
      const std::uint32_t n = pick(10) ? static_cast<std::uint32_t>(pick(5)) : 17;
      pk.pack_map(n);
      for (std::uint32_t i = 0; i < 2 * n; ++i) random_value(pk, rng, depth - 1);
      break;
    }
  }
}

}  // namespace

TEST_CASE("the cursor reads random values in every format exactly as msgpack-c does") {
  std::mt19937_64 rng(20261203);
  for (int i = 0; i < 1000; ++i) {
    frame_builder f;
    msgpack::packer<frame_builder> pk(f);
    random_value(pk, rng, 4);
    const std::string frame = f.bytes();
    REQUIRE_FALSE(check_msgpack_bounds(frame, 1u << 24, 8));
    INFO("value " << i);
    REQUIRE(spelled_by_cursor(frame) == spelled_by_msgpack_c(frame));
  }
}

TEST_CASE("the cursor reads the boundaries of every integer format") {
  const std::uint64_t unsigned_edges[] = {0,          0x7f,       0x80,        0xff,
                                          0x100,      0xffff,     0x10000,     0xffffffffULL,
                                          0x100000000ULL, UINT64_MAX};
  for (std::uint64_t u : unsigned_edges) {
    frame_builder f;
    f.uint(u);
    CHECK(spelled_by_cursor(f.bytes()) == "+" + std::to_string(u));
  }
  const std::int64_t signed_edges[] = {-1,     -32,         -33,       -128,      -129,
                                       -32768, -32769,      INT32_MIN, -2147483649LL, INT64_MIN};
  for (std::int64_t i : signed_edges) {
    frame_builder f;
    f.sint(i);
    CHECK(spelled_by_cursor(f.bytes()) == std::to_string(i));
  }
}

TEST_CASE("a message from a writer that uses signed formats and many extra keys decodes") {
  // Some msgpack libraries write every integer as int64 and add fields this build does not
  // know; the envelope must read the same message.
  frame_builder f;
  msgpack::packer<frame_builder> pk(f);
  constexpr int extra_keys = 40;
  // v, t, job_id, attempt, checkpoint_id, unused, the extra keys and three keys no field can
  // have (an integer, an array, a map), each followed by a value that looks like a field.
  f.map(6 + extra_keys + 3);
  f.str("v");
  pk.pack_fix_int64(1);
  f.str("t").str("notify_checkpoint_complete");
  for (int i = 0; i < extra_keys; ++i) f.str("future_" + std::to_string(i)).array(1).nil();
  f.uint(7).str("job_id");
  f.array(2).str("checkpoint_id").uint(1).uint(666);
  f.map(1).str("checkpoint_id").uint(2).uint(777);
  f.str("job_id").str("5f0e7a3c9b1d4e2f8a6c0b7d3e9f1a2c");
  f.str("attempt").map(3);
  f.str("vertex");
  pk.pack_fix_int8(3);
  f.str("subtask");
  pk.pack_fix_int16(2);
  f.str("attempt");
  pk.pack_fix_int32(1);
  f.str("checkpoint_id");
  pk.pack_fix_int64(42);
  f.str("unused").nil();
  const decode_result decoded = decode(f.bytes());
  INFO((decoded.ok() ? std::string("ok") : decoded.error().detail));
  REQUIRE(decoded.ok());
  const auto& m = std::get<notify_checkpoint_complete>(decoded.value());
  CHECK(m.attempt == execution_attempt_id{{3, 2}, 1});
  CHECK(m.checkpoint == 42);
}

TEST_CASE("a float, an ext or a negative signed-format value in an unsigned field is named") {
  auto error_for = [](auto&& write_vertex) {
    frame_builder f;
    f.envelope("notify_checkpoint_complete", 3);
    f.str("job_id").str("5f0e7a3c9b1d4e2f8a6c0b7d3e9f1a2c");
    f.str("attempt").map(3);
    f.str("vertex");
    write_vertex(f);
    f.str("subtask").uint(0);
    f.str("attempt").uint(0);
    f.str("checkpoint_id").uint(1);
    const decode_result decoded = decode(f.bytes());
    REQUIRE_FALSE(decoded.ok());
    return decoded.error();
  };
  const decode_error as_float = error_for([](frame_builder& f) {
    msgpack::packer<frame_builder> pk(f);
    pk.pack_double(1.5);
  });
  CHECK(as_float.code == decode_errc::wrong_type);
  CHECK(as_float.detail == "field 'attempt.vertex': expected unsigned integer, got float");
  const decode_error as_ext = error_for([](frame_builder& f) {
    msgpack::packer<frame_builder> pk(f);
    pk.pack_ext(1, 3);
    pk.pack_ext_body("x", 1);
  });
  CHECK(as_ext.detail == "field 'attempt.vertex': expected unsigned integer, got ext");
  const decode_error negative = error_for([](frame_builder& f) {
    msgpack::packer<frame_builder> pk(f);
    pk.pack_fix_int64(-5);
  });
  CHECK(negative.code == decode_errc::invalid_value);
  CHECK(negative.detail == "field 'attempt.vertex': negative, expected an unsigned integer");
}

TEST_CASE("a message reads the same in any key order, and the first of a repeated key wins") {
  const std::string job = "5f0e7a3c9b1d4e2f8a6c0b7d3e9f1a2c";
  using field = std::function<void(frame_builder&)>;
  const std::vector<field> fields{
      [&](frame_builder& f) { f.str("job_id").str(job); },
      [](frame_builder& f) { f.str("attempt").attempt(4, 2, 1); },
      [](frame_builder& f) { f.str("checkpoint_id").uint(42); },
      [](frame_builder& f) { f.str("latest_completed_checkpoint_id").uint(40); },
  };
  const field repeat = [](frame_builder& f) { f.str("checkpoint_id").uint(99); };
  auto frame = [&](const std::vector<std::size_t>& order, bool repeated) {
    frame_builder f;
    f.envelope("notify_checkpoint_aborted", static_cast<std::uint32_t>(order.size()) + repeated);
    for (std::size_t i : order) fields[i](f);
    if (repeated) repeat(f);
    return f.bytes();
  };
  const notify_checkpoint_aborted expected{job, {{4, 2}, 1}, 42, 40};
  for (const auto& order : std::vector<std::vector<std::size_t>>{
           {0, 1, 2, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}, {2, 3, 0, 1}}) {
    for (bool repeated : {false, true}) {
      const decode_result decoded = decode(frame(order, repeated));
      INFO((decoded.ok() ? std::string("ok") : decoded.error().detail));
      REQUIRE(decoded.ok());
      CHECK(std::get<notify_checkpoint_aborted>(decoded.value()) == expected);
    }
  }
  // The latest completed id is optional: absent, the in-order reading misses and still works.
  frame_builder f;
  f.envelope("notify_checkpoint_aborted", 3);
  fields[0](f);
  fields[1](f);
  fields[2](f);
  const decode_result decoded = decode(f.bytes());
  REQUIRE(decoded.ok());
  CHECK(std::get<notify_checkpoint_aborted>(decoded.value()) ==
        notify_checkpoint_aborted{job, {{4, 2}, 1}, 42, std::nullopt});
}

TEST_CASE("a key repeated right after itself: the first wins, for bytes fields too") {
  // inline_state is read through optional_bytes; the repeat follows at once, where the
  // in-order lookup looks next.
  auto ack_with = [](auto&& repeat) {
    frame_builder f;
    msgpack::packer<frame_builder> pk(f);
    f.envelope("acknowledge_checkpoint", 5);
    f.str("job_id").str("5f0e7a3c9b1d4e2f8a6c0b7d3e9f1a2c");
    f.str("attempt").attempt(1, 0, 0);
    f.str("checkpoint_id").uint(3);
    f.str("checkpoint_id").uint(4);  // a repeat of a plain field, right after it
    f.str("state_handles").array(1).map(5);
    f.str("path").str("chk-3/a");
    f.str("size").uint(1);
    f.str("checksum").uint(2);
    f.str("inline_state");
    pk.pack_bin(1);
    pk.pack_bin_body("A", 1);
    f.str("inline_state");
    repeat(f, pk);
    const decode_result decoded = decode(f.bytes());
    INFO((decoded.ok() ? std::string("ok") : decoded.error().detail));
    REQUIRE(decoded.ok());
    return std::get<acknowledge_checkpoint>(decoded.value());
  };
  const acknowledge_checkpoint other_bytes =
      ack_with([](frame_builder&, msgpack::packer<frame_builder>& pk) {
        pk.pack_bin(1);
        pk.pack_bin_body("B", 1);
      });
  CHECK(other_bytes.checkpoint == 3);
  REQUIRE(other_bytes.state_handles.size() == 1);
  CHECK(other_bytes.state_handles[0].inline_state == std::optional<std::string>("A"));
  const acknowledge_checkpoint then_nil =
      ack_with([](frame_builder& f, msgpack::packer<frame_builder>&) { f.nil(); });
  CHECK(then_nil.state_handles[0].inline_state == std::optional<std::string>("A"));
  const acknowledge_checkpoint then_int =
      ack_with([](frame_builder& f, msgpack::packer<frame_builder>&) { f.uint(5); });
  CHECK(then_int.state_handles[0].inline_state == std::optional<std::string>("A"));
}
