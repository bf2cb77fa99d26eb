// The general reader: every valid frame, in any key order and any msgpack format a writer may
// choose, with every fault named (decode_errc and a detail that says where).
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "transport/envelope.hpp"
#include "transport/message_fields.hpp"
#include "transport/msgpack_bounds.hpp"
#include "transport/msgpack_view.hpp"

namespace snapflow::wire::detail {

namespace {

std::string_view type_of(const msgpack_value& o) { return type_name(o.type); }

// Text from the peer that ends up in an error detail: bounded and printable, so a hostile
// frame cannot flood or garble a log line.
std::string printable(std::string_view text) {
  constexpr std::size_t shown = 64;
  std::string out;
  for (char c : text.substr(0, shown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > shown) out += "...";
  return out;
}


// Reads the fields of one msgpack map into a struct; remembers the first fault and ignores
// everything after it. A nested reader knows its place (parent, key, array index) and spells
// its path ("options.location.") only when it reports a fault, so a valid frame costs no
// string building.
class field_reader {
 public:
  explicit field_reader(const msgpack_value& map) : map_(map), next_(map.data) {}
  field_reader(const msgpack_value& map, const field_reader& parent, std::string_view key,
               std::optional<std::uint32_t> index)
      : map_(map), next_(map.data), parent_(&parent), key_(key), index_(index) {}

  template <typename T>
  void required(std::string_view key, T& out) {
    if (error) return;
    const msgpack_value o = find(key);
    if (absent(o)) {
      fail(decode_errc::missing_field, key, "required");
      return;
    }
    read(key, o, out);
  }
  template <typename T>
  void optional(std::string_view key, T& out) {
    if (error) return;
    const msgpack_value o = find(key);
    if (absent(o)) return;
    if constexpr (is_optional<T>::value) {
      typename T::value_type value{};
      read(key, o, value);
      if (!error) out = std::move(value);
    } else {
      read(key, o, out);
    }
  }
  template <typename T>
  void entries(std::string_view key, std::vector<T>& out) {
    required(key, out);
    if (!error && out.empty()) fail(decode_errc::invalid_value, key, "an empty batch");
  }
  // Each key is looked up once: find() relies on it (see there).
  void optional_bytes(std::string_view key, std::optional<std::string>& out) {
    if (error) return;
    const msgpack_value o = find(key);
    if (absent(o)) return;
    std::string value;
    read_bytes(key, o, value);
    if (!error) out = std::move(value);
  }
  void bytes(std::string_view key, std::string& out) {
    if (error) return;
    const msgpack_value o = find(key);
    if (absent(o)) {
      fail(decode_errc::missing_field, key, "required");
      return;
    }
    read_bytes(key, o, out);
  }

  // The value of `key`, nil when absent (a nil value counts as absent); the first match wins if
  // a key repeats. Returned by value, not in a std::optional: copying a just-built value through
  // memory stalled the decoder on store forwarding.
  // A writer of the same description (every snapflow peer) wrote the keys in the order they are
  // asked for, so the next unread pair is tried first; only when that misses (a field absent,
  // another writer's order) are the pairs from there on searched. Every pair before it was
  // matched to another field's name, so neither way can skip an earlier occurrence of `key`:
  // which holds only while each key is asked for once per map (asserted in debug builds).
  msgpack_value find(std::string_view key) {
#ifndef NDEBUG
    assert(std::find(asked_.begin(), asked_.end(), key) == asked_.end() &&
           "a key looked up twice in one map: find() would miss its first occurrence");
    asked_.push_back(key);
#endif
    if (in_order_ < map_.size) {
      msgpack_cursor pair(next_);
      std::string_view k;
      if (pair.read_key(k) && same_text(k, key)) {
        const msgpack_value found = pair.read();
        pair.skip_elements(found);
        next_ = pair.position();
        ++in_order_;
        return found;
      }
    }
    msgpack_cursor pair(next_);
    for (std::uint32_t i = in_order_; i < map_.size; ++i) {
      std::string_view k;
      if (pair.read_key(k) && same_text(k, key)) return pair.read();
      pair.skip(1);
    }
    return {};
  }

  static bool absent(const msgpack_value& v) { return v.type == msgpack_value::kind::nil; }

  void fail(decode_errc code, std::string_view key, std::string_view what) {
    error = decode_error{code, "field '" + path() + std::string(key) + "': " + std::string(what),
                         0};
  }

  std::optional<decode_error> error;

 private:
  void wrong(std::string_view key, std::string_view expected, const msgpack_value& o) {
    fail(decode_errc::wrong_type, key,
         "expected " + std::string(expected) + ", got " + std::string(type_of(o)));
  }

  using kind = msgpack_value::kind;

  template <std::unsigned_integral T>
    requires(!std::same_as<T, bool>)
  void read(std::string_view key, const msgpack_value& o, T& out) {
    if (o.type == kind::negative_integer) {
      fail(decode_errc::invalid_value, key, "negative, expected an unsigned integer");
    } else if (o.type != kind::positive_integer) {
      wrong(key, "unsigned integer", o);
    } else if (o.u64 > std::numeric_limits<T>::max()) {
      fail(decode_errc::invalid_value, key,
           std::to_string(o.u64) + " is above " + std::to_string(std::numeric_limits<T>::max()));
    } else {
      out = static_cast<T>(o.u64);
    }
  }
  void read(std::string_view key, const msgpack_value& o, std::int64_t& out) {
    if (o.type == kind::negative_integer) {
      out = o.i64;
    } else if (o.type != kind::positive_integer) {
      wrong(key, "integer", o);
    } else if (o.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(decode_errc::invalid_value, key, std::to_string(o.u64) + " overflows int64");
    } else {
      out = static_cast<std::int64_t>(o.u64);
    }
  }
  void read_bytes(std::string_view key, const msgpack_value& o, std::string& out) {
    // Bytes travel as bin; str is accepted too, for writers whose language blurs the two.
    if (o.type == kind::bin || o.type == kind::str)
      out.assign(o.bytes());
    else
      wrong(key, "bin", o);
  }
  void read(std::string_view key, const msgpack_value& o, bool& out) {
    if (o.type != kind::boolean) return wrong(key, "bool", o);
    out = o.boolean();
  }
  void read(std::string_view key, const msgpack_value& o, std::string& out) {
    if (o.type != kind::str) return wrong(key, "str", o);
    out.assign(o.bytes());
  }
  void read(std::string_view key, const msgpack_value& o, task_state& out) {
    if (o.type != kind::str) return wrong(key, "str", o);
    auto parsed = parse_task_state(o.bytes());
    if (!parsed)
      return fail(decode_errc::invalid_value, key, "unknown state '" + printable(o.bytes()) + "'");
    out = *parsed;
  }
  void read(std::string_view key, const msgpack_value& o, checkpointing_mode& out) {
    if (o.type != kind::str) return wrong(key, "str", o);
    auto parsed = parse_checkpointing_mode(o.bytes());
    if (!parsed)
      return fail(decode_errc::invalid_value, key, "unknown mode '" + printable(o.bytes()) + "'");
    out = *parsed;
  }
  template <record T>
  void read(std::string_view key, const msgpack_value& o, T& out) {
    if (o.type != kind::map) return wrong(key, "map", o);
    nested(o, key, std::nullopt, out);
  }
  template <record T>
  void read(std::string_view key, const msgpack_value& o, std::vector<T>& out) {
    if (o.type != kind::array) return wrong(key, "array", o);
    out.clear();
    // Room for a batch's usual size only: a hostile count (millions of empty maps fit in a
    // frame) must not reserve gigabytes before its first bad entry is refused.
    out.reserve(std::min<std::size_t>(o.size, max_reserved_entries));
    msgpack_cursor items(o.data);
    for (std::uint32_t i = 0; i < o.size && !error; ++i) {
      const msgpack_value item = items.read();
      if (item.type != kind::map)
        return wrong(std::string(key) + "[" + std::to_string(i) + "]", "map", item);
      nested(item, key, i, out.emplace_back());
      items.skip_elements(item);
    }
  }

  template <typename T>
  void nested(const msgpack_value& map, std::string_view key, std::optional<std::uint32_t> index,
              T& out) {
    field_reader inner(map, *this, key, index);
    describe(inner, out);
    if (inner.error) error = std::move(inner.error);
  }

  // "" at the top, else the parent's path, this reader's key (and index), and a dot.
  std::string path() const {
    if (!parent_) return {};
    std::string out = parent_->path();
    out += key_;
    if (index_) out += "[" + std::to_string(*index_) + "]";
    out += '.';
    return out;
  }

#ifndef NDEBUG
  std::vector<std::string_view> asked_;  // the keys looked up so far, each once (see find)
#endif
  msgpack_value map_;
  const std::uint8_t* next_;    // the first pair not matched in order
  std::uint32_t in_order_ = 0;  // pairs matched in order so far
  const field_reader* parent_ = nullptr;
  std::string_view key_;
  std::optional<std::uint32_t> index_;
};

// Tries each alternative of `message` in turn until one's wire_type matches.
template <std::size_t I = 0>
decode_result decode_body(std::string_view type, field_reader& reader) {
  if constexpr (I == std::variant_size_v<message>) {
    return decode_error{decode_errc::unknown_type, "message type '" + printable(type) + "'", 0};
  } else {
    using T = std::variant_alternative_t<I, message>;
    if (type != T::wire_type) return decode_body<I + 1>(type, reader);
    T m;
    describe(reader, m);
    if (reader.error) return std::move(*reader.error);
    return message{std::move(m)};
  }
}

decode_result decode_envelope(const msgpack_value& root) {
  if (root.type != msgpack_value::kind::map)
    return decode_error{decode_errc::not_a_map, "envelope is " + std::string(type_of(root)), 0};
  field_reader reader(root);

  // The version comes first: a newer peer may use types and fields this build cannot know.
  std::uint64_t version = 0;
  reader.required("v", version);
  if (reader.error) return std::move(*reader.error);
  if (version != current_protocol_version)
    return decode_error{decode_errc::unsupported_version,
                        "this build speaks version " + std::to_string(current_protocol_version),
                        version};

  const msgpack_value type = reader.find("t");
  if (type.type == msgpack_value::kind::nil)
    return decode_error{decode_errc::missing_field, "field 't': required", version};
  if (type.type != msgpack_value::kind::str)
    return decode_error{decode_errc::wrong_type,
                        "field 't': expected str, got " + std::string(type_of(type)), version};
  return decode_body(type.bytes(), reader);
}


}  // namespace

decode_result decode_general(std::string_view frame, std::size_t max_frame_bytes) noexcept {
  try {
    if (auto fault = check_msgpack_bounds(frame, max_frame_bytes, max_nesting_depth))
      return std::move(*fault);

    // The bounds check vouches for the frame's structure, so it is read in place: strings are
    // copied out of the frame into the message, and nothing else is allocated.
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(frame.data());
    return decode_envelope(msgpack_cursor(bytes).read());
  } catch (const std::exception& e) {
    // Only an allocation for a field's copy can throw here; the frame is refused, not fatal.
    return decode_error{decode_errc::not_msgpack, e.what(), 0};
  }
}

}  // namespace snapflow::wire::detail
