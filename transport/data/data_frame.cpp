#include "transport/data/data_frame.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <msgpack.hpp>
#include <optional>

#include "transport/msgpack_bounds.hpp"
#include "transport/msgpack_view.hpp"

namespace snapflow::data {

namespace {

// envelope map -> elements array -> element array: three levels; a little room beyond.
constexpr std::size_t max_depth = 6;

enum class element_tag : std::uint8_t { record = 0, barrier = 1, end_of_input = 2, watermark = 3 };

struct string_sink {
  std::string* out;
  void write(const char* data, std::size_t size) { out->append(data, size); }
};
using packer = msgpack::packer<string_sink>;

void pack_str(packer& pk, std::string_view s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

// The envelope and the channel's fields, common to both frame types.
void pack_header(packer& pk, std::string_view type, const channel_key& k, std::uint32_t extra) {
  pk.pack_map(8 + extra);
  pack_str(pk, "v");
  pk.pack_uint64(data_protocol_version);
  pack_str(pk, "t");
  pack_str(pk, type);
  pack_str(pk, "job");
  pack_str(pk, k.job);
  pack_str(pk, "src");
  pk.pack_uint64(k.source);
  pack_str(pk, "p");
  pk.pack_uint64(k.producer);
  pack_str(pk, "dst");
  pk.pack_uint64(k.target);
  pack_str(pk, "c");
  pk.pack_uint64(k.consumer);
  pack_str(pk, "a");
  pk.pack_uint64(k.attempt);
}

struct element_packer {
  packer& pk;
  void operator()(const record& r) const {
    // The sixth item (the event timestamp) came later: written only when set, so a record
    // without one encodes as before and an older peer reads it.
    const bool with_timestamp = r.timestamp != no_timestamp;
    pk.pack_array(with_timestamp ? 6 : 5);
    pk.pack_uint8(static_cast<std::uint8_t>(element_tag::record));
    pk.pack_uint64(r.key);
    pk.pack_int64(r.seq);
    pk.pack_int64(r.value);
    pack_str(pk, r.payload);
    if (with_timestamp) pk.pack_int64(r.timestamp);
  }
  void operator()(const watermark& w) const {
    pk.pack_array(w.idle ? 3 : 2);
    pk.pack_uint8(static_cast<std::uint8_t>(element_tag::watermark));
    pk.pack_int64(w.timestamp);
    if (w.idle) pk.pack_true();
  }
  void operator()(const checkpoint_barrier& b) const {
    // The eighth item came later: written only when set, so a barrier without it encodes as
    // before.
    const bool with_timeout = b.options.aligned_timeout_ms != 0;
    pk.pack_array(with_timeout ? 8 : 7);
    pk.pack_uint8(static_cast<std::uint8_t>(element_tag::barrier));
    pk.pack_int64(b.id);
    pk.pack_int64(b.timestamp_us);
    pk.pack_uint8(static_cast<std::uint8_t>(b.options.kind));
    b.options.exactly_once ? pk.pack_true() : pk.pack_false();
    b.options.unaligned ? pk.pack_true() : pk.pack_false();
    pack_str(pk, b.options.target_location);
    if (with_timeout) pk.pack_int64(b.options.aligned_timeout_ms);
  }
  void operator()(const end_of_input&) const {
    pk.pack_array(1);
    pk.pack_uint8(static_cast<std::uint8_t>(element_tag::end_of_input));
  }
};

// Where a value sits, for a fault's detail: a header field ("seq"), or an item of element i
// ("el[3] key"). Spelled only when there is a fault: a frame of records used to build several
// strings per record just in case.
struct field_name {
  std::string_view label;
  std::optional<std::size_t> element;

  std::string text() const {
    std::string out;
    if (element) {
      out = "el[";  // appended, not "el[" + ...: GCC 12 -Wrestrict misfires on that at -O3
      out += std::to_string(*element);
      out += ']';
      if (!label.empty()) out += ' ';
    }
    out += label;
    return out;
  }
};

// Reading, in place (transport/msgpack_view.hpp) from a frame check_msgpack_bounds accepted:
// no object tree. The first fault wins; every accessor checks type and range.
class reader {
 public:
  using value = wire::msgpack_value;
  using kind = wire::msgpack_value::kind;

  std::optional<wire::decode_error> error;

  void fail(wire::decode_errc code, const field_name& where, std::string_view what) {
    if (!error) error = wire::decode_error{code, where.text() + ": " + std::string(what), 0};
  }

  // The first non-nil value of `key` in map `m`; a missing one is a fault (and reads as nil).
  value find(const value& m, std::string_view key) {
    value v = find_optional(m, key);
    if (v.type == kind::nil && !error)
      error = wire::decode_error{wire::decode_errc::missing_field,
                                 "field '" + std::string(key) + "': required", 0};
    return v;
  }

  // The first non-nil value of `key` in map `m`; nil when there is none.
  value find_optional(const value& m, std::string_view key) {
    wire::msgpack_cursor pair(m.data);
    for (std::uint32_t i = 0; i < m.size; ++i) {
      std::string_view k;
      const bool named = pair.read_key(k) && wire::same_text(k, key);
      const value v = pair.read();
      pair.skip_elements(v);
      if (named && v.type != kind::nil) return v;
    }
    return {};
  }

  std::uint64_t u64(const value& o, const field_name& where,
                    std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    if (error) return 0;
    if (o.type != kind::positive_integer) {
      fail(wire::decode_errc::wrong_type, where, "expected an unsigned integer");
      return 0;
    }
    if (o.u64 > max) {
      fail(wire::decode_errc::invalid_value, where, "out of range");
      return 0;
    }
    return o.u64;
  }

  std::int64_t i64(const value& o, const field_name& where) {
    if (error) return 0;
    if (o.type == kind::negative_integer) return o.i64;
    if (o.type != kind::positive_integer) {
      fail(wire::decode_errc::wrong_type, where, "expected an integer");
      return 0;
    }
    if (o.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(wire::decode_errc::invalid_value, where, "overflows int64");
      return 0;
    }
    return static_cast<std::int64_t>(o.u64);
  }

  bool boolean(const value& o, const field_name& where) {
    if (error) return false;
    if (o.type != kind::boolean) {
      fail(wire::decode_errc::wrong_type, where, "expected a bool");
      return false;
    }
    return o.boolean();
  }

  std::string str(const value& o, const field_name& where) {
    if (error) return {};
    if (o.type != kind::str) {
      fail(wire::decode_errc::wrong_type, where, "expected a str");
      return {};
    }
    return std::string(o.bytes());
  }

  channel_key key(const value& m) {
    channel_key k;
    k.job = str(find(m, "job"), {"job"});
    k.source = static_cast<vertex_id>(u64(find(m, "src"), {"src"}, 0xffffffffu));
    k.producer = static_cast<std::uint32_t>(u64(find(m, "p"), {"p"}, 0xffffffffu));
    k.target = static_cast<vertex_id>(u64(find(m, "dst"), {"dst"}, 0xffffffffu));
    k.consumer = static_cast<std::uint32_t>(u64(find(m, "c"), {"c"}, 0xffffffffu));
    k.attempt = static_cast<std::uint32_t>(u64(find(m, "a"), {"a"}, 0xffffffffu));
    return k;
  }

  // Reads one element from `items`, header and items: the cursor ends past it when it was
  // good, and anywhere within it after a fault (which ends the decoding).
  void element(wire::msgpack_cursor& items, std::size_t index, element_batch& out) {
    const value o = items.read();
    if (o.type != kind::array || o.size == 0) {
      fail(wire::decode_errc::wrong_type, {"", index}, "expected a non-empty array");
      return;
    }
    // The element's items in order; a container item is stepped over whole.
    auto next = [&items] {
      const value v = items.read();
      items.skip_elements(v);
      return v;
    };
    const auto tag = u64(next(), {"tag", index}, 3);
    if (error) return;
    const std::uint32_t want[] = {5, 7, 1, 2};
    // Optional trailing items: a barrier's aligned timeout, a record's timestamp, a watermark's
    // idle flag.
    const bool barrier_with_timeout =
        static_cast<element_tag>(tag) == element_tag::barrier && o.size == 8;
    const bool record_with_timestamp =
        static_cast<element_tag>(tag) == element_tag::record && o.size == 6;
    const bool idle_watermark =
        static_cast<element_tag>(tag) == element_tag::watermark && o.size == 3;
    if (o.size != want[tag] && !barrier_with_timeout && !record_with_timestamp &&
        !idle_watermark) {
      fail(wire::decode_errc::invalid_value, {"", index}, "wrong number of items");
      return;
    }
    switch (static_cast<element_tag>(tag)) {
      case element_tag::record: {
        record r;
        r.key = u64(next(), {"key", index});
        r.seq = i64(next(), {"seq", index});
        r.value = i64(next(), {"value", index});
        r.payload = str(next(), {"payload", index});
        if (record_with_timestamp) {
          r.timestamp = i64(next(), {"timestamp", index});
          // The "none" value is never written: a peer that sends it sends nonsense.
          if (r.timestamp == no_timestamp)
            fail(wire::decode_errc::invalid_value, {"timestamp", index}, "out of range");
        }
        out.emplace_back(std::move(r));
        break;
      }
      case element_tag::barrier: {
        checkpoint_barrier b;
        b.id = i64(next(), {"id", index});
        b.timestamp_us = i64(next(), {"timestamp", index});
        b.options.kind = static_cast<checkpoint_trigger_kind>(u64(next(), {"kind", index}, 2));
        b.options.exactly_once = boolean(next(), {"exactly_once", index});
        b.options.unaligned = boolean(next(), {"unaligned", index});
        b.options.target_location = str(next(), {"location", index});
        if (barrier_with_timeout) {
          b.options.aligned_timeout_ms = i64(next(), {"aligned_timeout_ms", index});
          if (b.options.aligned_timeout_ms < 0)
            fail(wire::decode_errc::invalid_value, {"aligned_timeout_ms", index}, "negative");
        }
        out.emplace_back(std::move(b));
        break;
      }
      case element_tag::end_of_input:
        out.emplace_back(end_of_input{});
        break;
      case element_tag::watermark: {
        watermark w;
        w.timestamp = i64(next(), {"watermark", index});
        if (idle_watermark) w.idle = boolean(next(), {"idle", index});
        out.emplace_back(w);
        break;
      }
    }
  }
};

// Elements reserved ahead; a hostile count must not reserve more than a frame of real records.
constexpr std::size_t max_reserved_elements = 1024;

data_decode_result read_frame(const wire::msgpack_value& root) {
  using kind = wire::msgpack_value::kind;
  if (root.type != kind::map)
    return wire::decode_error{wire::decode_errc::not_a_map, "the frame is not a map", 0};
  reader r;
  const std::uint64_t version = r.u64(r.find(root, "v"), {"v"});
  if (r.error) return std::move(*r.error);
  if (version != data_protocol_version)
    return wire::decode_error{wire::decode_errc::unsupported_version,
                              "this build speaks data protocol version " +
                                  std::to_string(data_protocol_version),
                              version};
  const std::string type = r.str(r.find(root, "t"), {"t"});
  if (r.error) return std::move(*r.error);
  if (type == "credit") {
    credit_frame f;
    f.key = r.key(root);
    f.consumed = r.u64(r.find(root, "n"), {"n"});
    // Optional: credits from before buffer debloating have no "b".
    const wire::msgpack_value bound = r.find_optional(root, "b");
    if (bound.type != kind::nil) f.max_bytes = r.u64(bound, {"b"});
    if (r.error) return std::move(*r.error);
    return data_message{std::move(f)};
  }
  if (type != "data")
    return wire::decode_error{wire::decode_errc::unknown_type, "unknown data frame type", version};
  data_frame f;
  f.key = r.key(root);
  f.seq = r.u64(r.find(root, "seq"), {"seq"});
  // Optional: frames from before priority batches existed have no "pri".
  const wire::msgpack_value pri = r.find_optional(root, "pri");
  if (pri.type != kind::nil) f.priority = r.boolean(pri, {"pri"});
  const wire::msgpack_value el = r.find(root, "el");
  if (r.error) return std::move(*r.error);
  if (el.type != kind::array)
    return wire::decode_error{wire::decode_errc::wrong_type, "el: expected an array", version};
  if (el.size > max_elements_per_frame)
    return wire::decode_error{wire::decode_errc::invalid_value,
                              "el: " + std::to_string(el.size) + " elements, at most " +
                                  std::to_string(max_elements_per_frame) + " per frame",
                              version};
  f.elements.reserve(std::min<std::size_t>(el.size, max_reserved_elements));
  wire::msgpack_cursor elements(el.data);
  for (std::uint32_t i = 0; i < el.size && !r.error; ++i) r.element(elements, i, f.elements);
  if (r.error) return std::move(*r.error);
  if (f.priority && !is_single_barrier(f.elements))
    return wire::decode_error{wire::decode_errc::invalid_value,
                              "pri: a priority frame carries exactly one checkpoint barrier",
                              version};
  return data_message{std::move(f)};
}


}  // namespace

std::ostream& operator<<(std::ostream& os, const data_frame& f) {
  return os << "data_frame{" << f.key << ", seq=" << f.seq << ", elements=" << f.elements.size()
            << (f.priority ? ", priority" : "") << "}";
}

std::ostream& operator<<(std::ostream& os, const credit_frame& f) {
  os << "credit_frame{" << f.key << ", consumed=" << f.consumed;
  if (f.max_bytes != 0) os << ", max_bytes=" << f.max_bytes;
  return os << "}";
}

std::string encode(const data_frame& f) {
  return encode_data_frame(f.key, f.seq, f.elements, f.priority);
}

std::string encode_data_frame(const channel_key& key, std::uint64_t seq,
                              const element_batch& elements, bool priority) {
  std::string out;
  string_sink sink{&out};
  packer pk(sink);
  pack_header(pk, "data", key, priority ? 3 : 2);
  if (priority) {
    pack_str(pk, "pri");
    pk.pack_true();
  }
  pack_str(pk, "seq");
  pk.pack_uint64(seq);
  pack_str(pk, "el");
  pk.pack_array(static_cast<std::uint32_t>(elements.size()));
  for (const auto& e : elements) std::visit(element_packer{pk}, e);
  return out;
}

std::string encode(const credit_frame& f) {
  std::string out;
  string_sink sink{&out};
  packer pk(sink);
  pack_header(pk, "credit", f.key, f.max_bytes != 0 ? 2 : 1);
  pack_str(pk, "n");
  pk.pack_uint64(f.consumed);
  if (f.max_bytes != 0) {
    pack_str(pk, "b");
    pk.pack_uint64(f.max_bytes);
  }
  return out;
}

data_decode_result decode_data_frame(std::string_view frame, std::size_t max_frame_bytes) noexcept {
  try {
    if (auto fault = wire::check_msgpack_bounds(frame, max_frame_bytes, max_depth))
      return std::move(*fault);
    // The bounds check vouches for the structure; the frame is read where it is.
    return read_frame(
        wire::msgpack_cursor(reinterpret_cast<const std::uint8_t*>(frame.data())).read());
  } catch (const std::exception& e) {
    return wire::decode_error{wire::decode_errc::not_msgpack, e.what(), 0};
  }
}

}  // namespace snapflow::data
