#include "transport/data/data_frame.hpp"

#include <exception>
#include <limits>
#include <msgpack.hpp>
#include <optional>

#include "transport/msgpack_bounds.hpp"

namespace snapflow::data {

namespace {

// envelope map -> elements array -> element array: three levels; a little room beyond.
constexpr std::size_t max_depth = 6;

enum class element_tag : std::uint8_t { record = 0, barrier = 1, end_of_input = 2 };

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
    pk.pack_array(5);
    pk.pack_uint8(static_cast<std::uint8_t>(element_tag::record));
    pk.pack_uint64(r.key);
    pk.pack_int64(r.seq);
    pk.pack_int64(r.value);
    pack_str(pk, r.payload);
  }
  void operator()(const checkpoint_barrier& b) const {
    pk.pack_array(7);
    pk.pack_uint8(static_cast<std::uint8_t>(element_tag::barrier));
    pk.pack_int64(b.id);
    pk.pack_int64(b.timestamp_us);
    pk.pack_uint8(static_cast<std::uint8_t>(b.options.kind));
    b.options.exactly_once ? pk.pack_true() : pk.pack_false();
    b.options.unaligned ? pk.pack_true() : pk.pack_false();
    pack_str(pk, b.options.target_location);
  }
  void operator()(const end_of_input&) const {
    pk.pack_array(1);
    pk.pack_uint8(static_cast<std::uint8_t>(element_tag::end_of_input));
  }
};

// Reading: the first fault wins; every accessor checks type and range.
class reader {
 public:
  std::optional<wire::decode_error> error;

  void fail(wire::decode_errc code, std::string detail) {
    if (!error) error = wire::decode_error{code, std::move(detail), 0};
  }

  const msgpack::object* find(const msgpack::object_map& m, std::string_view key) {
    for (std::uint32_t i = 0; i < m.size; ++i) {
      const auto& kv = m.ptr[i];
      if (kv.key.type == msgpack::type::STR &&
          std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key &&
          kv.val.type != msgpack::type::NIL)
        return &kv.val;
    }
    fail(wire::decode_errc::missing_field, "field '" + std::string(key) + "': required");
    return nullptr;
  }

  std::uint64_t u64(const msgpack::object* o, std::string_view what,
                    std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    if (o == nullptr || error) return 0;
    if (o->type != msgpack::type::POSITIVE_INTEGER) {
      fail(wire::decode_errc::wrong_type, std::string(what) + ": expected an unsigned integer");
      return 0;
    }
    if (o->via.u64 > max) {
      fail(wire::decode_errc::invalid_value, std::string(what) + ": out of range");
      return 0;
    }
    return o->via.u64;
  }

  std::int64_t i64(const msgpack::object* o, std::string_view what) {
    if (o == nullptr || error) return 0;
    if (o->type == msgpack::type::NEGATIVE_INTEGER) return o->via.i64;
    if (o->type != msgpack::type::POSITIVE_INTEGER) {
      fail(wire::decode_errc::wrong_type, std::string(what) + ": expected an integer");
      return 0;
    }
    if (o->via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(wire::decode_errc::invalid_value, std::string(what) + ": overflows int64");
      return 0;
    }
    return static_cast<std::int64_t>(o->via.u64);
  }

  bool boolean(const msgpack::object* o, std::string_view what) {
    if (o == nullptr || error) return false;
    if (o->type != msgpack::type::BOOLEAN) {
      fail(wire::decode_errc::wrong_type, std::string(what) + ": expected a bool");
      return false;
    }
    return o->via.boolean;
  }

  std::string str(const msgpack::object* o, std::string_view what) {
    if (o == nullptr || error) return {};
    if (o->type != msgpack::type::STR) {
      fail(wire::decode_errc::wrong_type, std::string(what) + ": expected a str");
      return {};
    }
    return std::string(o->via.str.ptr, o->via.str.size);
  }

  channel_key key(const msgpack::object_map& m) {
    channel_key k;
    k.job = str(find(m, "job"), "job");
    k.source = static_cast<vertex_id>(u64(find(m, "src"), "src", 0xffffffffu));
    k.producer = static_cast<std::uint32_t>(u64(find(m, "p"), "p", 0xffffffffu));
    k.target = static_cast<vertex_id>(u64(find(m, "dst"), "dst", 0xffffffffu));
    k.consumer = static_cast<std::uint32_t>(u64(find(m, "c"), "c", 0xffffffffu));
    k.attempt = static_cast<std::uint32_t>(u64(find(m, "a"), "a", 0xffffffffu));
    return k;
  }

  void element(const msgpack::object& o, std::size_t index, element_batch& out) {
    const std::string where = "el[" + std::to_string(index) + "]";
    if (o.type != msgpack::type::ARRAY || o.via.array.size == 0) {
      fail(wire::decode_errc::wrong_type, where + ": expected a non-empty array");
      return;
    }
    const msgpack::object_array& a = o.via.array;
    const auto tag = u64(&a.ptr[0], where + " tag", 2);
    if (error) return;
    const std::uint32_t want[] = {5, 7, 1};
    if (a.size != want[tag]) {
      fail(wire::decode_errc::invalid_value, where + ": wrong number of items");
      return;
    }
    switch (static_cast<element_tag>(tag)) {
      case element_tag::record: {
        record r;
        r.key = u64(&a.ptr[1], where + " key");
        r.seq = i64(&a.ptr[2], where + " seq");
        r.value = i64(&a.ptr[3], where + " value");
        r.payload = str(&a.ptr[4], where + " payload");
        out.emplace_back(std::move(r));
        break;
      }
      case element_tag::barrier: {
        checkpoint_barrier b;
        b.id = i64(&a.ptr[1], where + " id");
        b.timestamp_us = i64(&a.ptr[2], where + " timestamp");
        b.options.kind = static_cast<checkpoint_trigger_kind>(u64(&a.ptr[3], where + " kind", 2));
        b.options.exactly_once = boolean(&a.ptr[4], where + " exactly_once");
        b.options.unaligned = boolean(&a.ptr[5], where + " unaligned");
        b.options.target_location = str(&a.ptr[6], where + " location");
        out.emplace_back(std::move(b));
        break;
      }
      case element_tag::end_of_input:
        out.emplace_back(end_of_input{});
        break;
    }
  }
};

data_decode_result read_frame(const msgpack::object& root) {
  if (root.type != msgpack::type::MAP)
    return wire::decode_error{wire::decode_errc::not_a_map, "the frame is not a map", 0};
  const msgpack::object_map& m = root.via.map;
  reader r;
  const std::uint64_t version = r.u64(r.find(m, "v"), "v");
  if (r.error) return std::move(*r.error);
  if (version != data_protocol_version)
    return wire::decode_error{wire::decode_errc::unsupported_version,
                              "this build speaks data protocol version " +
                                  std::to_string(data_protocol_version),
                              version};
  const std::string type = r.str(r.find(m, "t"), "t");
  if (r.error) return std::move(*r.error);
  if (type == "credit") {
    credit_frame f;
    f.key = r.key(m);
    f.consumed = r.u64(r.find(m, "n"), "n");
    if (r.error) return std::move(*r.error);
    return data_message{std::move(f)};
  }
  if (type != "data")
    return wire::decode_error{wire::decode_errc::unknown_type, "unknown data frame type", version};
  data_frame f;
  f.key = r.key(m);
  f.seq = r.u64(r.find(m, "seq"), "seq");
  const msgpack::object* el = r.find(m, "el");
  if (r.error) return std::move(*r.error);
  if (el->type != msgpack::type::ARRAY)
    return wire::decode_error{wire::decode_errc::wrong_type, "el: expected an array", version};
  f.elements.reserve(el->via.array.size);
  for (std::uint32_t i = 0; i < el->via.array.size && !r.error; ++i)
    r.element(el->via.array.ptr[i], i, f.elements);
  if (r.error) return std::move(*r.error);
  return data_message{std::move(f)};
}

bool reference_frame(msgpack::type::object_type, std::size_t, void*) { return true; }

}  // namespace

std::ostream& operator<<(std::ostream& os, const data_frame& f) {
  return os << "data_frame{" << f.key << ", seq=" << f.seq << ", elements=" << f.elements.size()
            << "}";
}

std::ostream& operator<<(std::ostream& os, const credit_frame& f) {
  return os << "credit_frame{" << f.key << ", consumed=" << f.consumed << "}";
}

std::string encode(const data_frame& f) {
  std::string out;
  string_sink sink{&out};
  packer pk(sink);
  pack_header(pk, "data", f.key, 2);
  pack_str(pk, "seq");
  pk.pack_uint64(f.seq);
  pack_str(pk, "el");
  pk.pack_array(static_cast<std::uint32_t>(f.elements.size()));
  for (const auto& e : f.elements) std::visit(element_packer{pk}, e);
  return out;
}

std::string encode(const credit_frame& f) {
  std::string out;
  string_sink sink{&out};
  packer pk(sink);
  pack_header(pk, "credit", f.key, 1);
  pack_str(pk, "n");
  pk.pack_uint64(f.consumed);
  return out;
}

data_decode_result decode_data_frame(std::string_view frame, std::size_t max_frame_bytes) noexcept {
  try {
    if (auto fault = wire::check_msgpack_bounds(frame, max_frame_bytes, max_depth))
      return std::move(*fault);
    const std::size_t n = frame.size();
    const msgpack::unpack_limit limit(n, n, n, n, n, max_depth + 2);
    std::size_t offset = 0;
    msgpack::object_handle handle =
        msgpack::unpack(frame.data(), n, offset, &reference_frame, nullptr, limit);
    if (offset != n)
      return wire::decode_error{wire::decode_errc::not_msgpack, "bytes after the frame", 0};
    return read_frame(handle.get());
  } catch (const msgpack::insufficient_bytes& e) {
    return wire::decode_error{wire::decode_errc::truncated, e.what(), 0};
  } catch (const msgpack::size_overflow& e) {
    return wire::decode_error{wire::decode_errc::too_large_declared_length, e.what(), 0};
  } catch (const std::exception& e) {
    return wire::decode_error{wire::decode_errc::not_msgpack, e.what(), 0};
  }
}

}  // namespace snapflow::data
