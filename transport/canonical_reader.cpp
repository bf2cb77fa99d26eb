// The fast reader of canonical frames, decode()'s first try (see canonical_reader below).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "transport/envelope.hpp"
#include "transport/message_fields.hpp"

namespace snapflow::wire {

namespace detail {
namespace {

// A frame from a snapflow peer is canonical: the keys of every map in the order the description
// gives them, optional fields at their zero left out, each value in the format msgpack_writer
// picks. canonical_reader reads such a frame in one pass, straight down the description: one key
// compare and one value per field, no search, no value tree, no separate bounds pass (each read
// checks the bytes it needs itself). It gives up at the first thing it does not expect (another
// writer's order or formats, an unknown or repeated key, nil, a value out of range, any fault)
// and decode() then reads the frame again with the general reader, which accepts every valid
// frame and names every fault. So a frame it accepts is one the general reader accepts, with the
// same result, and anything else is the general reader's to judge; the envelope tests check
// both readers agree on every frame they read.
//
// It exists for the checkpoint's hot path: a trigger and an acknowledgement read this way cost
// a fraction of the general reader's work, and where 16 worker processes share two CPUs every
// process meets that work cold (docs/benchmarks.md, "Control plane").
class canonical_reader {
 public:
  canonical_reader(const std::uint8_t* begin, const std::uint8_t* end) : p_(begin), end_(end) {}

  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }

  // The envelope's map header, "v" and "t": true with the type's name.
  bool envelope(std::uint32_t& pairs, std::string_view& type) {
    std::uint64_t version = 0;
    if (!map_header(pairs) || pairs < 2 || !key("v") || !unsigned_value(version) ||
        version != current_protocol_version || !key("t") || !str_value(type))
      return fail();
    left_ = pairs - 2;
    return true;
  }

  // Whether every pair of the current map was read.
  bool map_done() const { return ok_ && left_ == 0; }

  template <typename T>
  void required(std::string_view k, T& out) {
    if (!ok_) return;
    if (!next_key(k)) {
      fail();
      return;
    }
    read(out);
  }
  template <typename T>
  void optional(std::string_view k, T& out) {
    if (!ok_ || !next_key(k)) return;  // absent: the struct's default, which is the zero
    if constexpr (is_optional<T>::value) {
      typename T::value_type value{};
      read(value);
      out = std::move(value);
    } else {
      read(out);
    }
  }
  template <typename T>
  void entries(std::string_view k, std::vector<T>& out) {
    required(k, out);
    if (ok_ && out.empty()) fail();
  }
  void bytes(std::string_view k, std::string& out) {
    if (!ok_) return;
    if (!next_key(k)) {
      fail();
      return;
    }
    read_bytes(out);
  }
  void optional_bytes(std::string_view k, std::optional<std::string>& out) {
    if (!ok_ || !next_key(k)) return;
    std::string value;
    read_bytes(value);
    out = std::move(value);
  }

  template <typename M>
  void map(M& m) {
    std::uint32_t pairs = 0;
    if (!map_header(pairs)) {
      fail();
      return;
    }
    const std::uint32_t outer = std::exchange(left_, pairs);
    describe(*this, m);
    if (left_ != 0) fail();  // a key the description does not have
    left_ = outer;
  }

  bool fail() {
    ok_ = false;
    return false;
  }

 private:
  // The next pair's key, when it is `k` (and there is a next pair): consumed, true.
  bool next_key(std::string_view k) {
    if (left_ == 0 || !key(k)) return false;
    --left_;
    return true;
  }
  // `k` as msgpack_writer::str writes a field name: a fixstr below 32 bytes, else str8.
  bool key(std::string_view k) {
    const std::size_t n = k.size();
    const std::size_t header = n < 32 ? 1 : 2;
    if (!need(header + n)) return false;
    if (n < 32 ? *p_ != (0xa0 | n) : (p_[0] != 0xd9 || p_[1] != n)) return false;
    if (std::memcmp(p_ + header, k.data(), n) != 0) return false;
    p_ += header + n;
    return true;
  }

  bool need(std::size_t n) const { return static_cast<std::size_t>(end_ - p_) >= n; }
  std::uint64_t big_endian(std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p_[i];
    p_ += n;
    return v;
  }
  // A header in a fix format (`fix`, `fix_bits` of count) or its 16- and 32-bit formats.
  bool header(std::uint8_t fix, std::uint8_t fix_mask, std::uint8_t first, std::uint32_t& n) {
    if (!need(1)) return false;
    const std::uint8_t b = *p_;
    if ((b & ~fix_mask & 0xff) == fix) {
      n = b & fix_mask;
      ++p_;
      return true;
    }
    if (b == first && need(3)) {
      ++p_;
      n = static_cast<std::uint32_t>(big_endian(2));
      return true;
    }
    if (b == first + 1 && need(5)) {
      ++p_;
      n = static_cast<std::uint32_t>(big_endian(4));
      return true;
    }
    return false;
  }
  bool map_header(std::uint32_t& pairs) { return header(0x80, 0x0f, 0xde, pairs); }
  bool array_header(std::uint32_t& n) { return header(0x90, 0x0f, 0xdc, n); }

  bool unsigned_value(std::uint64_t& v) {
    if (!need(1)) return false;
    const std::uint8_t b = *p_;
    if (b <= 0x7f) {
      v = b;
      ++p_;
      return true;
    }
    if (b < 0xcc || b > 0xcf) return false;
    const std::size_t n = std::size_t{1} << (b - 0xcc);
    if (!need(1 + n)) return false;
    ++p_;
    v = big_endian(n);
    return true;
  }
  bool signed_value(std::int64_t& v) {
    if (!need(1)) return false;
    const std::uint8_t b = *p_;
    if (b >= 0xe0) {
      v = static_cast<std::int8_t>(b);
      ++p_;
      return true;
    }
    if (b >= 0xd0 && b <= 0xd3) {
      const std::size_t n = std::size_t{1} << (b - 0xd0);
      if (!need(1 + n)) return false;
      ++p_;
      const std::uint64_t raw = big_endian(n);
      const int shift = static_cast<int>(64 - 8 * n);  // sign-extend the n-byte value
      v = static_cast<std::int64_t>(raw << shift) >> shift;
      return v < 0;  // the writer uses these formats for negative values only
    }
    std::uint64_t u = 0;
    if (!unsigned_value(u) || u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return false;
    v = static_cast<std::int64_t>(u);
    return true;
  }
  // str in any of its formats; `bin_too`: bin as well (fields of bytes take both).
  bool text(std::string_view& out, bool bin_too = false) {
    if (!need(1)) return false;
    const std::uint8_t b = *p_;
    std::size_t n = 0;
    if ((b & 0xe0) == 0xa0) {
      n = b & 0x1f;
      ++p_;
    } else if (b >= 0xd9 && b <= 0xdb) {
      const std::size_t w = std::size_t{1} << (b - 0xd9);
      if (!need(1 + w)) return false;
      ++p_;
      n = big_endian(w);
    } else if (bin_too && b >= 0xc4 && b <= 0xc6) {
      const std::size_t w = std::size_t{1} << (b - 0xc4);
      if (!need(1 + w)) return false;
      ++p_;
      n = big_endian(w);
    } else {
      return false;
    }
    if (!need(n)) return false;
    out = std::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool str_value(std::string_view& out) { return text(out); }

  template <std::unsigned_integral T>
    requires(!std::same_as<T, bool>)
  void read(T& out) {
    std::uint64_t v = 0;
    if (!unsigned_value(v) || v > std::numeric_limits<T>::max()) {
      fail();
      return;
    }
    out = static_cast<T>(v);
  }
  void read(std::int64_t& out) {
    if (!signed_value(out)) fail();
  }
  void read(bool& out) {
    if (!need(1) || (*p_ != 0xc2 && *p_ != 0xc3)) {
      fail();
      return;
    }
    out = *p_++ == 0xc3;
  }
  void read(std::string& out) {
    std::string_view t;
    if (!text(t)) {
      fail();
      return;
    }
    out.assign(t);
  }
  void read_bytes(std::string& out) {
    std::string_view t;
    if (!text(t, true)) {
      fail();
      return;
    }
    out.assign(t);
  }
  void read(task_state& out) { read_name(out, parse_task_state); }
  void read(checkpointing_mode& out) { read_name(out, parse_checkpointing_mode); }
  // An enum that travels as its name; an unknown name is the general reader's to report.
  template <typename E>
  void read_name(E& out, std::optional<E> (*parse)(std::string_view)) {
    std::string_view t;
    std::optional<E> parsed;
    if (!text(t) || !(parsed = parse(t))) {
      fail();
      return;
    }
    out = *parsed;
  }
  template <record T>
  void read(T& out) {
    map(out);
  }
  template <record T>
  void read(std::vector<T>& out) {
    std::uint32_t n = 0;
    if (!array_header(n)) {
      fail();
      return;
    }
    out.clear();
    out.reserve(std::min<std::size_t>(n, max_reserved_entries));
    for (std::uint32_t i = 0; i < n && ok_; ++i) map(out.emplace_back());
  }

  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::uint32_t left_ = 0;  // pairs of the current map not read yet
  bool ok_ = true;
};

// The message a canonical frame holds, or nothing when the frame is not canonical (then the
// general reader decides).
template <std::size_t I = 0>
std::optional<message> canonical_body(std::string_view type, canonical_reader& reader) {
  if constexpr (I == std::variant_size_v<message>) {
    return std::nullopt;
  } else {
    using T = std::variant_alternative_t<I, message>;
    if (type != T::wire_type) return canonical_body<I + 1>(type, reader);
    std::optional<message> out{std::in_place, std::in_place_type<T>};
    describe(reader, std::get<T>(*out));
    if (!reader.map_done() || !reader.at_end()) return std::nullopt;
    return out;
  }
}

// Sets every optional field of a struct the caller keeps to its zero (strings and vectors
// emptied, keeping their room), so that a canonical frame that leaves a field out reads as the
// zero there, as a fresh struct would.
struct optional_field_reset {
  template <typename T>
  void required(std::string_view, T&) {}
  template <typename T>
  void optional(std::string_view, T& value) {
    if constexpr (is_optional<T>::value) {
      value.reset();
    } else if constexpr (requires { value.clear(); }) {
      value.clear();
    } else {
      value = T{};
    }
  }
  template <typename T>
  void entries(std::string_view, std::vector<T>&) {}
  void bytes(std::string_view, std::string&) {}
  void optional_bytes(std::string_view, std::optional<std::string>& value) { value.reset(); }
};

template <typename M>
bool decode_canonical_into(std::string_view frame, M& out) {
  const auto* begin = reinterpret_cast<const std::uint8_t*>(frame.data());
  canonical_reader reader(begin, begin + frame.size());
  std::uint32_t pairs = 0;
  std::string_view type;
  if (!reader.envelope(pairs, type) || type != M::wire_type) return false;
  optional_field_reset reset;
  describe(reset, out);
  describe(reader, out);
  return reader.map_done() && reader.at_end();
}

}  // namespace

std::optional<message> decode_canonical(std::string_view frame) {
  const auto* begin = reinterpret_cast<const std::uint8_t*>(frame.data());
  canonical_reader reader(begin, begin + frame.size());
  std::uint32_t pairs = 0;
  std::string_view type;
  if (!reader.envelope(pairs, type)) return std::nullopt;
  return canonical_body(type, reader);
}

}  // namespace detail

bool decode_canonical(std::string_view frame, trigger_checkpoint& out) {
  return detail::decode_canonical_into(frame, out);
}

bool decode_canonical(std::string_view frame, acknowledge_checkpoint& out) {
  return detail::decode_canonical_into(frame, out);
}
}  // namespace snapflow::wire
