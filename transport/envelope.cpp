#include "transport/envelope.hpp"

#include <concepts>
#include <cstdint>
#include <exception>
#include <limits>
#include <msgpack.hpp>
#include <optional>
#include <type_traits>

#include "transport/msgpack_bounds.hpp"

namespace snapflow::wire {

namespace {

// ---------------------------------------------------------------------------------------------
// The fields of each message, described once. The same description drives counting (for the
// map header), writing and reading, so the three cannot disagree. `required` keys must be
// present; `optional` keys may be absent or nil and then keep the struct's default. `bytes`
// marks a std::string that travels as msgpack bin instead of str.

template <typename M, typename T>
concept message_of = std::same_as<std::remove_const_t<M>, T>;

template <typename V, message_of<register_worker> M>
void describe(V& v, M& m) {
  v.required("worker_id", m.worker_id);
  v.required("slots", m.slots);
  v.required("data_endpoint", m.data_endpoint);
  v.required("protocol_version", m.protocol_version);
  v.required("pid", m.pid);
  v.optional("session", m.session);
  v.optional("max_batch_bytes", m.max_batch_bytes);
}

template <typename V, message_of<not_registered> M>
void describe(V& v, M& m) {
  v.optional("reason", m.reason);
}

template <typename V, message_of<register_ack> M>
void describe(V& v, M& m) {
  v.required("accepted", m.accepted);
  v.optional("reason", m.reason);
  v.required("heartbeat_interval_ms", m.heartbeat_interval_ms);
  v.required("heartbeat_timeout_ms", m.heartbeat_timeout_ms);
  v.optional("max_batch_bytes", m.max_batch_bytes);
}

template <typename V, message_of<heartbeat> M>
void describe(V& v, M& m) {
  v.required("sender", m.sender);
  v.required("timestamp_ms", m.timestamp_ms);
  v.optional("tasks", m.tasks);
}

template <typename V, message_of<deploy_task> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.bytes("job_graph", m.job_graph);
  v.optional("subtask_endpoints", m.subtask_endpoints);
  v.optional("restore_checkpoint_id", m.restore_checkpoint_id);
  v.optional("restore_states", m.restore_states);
  v.optional("checkpoint_dir", m.checkpoint_dir);
}

template <typename V, message_of<cancel_task> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
}

template <typename V, message_of<task_state_update> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("state", m.state);
  v.optional("failure_message", m.failure_message);
}

template <typename V, message_of<trigger_checkpoint> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.required("timestamp_ms", m.timestamp_ms);
  v.optional("is_savepoint", m.is_savepoint);
  v.optional("savepoint_dir", m.savepoint_dir);
  v.required("mode", m.mode);
  v.optional("unaligned", m.unaligned);
  v.optional("target_location", m.target_location);
}

template <typename V, message_of<acknowledge_checkpoint> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.optional("state_handles", m.state_handles);
  v.optional("state_size", m.state_size_bytes);
  v.optional("sync_duration_us", m.sync_duration_us);
  v.optional("async_duration_us", m.async_duration_us);
  v.optional("alignment_duration_us", m.alignment_duration_us);
  v.optional("bytes_processed_during_alignment", m.bytes_processed_during_alignment);
  v.optional("records_held_during_alignment", m.records_held_during_alignment);
  v.optional("records_after_barrier", m.records_after_barrier);
  v.optional("barrier_received_timestamp_us", m.barrier_received_timestamp_us);
}

template <typename V, message_of<decline_checkpoint> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.required("reason", m.reason);
  v.optional("message", m.message);
}

template <typename V, message_of<notify_checkpoint_complete> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
}

template <typename V, message_of<notify_checkpoint_aborted> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.optional("latest_completed_checkpoint_id", m.latest_completed_checkpoint_id);
}

template <typename V, message_of<source_exhausted> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("last_barrier", m.last_barrier);
}

template <typename V, message_of<finish_task> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
}

// The batches repeat the single messages' keys for what their entries share, and add one array
// of entries ("attempts" or "acks"); the array is required and may not be empty.
template <typename V, message_of<trigger_checkpoint_batch> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("checkpoint_id", m.checkpoint);
  v.required("timestamp_ms", m.timestamp_ms);
  v.optional("is_savepoint", m.is_savepoint);
  v.optional("savepoint_dir", m.savepoint_dir);
  v.required("mode", m.mode);
  v.optional("unaligned", m.unaligned);
  v.optional("target_location", m.target_location);
  v.entries("attempts", m.attempts);
}

template <typename V, message_of<notify_checkpoint_complete_batch> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("checkpoint_id", m.checkpoint);
  v.entries("attempts", m.attempts);
}

template <typename V, message_of<notify_checkpoint_aborted_batch> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("checkpoint_id", m.checkpoint);
  v.optional("latest_completed_checkpoint_id", m.latest_completed_checkpoint_id);
  v.entries("attempts", m.attempts);
}

template <typename V, message_of<acknowledge_checkpoint_batch> M>
void describe(V& v, M& m) {
  v.entries("acks", m.acks);
}

// Nested records are maps of their own, for the same reason the envelope is (fields can be
// added).
template <typename V, message_of<execution_attempt_id> M>
void describe(V& v, M& m) {
  v.required("vertex", m.subtask.vertex);
  v.required("subtask", m.subtask.index);
  v.required("attempt", m.attempt);
}

template <typename V, message_of<state_handle> M>
void describe(V& v, M& m) {
  v.required("path", m.path);
  v.required("size", m.size_bytes);
  v.required("checksum", m.checksum);
  v.optional_bytes("inline_state", m.inline_state);
}

template <typename V, message_of<subtask_endpoint> M>
void describe(V& v, M& m) {
  v.required("vertex", m.subtask.vertex);
  v.required("subtask", m.subtask.index);
  v.required("endpoint", m.endpoint);
  v.optional("public_key", m.public_key);
}

template <typename V, message_of<task_io> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.optional("records_in", m.records_in);
  v.optional("records_out", m.records_out);
  v.optional("notified", m.notified);
}

template <typename V, message_of<checkpoint_notified> M>
void describe(V& v, M& m) {
  v.required("checkpoint_id", m.checkpoint);
  v.required("timestamp_us", m.timestamp_us);
}

template <typename V, message_of<subtask_restore_state> M>
void describe(V& v, M& m) {
  v.required("subtask", m.subtask);
  v.optional("state_handles", m.state_handles);
  v.optional("state_size", m.state_size_bytes);
}

template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};

// A struct that travels as a nested map.
template <typename T>
concept record = std::same_as<T, execution_attempt_id> || std::same_as<T, state_handle> ||
                 std::same_as<T, subtask_endpoint> || std::same_as<T, subtask_restore_state> ||
                 std::same_as<T, task_io> || std::same_as<T, checkpoint_notified> ||
                 std::same_as<T, acknowledge_checkpoint>;

// ---------------------------------------------------------------------------------------------
// Writing.

// msgpack::packer writes into any type with write(const char*, size_t).
struct string_sink {
  std::string* out;
  void write(const char* data, std::size_t size) { out->append(data, size); }
};

using packer = msgpack::packer<string_sink>;

// How many keys a description writes: absent std::optionals are left out.
struct field_counter {
  std::uint32_t count = 0;

  template <typename T>
  void required(std::string_view, const T&) {
    ++count;
  }
  template <typename T>
  void optional(std::string_view, const T& value) {
    if constexpr (is_optional<T>::value) {
      if (!value) return;
    }
    ++count;
  }
  template <typename T>
  void entries(std::string_view, const std::vector<T>&) {
    ++count;
  }
  void bytes(std::string_view, const std::string&) { ++count; }
  void optional_bytes(std::string_view, const std::optional<std::string>& value) {
    if (value) ++count;
  }
};

class field_writer {
 public:
  explicit field_writer(packer& pk) : pk_(pk) {}

  template <typename T>
  void required(std::string_view key, const T& value) {
    str(key);
    write(value);
  }
  template <typename T>
  void optional(std::string_view key, const T& value) {
    if constexpr (is_optional<T>::value) {
      if (!value) return;
      required(key, *value);
    } else {
      required(key, value);
    }
  }
  template <typename T>
  void entries(std::string_view key, const std::vector<T>& value) {
    // A batch is never empty: a sender with nothing to say sends nothing.
    assert(!value.empty());
    required(key, value);
  }
  void bytes(std::string_view key, const std::string& value) {
    str(key);
    pk_.pack_bin(static_cast<std::uint32_t>(value.size()));
    pk_.pack_bin_body(value.data(), static_cast<std::uint32_t>(value.size()));
  }
  void optional_bytes(std::string_view key, const std::optional<std::string>& value) {
    if (value) bytes(key, *value);
  }

  template <typename M>
  void map(const M& m) {
    field_counter counter;
    describe(counter, m);
    pk_.pack_map(counter.count);
    describe(*this, m);
  }

 private:
  void str(std::string_view s) {
    pk_.pack_str(static_cast<std::uint32_t>(s.size()));
    pk_.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
  }
  void write(const std::string& s) { str(s); }
  void write(bool b) { b ? pk_.pack_true() : pk_.pack_false(); }
  void write(std::uint32_t u) { pk_.pack_uint64(u); }
  void write(std::uint64_t u) { pk_.pack_uint64(u); }
  void write(std::int64_t i) { pk_.pack_int64(i); }
  void write(task_state s) { str(to_string(s)); }
  void write(checkpointing_mode mode) { str(to_string(mode)); }
  template <record T>
  void write(const T& r) {
    map(r);
  }
  template <record T>
  void write(const std::vector<T>& records) {
    pk_.pack_array(static_cast<std::uint32_t>(records.size()));
    for (const auto& r : records) map(r);
  }

  packer& pk_;
};

// ---------------------------------------------------------------------------------------------
// Reading.

std::string_view type_of(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "float";
    case msgpack::type::STR:
      return "str";
    case msgpack::type::BIN:
      return "bin";
    case msgpack::type::ARRAY:
      return "array";
    case msgpack::type::MAP:
      return "map";
    case msgpack::type::EXT:
      return "ext";
  }
  return "unknown";
}

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
  explicit field_reader(const msgpack::object_map& map) : map_(map) {}
  field_reader(const msgpack::object_map& map, const field_reader& parent, std::string_view key,
               std::optional<std::uint32_t> index)
      : map_(map), parent_(&parent), key_(key), index_(index) {}

  template <typename T>
  void required(std::string_view key, T& out) {
    if (error) return;
    const msgpack::object* o = find(key);
    if (!o) {
      fail(decode_errc::missing_field, key, "required");
      return;
    }
    read(key, *o, out);
  }
  template <typename T>
  void optional(std::string_view key, T& out) {
    if (error) return;
    const msgpack::object* o = find(key);
    if (!o) return;
    if constexpr (is_optional<T>::value) {
      typename T::value_type value{};
      read(key, *o, value);
      if (!error) out = std::move(value);
    } else {
      read(key, *o, out);
    }
  }
  template <typename T>
  void entries(std::string_view key, std::vector<T>& out) {
    required(key, out);
    if (!error && out.empty()) fail(decode_errc::invalid_value, key, "an empty batch");
  }
  void optional_bytes(std::string_view key, std::optional<std::string>& out) {
    if (error || !find(key)) return;
    std::string value;
    bytes(key, value);
    if (!error) out = std::move(value);
  }
  void bytes(std::string_view key, std::string& out) {
    if (error) return;
    const msgpack::object* o = find(key);
    if (!o) {
      fail(decode_errc::missing_field, key, "required");
      return;
    }
    // Bytes travel as bin; str is accepted too, for writers whose language blurs the two.
    if (o->type == msgpack::type::BIN)
      out.assign(o->via.bin.ptr, o->via.bin.size);
    else if (o->type == msgpack::type::STR)
      out.assign(o->via.str.ptr, o->via.str.size);
    else
      wrong(key, "bin", *o);
  }

  // The value of `key`, nil counting as absent; the first match wins if a key repeats.
  const msgpack::object* find(std::string_view key) const {
    for (std::uint32_t i = 0; i < map_.size; ++i) {
      const msgpack::object_kv& kv = map_.ptr[i];
      if (kv.key.type != msgpack::type::STR) continue;
      if (std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) != key) continue;
      return kv.val.type == msgpack::type::NIL ? nullptr : &kv.val;
    }
    return nullptr;
  }

  void fail(decode_errc code, std::string_view key, std::string_view what) {
    error = decode_error{code, "field '" + path() + std::string(key) + "': " + std::string(what),
                         0};
  }

  std::optional<decode_error> error;

 private:
  void wrong(std::string_view key, std::string_view expected, const msgpack::object& o) {
    fail(decode_errc::wrong_type, key,
         "expected " + std::string(expected) + ", got " + std::string(type_of(o)));
  }

  template <std::unsigned_integral T>
    requires(!std::same_as<T, bool>)
  void read(std::string_view key, const msgpack::object& o, T& out) {
    if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      fail(decode_errc::invalid_value, key, "negative, expected an unsigned integer");
    } else if (o.type != msgpack::type::POSITIVE_INTEGER) {
      wrong(key, "unsigned integer", o);
    } else if (o.via.u64 > std::numeric_limits<T>::max()) {
      fail(decode_errc::invalid_value, key,
           std::to_string(o.via.u64) + " is above " +
               std::to_string(std::numeric_limits<T>::max()));
    } else {
      out = static_cast<T>(o.via.u64);
    }
  }
  void read(std::string_view key, const msgpack::object& o, std::int64_t& out) {
    if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      out = o.via.i64;
    } else if (o.type != msgpack::type::POSITIVE_INTEGER) {
      wrong(key, "integer", o);
    } else if (o.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(decode_errc::invalid_value, key, std::to_string(o.via.u64) + " overflows int64");
    } else {
      out = static_cast<std::int64_t>(o.via.u64);
    }
  }
  void read(std::string_view key, const msgpack::object& o, bool& out) {
    if (o.type != msgpack::type::BOOLEAN) return wrong(key, "bool", o);
    out = o.via.boolean;
  }
  void read(std::string_view key, const msgpack::object& o, std::string& out) {
    if (o.type != msgpack::type::STR) return wrong(key, "str", o);
    out.assign(o.via.str.ptr, o.via.str.size);
  }
  void read(std::string_view key, const msgpack::object& o, task_state& out) {
    if (o.type != msgpack::type::STR) return wrong(key, "str", o);
    std::string_view text(o.via.str.ptr, o.via.str.size);
    auto parsed = parse_task_state(text);
    if (!parsed)
      return fail(decode_errc::invalid_value, key, "unknown state '" + printable(text) + "'");
    out = *parsed;
  }
  void read(std::string_view key, const msgpack::object& o, checkpointing_mode& out) {
    if (o.type != msgpack::type::STR) return wrong(key, "str", o);
    std::string_view text(o.via.str.ptr, o.via.str.size);
    auto parsed = parse_checkpointing_mode(text);
    if (!parsed)
      return fail(decode_errc::invalid_value, key, "unknown mode '" + printable(text) + "'");
    out = *parsed;
  }
  template <record T>
  void read(std::string_view key, const msgpack::object& o, T& out) {
    if (o.type != msgpack::type::MAP) return wrong(key, "map", o);
    nested(o.via.map, key, std::nullopt, out);
  }
  template <record T>
  void read(std::string_view key, const msgpack::object& o, std::vector<T>& out) {
    if (o.type != msgpack::type::ARRAY) return wrong(key, "array", o);
    out.clear();
    out.reserve(o.via.array.size);
    for (std::uint32_t i = 0; i < o.via.array.size && !error; ++i) {
      const msgpack::object& item = o.via.array.ptr[i];
      if (item.type != msgpack::type::MAP)
        return wrong(std::string(key) + "[" + std::to_string(i) + "]", "map", item);
      nested(item.via.map, key, i, out.emplace_back());
    }
  }

  template <typename T>
  void nested(const msgpack::object_map& map, std::string_view key,
              std::optional<std::uint32_t> index, T& out) {
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

  const msgpack::object_map& map_;
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

decode_result decode_envelope(const msgpack::object& root) {
  if (root.type != msgpack::type::MAP)
    return decode_error{decode_errc::not_a_map, "envelope is " + std::string(type_of(root)), 0};
  field_reader reader(root.via.map);

  // The version comes first: a newer peer may use types and fields this build cannot know.
  std::uint64_t version = 0;
  reader.required("v", version);
  if (reader.error) return std::move(*reader.error);
  if (version != current_protocol_version)
    return decode_error{decode_errc::unsupported_version,
                        "this build speaks version " + std::to_string(current_protocol_version),
                        version};

  const msgpack::object* type = reader.find("t");
  if (!type) return decode_error{decode_errc::missing_field, "field 't': required", version};
  if (type->type != msgpack::type::STR)
    return decode_error{decode_errc::wrong_type,
                        "field 't': expected str, got " + std::string(type_of(*type)), version};
  return decode_body(std::string_view(type->via.str.ptr, type->via.str.size), reader);
}

// Strings and bins point into the frame instead of being copied: the frame outlives the
// unpacked object, and every field is copied out before decode returns.
bool reference_frame(msgpack::type::object_type, std::size_t, void*) { return true; }

constexpr std::size_t initial_frame_capacity = 320;

// Where unpack puts the object tree. One per thread, emptied after each decode but keeping its
// first chunk, so a decode costs no allocation for the tree of a small message (a fresh zone
// allocates its 8 KiB chunk every time). Nothing decoded points into it once decode returns.
msgpack::zone& decode_zone() {
  thread_local msgpack::zone zone;
  return zone;
}

struct zone_clearer {
  msgpack::zone& zone;
  ~zone_clearer() { zone.clear(); }
};

}  // namespace

std::string encode(const message& m) {
  std::string out;
  // Room for any control message without state (a trigger or an ack is 150-250 bytes), so the
  // packer's many small appends do not regrow the string several times.
  out.reserve(initial_frame_capacity);
  string_sink sink{&out};
  packer pk(sink);
  field_writer writer(pk);
  std::visit(
      [&](const auto& body) {
        field_counter counter;
        describe(counter, body);
        pk.pack_map(counter.count + 2);
        pk.pack_str(1);
        pk.pack_str_body("v", 1);
        pk.pack_uint64(current_protocol_version);
        pk.pack_str(1);
        pk.pack_str_body("t", 1);
        const std::string_view type = std::decay_t<decltype(body)>::wire_type;
        pk.pack_str(static_cast<std::uint32_t>(type.size()));
        pk.pack_str_body(type.data(), static_cast<std::uint32_t>(type.size()));
        describe(writer, body);
      },
      m);
  return out;
}

decode_result decode(std::string_view frame, std::size_t max_frame_bytes) noexcept {
  try {
    if (auto fault = check_msgpack_bounds(frame, max_frame_bytes, max_nesting_depth))
      return std::move(*fault);

    // Second fence: limits sized to the frame, so even a check that let something through
    // could not make unpack allocate beyond what the frame's bytes can describe.
    const std::size_t n = frame.size();
    const msgpack::unpack_limit limit(n, n, n, n, n, max_nesting_depth + 2);
    std::size_t offset = 0;
    msgpack::zone& zone = decode_zone();
    const zone_clearer clear_after{zone};
    const msgpack::object root =
        msgpack::unpack(zone, frame.data(), n, offset, &reference_frame, nullptr, limit);
    if (offset != n)
      return decode_error{decode_errc::not_msgpack, "bytes after the envelope", 0};
    return decode_envelope(root);
  } catch (const msgpack::insufficient_bytes& e) {
    return decode_error{decode_errc::truncated, e.what(), 0};
  } catch (const msgpack::size_overflow& e) {
    return decode_error{decode_errc::too_large_declared_length, e.what(), 0};
  } catch (const std::exception& e) {
    return decode_error{decode_errc::not_msgpack, e.what(), 0};
  }
}

}  // namespace snapflow::wire
