#include "transport/envelope.hpp"

#include <algorithm>
#include <cassert>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <exception>
#include <limits>
#include <optional>
#include <type_traits>

#include "transport/msgpack_bounds.hpp"
#include "transport/msgpack_view.hpp"
#include "transport/msgpack_writer.hpp"

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

// Whether an optional field holds its type's zero (0, false, "", no entries, an absent
// std::optional): such a field is left out of the frame, and a reader takes the default for an
// absent optional field (protocol.md). That is the same value only because every optional
// field's default is its type's zero, which debug builds check (check_optional_defaults).
// A record is always written.
template <typename T>
bool is_zero(const T& value) {
  if constexpr (is_optional<T>::value) {
    return !value.has_value();
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    return value == T{};
  } else if constexpr (requires { value.empty(); }) {
    return value.empty();
  } else {
    return false;
  }
}

// How many keys a description writes: optional fields at their zero are left out.
struct field_counter {
  std::uint32_t count = 0;

  template <typename T>
  void required(std::string_view, const T&) {
    ++count;
  }
  template <typename T>
  void optional(std::string_view, const T& value) {
    if (!is_zero(value)) ++count;
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
  explicit field_writer(msgpack_writer& out) : out_(out) {}

  template <typename T>
  void required(std::string_view key, const T& value) {
    str(key);
    write(value);
  }
  template <typename T>
  void optional(std::string_view key, const T& value) {
    if (is_zero(value)) return;
    if constexpr (is_optional<T>::value) {
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
    out_.str(key);
    out_.bin(value);
  }
  void optional_bytes(std::string_view key, const std::optional<std::string>& value) {
    if (value) bytes(key, *value);
  }

  template <typename M>
  void map(const M& m) {
    field_counter counter;
    describe(counter, m);
    out_.map(counter.count);
    describe(*this, m);
  }

 private:
  void str(std::string_view s) { out_.str(s); }
  void write(const std::string& s) { str(s); }
  void write(bool b) { out_.boolean(b); }
  void write(std::uint32_t u) { out_.uint(u); }
  void write(std::uint64_t u) { out_.uint(u); }
  void write(std::int64_t i) { out_.sint(i); }
  void write(task_state s) { str(to_string(s)); }
  void write(checkpointing_mode mode) { str(to_string(mode)); }
  template <record T>
  void write(const T& r) {
    map(r);
  }
  template <record T>
  void write(const std::vector<T>& records) {
    out_.array(static_cast<std::uint32_t>(records.size()));
    for (const auto& r : records) map(r);
  }

  msgpack_writer& out_;
};

// ---------------------------------------------------------------------------------------------
// Reading.

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

// Entries reserved ahead when an array of records is read; more grow the vector as usual.
constexpr std::size_t max_reserved_entries = 64;

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

// ---------------------------------------------------------------------------------------------
// Reading, the fast way: frames exactly as snapflow's own writer makes them.
//
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
// process meets that work cold (docs/benchmarks.md, control plane).
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
  void read(task_state& out) {
    std::string_view t;
    std::optional<task_state> parsed;
    if (!text(t) || !(parsed = parse_task_state(t))) {
      fail();
      return;
    }
    out = *parsed;
  }
  void read(checkpointing_mode& out) {
    std::string_view t;
    std::optional<checkpointing_mode> parsed;
    if (!text(t) || !(parsed = parse_checkpointing_mode(t))) {
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

std::optional<message> detail::decode_canonical(std::string_view frame) {
  const auto* begin = reinterpret_cast<const std::uint8_t*>(frame.data());
  canonical_reader reader(begin, begin + frame.size());
  std::uint32_t pairs = 0;
  std::string_view type;
  if (!reader.envelope(pairs, type)) return std::nullopt;
  return canonical_body(type, reader);
}

bool decode_canonical(std::string_view frame, trigger_checkpoint& out) {
  return decode_canonical_into(frame, out);
}

bool decode_canonical(std::string_view frame, acknowledge_checkpoint& out) {
  return decode_canonical_into(frame, out);
}

namespace {

constexpr std::size_t initial_frame_capacity = 512;

#ifndef NDEBUG
// Leaving an optional field out at its zero (is_zero) loses nothing only while the struct's
// default for that field is that zero: a field added with another default would decode to
// something other than what was sent. Debug builds (the test suite) check every message and
// record once per process, on the first encode.
struct optional_default_check {
  std::string_view type;

  template <typename T>
  void required(std::string_view, const T&) {}
  template <typename T>
  void optional(std::string_view key, const T& value) {
    if (is_zero(value)) return;
    std::fprintf(stderr, "wire: the optional field '%.*s' of %.*s does not default to zero\n",
                 static_cast<int>(key.size()), key.data(), static_cast<int>(type.size()),
                 type.data());
    std::abort();
  }
  template <typename T>
  void entries(std::string_view, const std::vector<T>&) {}
  void bytes(std::string_view, const std::string&) {}
  void optional_bytes(std::string_view key, const std::optional<std::string>& value) {
    optional(key, value);
  }
};

template <typename T>
void check_defaults(std::string_view type) {
  const T defaults{};
  optional_default_check check{type};
  describe(check, defaults);
}

template <typename... M>
void check_message_defaults(const std::variant<M...>*) {
  (check_defaults<M>(M::wire_type), ...);
}

bool check_optional_defaults() {
  check_message_defaults(static_cast<const message*>(nullptr));
  check_defaults<execution_attempt_id>("execution_attempt_id");
  check_defaults<state_handle>("state_handle");
  check_defaults<subtask_endpoint>("subtask_endpoint");
  check_defaults<subtask_restore_state>("subtask_restore_state");
  check_defaults<task_io>("task_io");
  check_defaults<checkpoint_notified>("checkpoint_notified");
  return true;
}
#endif

}  // namespace

namespace {

template <typename M>
void encode_message(const M& body, std::string& frame) {
#ifndef NDEBUG
  [[maybe_unused]] static const bool defaults_checked = check_optional_defaults();
#endif
  // Room for any control message without state (a trigger or an ack is 100-400 bytes), so the
  // string is sized once; a caller that keeps `frame` between messages does not allocate.
  msgpack_writer out(frame, initial_frame_capacity);
  field_writer writer(out);
  field_counter counter;
  describe(counter, body);
  out.map(counter.count + 2);
  out.str("v");
  out.uint(current_protocol_version);
  out.str("t");
  out.str(M::wire_type);
  describe(writer, body);
  out.finish();
}

}  // namespace

void encode(const message& m, std::string& frame) {
  std::visit([&](const auto& body) { encode_message(body, frame); }, m);
}

void encode(const trigger_checkpoint& m, std::string& frame) { encode_message(m, frame); }

void encode(const acknowledge_checkpoint& m, std::string& frame) { encode_message(m, frame); }

std::string encode(const message& m) {
  std::string frame;
  encode(m, frame);
  return frame;
}

decode_result decode(std::string_view frame, std::size_t max_frame_bytes) noexcept {
  try {
    if (frame.size() <= max_frame_bytes) {
      if (std::optional<message> m = detail::decode_canonical(frame)) return std::move(*m);
    }
    return detail::decode_general(frame, max_frame_bytes);
  } catch (const std::exception& e) {
    // Only an allocation for a field's copy can throw here; the frame is refused, not fatal.
    return decode_error{decode_errc::not_msgpack, e.what(), 0};
  }
}

decode_result detail::decode_general(std::string_view frame, std::size_t max_frame_bytes) noexcept {
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

}  // namespace snapflow::wire
