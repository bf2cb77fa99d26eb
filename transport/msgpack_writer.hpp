#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace snapflow::wire {

// Writes msgpack into a std::string, choosing the same (smallest) format for every value as
// msgpack-c's packer does, so frames are byte for byte what they were. It exists because the
// packer hands each header byte and each key to its sink through a call the compiler would not
// inline: encoding a control message made ~60 such calls, more instructions than the rest of
// the encoding, on the path every trigger and acknowledgement takes. Here each value is a bounds
// check and a few stores into a string sized ahead.
class msgpack_writer {
 public:
  msgpack_writer(std::string& out, std::size_t expected_bytes) : out_(out) {
    out_.resize(expected_bytes);
    cursor_ = out_.data();
    end_ = cursor_ + out_.size();
  }
  msgpack_writer(const msgpack_writer&) = delete;
  msgpack_writer& operator=(const msgpack_writer&) = delete;

  void map(std::uint32_t pairs) { header(pairs, 0x80, 16, 0xde); }
  void array(std::uint32_t elements) { header(elements, 0x90, 16, 0xdc); }

  void str(std::string_view s) {
    room(5 + s.size());
    if (s.size() < 32)
      put(static_cast<std::uint8_t>(0xa0 | s.size()));
    else
      length(s.size(), 0xd9);
    bytes(s);
  }

  void bin(std::string_view b) {
    room(5 + b.size());
    length(b.size(), 0xc4);
    bytes(b);
  }

  void uint(std::uint64_t v) {
    room(9);
    if (v < 128) {
      put(static_cast<std::uint8_t>(v));
    } else if (v < 256) {
      put(0xcc);
      put(static_cast<std::uint8_t>(v));
    } else if (v < 65536) {
      put(0xcd);
      big_endian(v, 2);
    } else if (v < (std::uint64_t{1} << 32)) {
      put(0xce);
      big_endian(v, 4);
    } else {
      put(0xcf);
      big_endian(v, 8);
    }
  }

  // Non-negative values take the unsigned formats, as msgpack-c writes them.
  void sint(std::int64_t v) {
    if (v >= 0) return uint(static_cast<std::uint64_t>(v));
    room(9);
    const auto bits = static_cast<std::uint64_t>(v);
    if (v >= -32) {
      put(static_cast<std::uint8_t>(bits));
    } else if (v >= -128) {
      put(0xd0);
      put(static_cast<std::uint8_t>(bits));
    } else if (v >= -32768) {
      put(0xd1);
      big_endian(bits, 2);
    } else if (v >= -2147483648LL) {
      put(0xd2);
      big_endian(bits, 4);
    } else {
      put(0xd3);
      big_endian(bits, 8);
    }
  }

  void boolean(bool b) {
    room(1);
    put(b ? 0xc3 : 0xc2);
  }
  void nil() {
    room(1);
    put(0xc0);
  }

  // Trims the string to what was written; the writer must not be used after.
  void finish() { out_.resize(static_cast<std::size_t>(cursor_ - out_.data())); }

 private:
  void header(std::uint32_t n, std::uint8_t fix, std::uint32_t fix_limit, std::uint8_t first) {
    room(5);
    if (n < fix_limit) {
      put(static_cast<std::uint8_t>(fix | n));
    } else if (n < 65536) {
      put(first);
      big_endian(n, 2);
    } else {
      put(static_cast<std::uint8_t>(first + 1));
      big_endian(n, 4);
    }
  }

  // A str or bin length in the smallest of its 8-, 16- and 32-bit formats, whose type bytes
  // follow each other from `first`.
  void length(std::size_t n, std::uint8_t first) {
    if (n < 256) {
      put(first);
      put(static_cast<std::uint8_t>(n));
    } else if (n < 65536) {
      put(static_cast<std::uint8_t>(first + 1));
      big_endian(n, 2);
    } else {
      put(static_cast<std::uint8_t>(first + 2));
      big_endian(n, 4);
    }
  }

  void room(std::size_t size) {
    if (size > static_cast<std::size_t>(end_ - cursor_)) [[unlikely]]
      grow(size);
  }
  [[gnu::noinline]] void grow(std::size_t size) {
    const auto used = static_cast<std::size_t>(cursor_ - out_.data());
    out_.resize(std::max(out_.size() * 2, used + size));
    cursor_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }
  void put(std::uint8_t b) { *cursor_++ = static_cast<char>(b); }
  void big_endian(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) put(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void bytes(std::string_view s) {
    if (!s.empty()) std::memcpy(cursor_, s.data(), s.size());
    cursor_ += s.size();
  }

  std::string& out_;
  char* cursor_ = nullptr;
  char* end_ = nullptr;
};

}  // namespace snapflow::wire
