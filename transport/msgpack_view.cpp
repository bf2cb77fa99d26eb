#include "transport/msgpack_view.hpp"

#include <cassert>
#include <cstring>

namespace snapflow::wire {

namespace {

// Big-endian unsigned integer of `n` bytes (msgpack's byte order).
std::uint64_t big_endian(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// A signed integer of `n` bytes, as positive_integer when >= 0 (msgpack-c's reading).
void set_signed(msgpack_value& v, std::int64_t value) {
  if (value < 0) {
    v.type = msgpack_value::kind::negative_integer;
    v.i64 = value;
  } else {
    v.type = msgpack_value::kind::positive_integer;
    v.u64 = static_cast<std::uint64_t>(value);
  }
}

std::int64_t signed_of(const std::uint8_t* p, std::size_t n) {
  const std::uint64_t raw = big_endian(p, n);
  switch (n) {
    case 1:
      return static_cast<std::int8_t>(raw);
    case 2:
      return static_cast<std::int16_t>(raw);
    case 4:
      return static_cast<std::int32_t>(raw);
    default:
      return static_cast<std::int64_t>(raw);
  }
}

}  // namespace

std::string_view type_name(msgpack_value::kind type) {
  using k = msgpack_value::kind;
  switch (type) {
    case k::nil:
      return "nil";
    case k::boolean:
      return "bool";
    case k::positive_integer:
    case k::negative_integer:
      return "int";
    case k::floating:
      return "float";
    case k::str:
      return "str";
    case k::bin:
      return "bin";
    case k::array:
      return "array";
    case k::map:
      return "map";
    case k::ext:
      return "ext";
  }
  return "unknown";
}

void msgpack_cursor::read_other(msgpack_value& v) {
  using k = msgpack_value::kind;
  const std::uint8_t b = *pos_++;
  // A big-endian length or count of `n` bytes, then `skipped` bytes (an ext's type byte).
  auto prefix = [&](std::size_t n, std::size_t skipped = 0) {
    const std::uint64_t length = big_endian(pos_, n);
    pos_ += n + skipped;
    return static_cast<std::uint32_t>(length);  // below the frame limit: bounds-checked
  };
  auto bytes = [&](k type, std::uint32_t length) {
    v.type = type;
    v.size = length;
    v.data = pos_;
    pos_ += length;
  };
  auto container = [&](k type, std::uint32_t count) {
    v.type = type;
    v.size = count;
    v.data = pos_;
  };
  if (b >= 0xe0) {
    v.type = k::negative_integer;
    v.i64 = static_cast<std::int8_t>(b);
    return;
  }
  // Formats that come in widths of 1, 2, 4 (and 8) bytes, numbered from their first byte.
  auto width = [b](std::uint8_t first) { return std::size_t{1} << (b - first); };
  switch (b) {
    case 0xc0:
      v.type = k::nil;
      return;
    case 0xc2:
    case 0xc3:
      v.type = k::boolean;
      v.u64 = b == 0xc3 ? 1 : 0;
      return;
    case 0xc4:
    case 0xc5:
    case 0xc6:
      return bytes(k::bin, prefix(width(0xc4)));
    case 0xc7:
    case 0xc8:
    case 0xc9:
      return bytes(k::ext, prefix(width(0xc7), 1));
    case 0xca:
    case 0xcb:
      v.type = k::floating;
      pos_ += b == 0xca ? 4 : 8;
      return;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
      v.type = k::positive_integer;
      v.u64 = big_endian(pos_, width(0xcc));
      pos_ += width(0xcc);
      return;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3:
      set_signed(v, signed_of(pos_, width(0xd0)));
      pos_ += width(0xd0);
      return;
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
      ++pos_;  // the ext's type byte
      return bytes(k::ext, static_cast<std::uint32_t>(width(0xd4)));
    case 0xd9:
    case 0xda:
    case 0xdb:
      return bytes(k::str, prefix(width(0xd9)));
    case 0xdc:
    case 0xdd:
      return container(k::array, prefix(b == 0xdc ? 2 : 4));
    case 0xde:
    case 0xdf:
      return container(k::map, prefix(b == 0xde ? 2 : 4));
    default:
      // 0xc1, reserved (check_msgpack_bounds refuses it, so an accepted frame never has it), or
      // a format read() handles inline and never passes here.
      assert(false && "a byte read_other does not read");
      v.type = k::nil;
      return;
  }
}

void msgpack_cursor::skip(std::uint64_t values) {
  // Iterative, so a deep frame costs no stack; the count stays below the frame's size. A
  // container's header adds its elements to the values still to step over.
  while (values > 0) {
    --values;
    const msgpack_value v = read();
    if (v.type == msgpack_value::kind::array) values += v.size;
    if (v.type == msgpack_value::kind::map) values += 2 * std::uint64_t{v.size};
  }
}


}  // namespace snapflow::wire
