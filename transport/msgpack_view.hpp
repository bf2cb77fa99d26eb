#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

// Reading msgpack in place, for frames that check_msgpack_bounds accepted: no object tree, no
// zone, no copy. The envelope decoder used msgpack::unpack before; where many processes share
// few CPUs, a process meets its data cold after every context switch, and the tree (one object
// per value in a freshly touched zone) cost several times its hot price there. Reading the
// frame's own bytes touches only the frame.
//
// Every function here trusts the frame's structure: lengths within the frame, one value that
// fills it, no reserved byte, bounded depth. check_msgpack_bounds must have said so first, and
// the sizes it gives each format must stay the sizes read() gives it.
namespace snapflow::wire {

// One msgpack value: its type, a scalar's value, or where its bytes or a container's elements
// start. It points into the frame, which must outlive it. Small (24 bytes), so passing it
// around stays in registers.
struct msgpack_value {
  // The types msgpack-c's object model names; an integer written in a signed format but >= 0 is
  // positive_integer, as msgpack-c reads it.
  enum class kind : std::uint8_t {
    nil,
    boolean,
    positive_integer,
    negative_integer,
    floating,
    str,
    bin,
    array,
    map,
    ext,
  };
  kind type = kind::nil;
  std::uint32_t size = 0;  // str, bin, ext: bytes; array: elements; map: key/value pairs
  union {
    std::uint64_t u64 = 0;  // positive_integer; boolean: 1 for true
    std::int64_t i64;       // negative_integer
  };
  const std::uint8_t* data = nullptr;  // str, bin, ext: the bytes; array, map: the first element

  std::string_view bytes() const { return {reinterpret_cast<const char*>(data), size}; }
  bool boolean() const { return u64 != 0; }
};

// Whether two short texts (field names) are equal, compared eight bytes at a time inline
// rather than through a call to memcmp.
inline bool same_text(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  std::size_t n = a.size();
  for (; n >= 8; n -= 8, x += 8, y += 8) {
    std::uint64_t u, v;
    std::memcpy(&u, x, 8);
    std::memcpy(&v, y, 8);
    if (u != v) return false;
  }
  for (; n > 0; --n, ++x, ++y)
    if (*x != *y) return false;
  return true;
}

// The name a type has in decode errors ("expected uint, got str").
std::string_view type_name(msgpack_value::kind type);

// Reads values one after another from a position in an accepted frame.
class msgpack_cursor {
 public:
  explicit msgpack_cursor(const std::uint8_t* position) : pos_(position) {}

  // The value at the position. Past a scalar, or past a container's header: its elements come
  // next, and skip_elements steps over them. Inline for the formats control messages are made
  // of (small integers, short strings, small maps and arrays).
  msgpack_value read() {
    const std::uint8_t b = *pos_;
    msgpack_value v;
    if (b <= 0x7f) {
      v.type = msgpack_value::kind::positive_integer;
      v.u64 = b;
      ++pos_;
    } else if (b <= 0x9f) {
      v.type = b <= 0x8f ? msgpack_value::kind::map : msgpack_value::kind::array;
      v.size = b & 0x0fu;
      v.data = ++pos_;
    } else if (b <= 0xbf) {
      v.type = msgpack_value::kind::str;
      v.size = b & 0x1fu;
      v.data = ++pos_;
      pos_ += v.size;
    } else {
      read_other(v);
    }
    return v;
  }
  // Steps over `values` whole values (containers with everything inside them).
  void skip(std::uint64_t values);
  // Steps over what a container read() just returned holds; nothing for a scalar.
  void skip_elements(const msgpack_value& container) {
    if (container.type == msgpack_value::kind::array) skip(container.size);
    if (container.type == msgpack_value::kind::map) skip(2 * std::uint64_t{container.size});
  }

  // Reads a map's key, whole. True, with its text, when it is a string: the only keys that
  // name fields. Inline for the short strings every snapflow key is.
  bool read_key(std::string_view& key) {
    const std::uint8_t b = *pos_;
    if ((b & 0xe0) == 0xa0) {
      key = std::string_view(reinterpret_cast<const char*>(pos_ + 1), b & 0x1fu);
      pos_ += 1 + (b & 0x1fu);
      return true;
    }
    const msgpack_value k = read();
    skip_elements(k);
    if (k.type != msgpack_value::kind::str) return false;
    key = k.bytes();
    return true;
  }

  const std::uint8_t* position() const { return pos_; }

 private:
  void read_other(msgpack_value& v);

  const std::uint8_t* pos_;
};

}  // namespace snapflow::wire
