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
  auto sized = [&](k type, std::uint64_t length) {
    v.type = type;
    v.size = static_cast<std::uint32_t>(length);  // below the frame limit: bounds-checked
    v.data = pos_;
    pos_ += length;
  };
  auto container = [&](k type, std::uint64_t count) {
    v.type = type;
    v.size = static_cast<std::uint32_t>(count);
    v.data = pos_;
  };
  if (b >= 0xe0) {
    v.type = k::negative_integer;
    v.i64 = static_cast<std::int8_t>(b);
    return;
  }
  switch (b) {
    case 0xc0:
      v.type = k::nil;
      break;
    case 0xc2:
    case 0xc3:
      v.type = k::boolean;
      v.u64 = b == 0xc3 ? 1 : 0;
      break;
    case 0xc4:
    case 0xc5:
    case 0xc6: {
      const std::size_t n = std::size_t{1} << (b - 0xc4);
      const std::uint64_t length = big_endian(pos_, n);
      pos_ += n;
      sized(k::bin, length);
      break;
    }
    case 0xc7:
    case 0xc8:
    case 0xc9: {
      const std::size_t n = std::size_t{1} << (b - 0xc7);
      const std::uint64_t length = big_endian(pos_, n);
      pos_ += n + 1;  // and the ext's type byte
      sized(k::ext, length);
      break;
    }
    case 0xca:
      v.type = k::floating;
      pos_ += 4;
      break;
    case 0xcb:
      v.type = k::floating;
      pos_ += 8;
      break;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: {
      const std::size_t n = std::size_t{1} << (b - 0xcc);
      v.type = k::positive_integer;
      v.u64 = big_endian(pos_, n);
      pos_ += n;
      break;
    }
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
      const std::size_t n = std::size_t{1} << (b - 0xd0);
      set_signed(v, signed_of(pos_, n));
      pos_ += n;
      break;
    }
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
      ++pos_;  // the ext's type byte
      sized(k::ext, std::size_t{1} << (b - 0xd4));
      break;
    case 0xd9:
    case 0xda:
    case 0xdb: {
      const std::size_t n = std::size_t{1} << (b - 0xd9);
      const std::uint64_t length = big_endian(pos_, n);
      pos_ += n;
      sized(k::str, length);
      break;
    }
    case 0xdc:
    case 0xdd: {
      const std::size_t n = b == 0xdc ? 2 : 4;
      const std::uint64_t count = big_endian(pos_, n);
      pos_ += n;
      container(k::array, count);
      break;
    }
    case 0xde:
    case 0xdf: {
      const std::size_t n = b == 0xde ? 2 : 4;
      const std::uint64_t count = big_endian(pos_, n);
      pos_ += n;
      container(k::map, count);
      break;
    }
    default:
      // 0xc1, reserved (check_msgpack_bounds refuses it, so an accepted frame never has it), or
      // a format read() handles inline and never passes here.
      assert(false && "a byte read_other does not read");
      v.type = k::nil;
      break;
  }
}

std::uint64_t msgpack_cursor::step() {
  // The same formats as read(), without building a value: this is what indexing a map does
  // for every value it passes.
  const std::uint8_t b = *pos_++;
  if (b <= 0x7f || b >= 0xe0) return 0;
  if (b <= 0x8f) return 2 * std::uint64_t{b & 0x0fu};
  if (b <= 0x9f) return b & 0x0fu;
  if (b <= 0xbf) {
    pos_ += b & 0x1fu;
    return 0;
  }
  auto length_then = [&](std::size_t n, std::size_t extra) {
    const std::uint64_t length = big_endian(pos_, n);
    pos_ += n + extra + length;
  };
  switch (b) {
    case 0xc4:
    case 0xc5:
    case 0xc6:
      length_then(std::size_t{1} << (b - 0xc4), 0);
      return 0;
    case 0xc7:
    case 0xc8:
    case 0xc9:
      length_then(std::size_t{1} << (b - 0xc7), 1);
      return 0;
    case 0xca:
      pos_ += 4;
      return 0;
    case 0xcb:
      pos_ += 8;
      return 0;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
      pos_ += std::size_t{1} << (b - 0xcc);
      return 0;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3:
      pos_ += std::size_t{1} << (b - 0xd0);
      return 0;
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
      pos_ += 1 + (std::size_t{1} << (b - 0xd4));
      return 0;
    case 0xd9:
    case 0xda:
    case 0xdb:
      length_then(std::size_t{1} << (b - 0xd9), 0);
      return 0;
    case 0xdc:
    case 0xdd: {
      const std::size_t n = b == 0xdc ? 2 : 4;
      const std::uint64_t count = big_endian(pos_, n);
      pos_ += n;
      return count;
    }
    case 0xde:
    case 0xdf: {
      const std::size_t n = b == 0xde ? 2 : 4;
      const std::uint64_t count = big_endian(pos_, n);
      pos_ += n;
      return 2 * count;
    }
    default:  // nil, bool, and 0xc1 (reserved: never in an accepted frame)
      assert(b != 0xc1 && "a reserved byte in a frame check_msgpack_bounds accepted");
      return 0;
  }
}

void msgpack_cursor::skip(std::uint64_t values) {
  // Iterative, so a deep frame costs no stack; the count stays below the frame's size.
  while (values > 0) values += step() - 1;
}


}  // namespace snapflow::wire
