#include "graph/job_graph_codec.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <unordered_set>
#include <vector>

namespace snapflow {

namespace {

// Field names, shared by the packing and the reading side so the two cannot drift apart.
namespace key {
constexpr std::string_view id = "id";
constexpr std::string_view name = "name";
constexpr std::string_view vertices = "vertices";
constexpr std::string_view edges = "edges";
constexpr std::string_view checkpointing = "checkpointing";
constexpr std::string_view uid = "uid";
constexpr std::string_view kind = "kind";
constexpr std::string_view params = "params";
constexpr std::string_view parallelism = "parallelism";
constexpr std::string_view max_parallelism = "max_parallelism";
constexpr std::string_view custom_role = "custom_role";
constexpr std::string_view source = "source";
constexpr std::string_view target = "target";
constexpr std::string_view partitioning = "partitioning";
constexpr std::string_view to_trigger = "to_trigger";
constexpr std::string_view to_acknowledge = "to_acknowledge";
constexpr std::string_view to_confirm = "to_confirm";
constexpr std::string_view config = "config";
constexpr std::string_view interval_ms = "interval_ms";
constexpr std::string_view timeout_ms = "timeout_ms";
constexpr std::string_view min_pause_ms = "min_pause_ms";
constexpr std::string_view max_concurrent = "max_concurrent";
constexpr std::string_view tolerable_failures = "tolerable_failures";
constexpr std::string_view mode = "mode";
constexpr std::string_view unaligned = "unaligned";
constexpr std::string_view aligned_checkpoint_timeout_ms = "aligned_checkpoint_timeout_ms";
constexpr std::string_view max_in_flight_bytes = "max_in_flight_bytes";
constexpr std::string_view buffer_debloat = "buffer_debloat";
constexpr std::string_view buffer_debloat_target_ms = "buffer_debloat_target_ms";
constexpr std::string_view retained = "retained";
constexpr std::string_view retention = "retention";
constexpr std::string_view checkpoint_dir = "checkpoint_dir";
constexpr std::string_view savepoint_dir = "savepoint_dir";
constexpr std::string_view stats_history_size = "stats_history_size";
constexpr std::string_view state_backend = "state_backend";
constexpr std::string_view inline_state_max_bytes = "inline_state_max_bytes";
constexpr std::string_view incremental = "incremental";
constexpr std::string_view restart = "restart";
constexpr std::string_view program = "program";
constexpr std::string_view fingerprint = "fingerprint";
constexpr std::string_view strategy = "strategy";
constexpr std::string_view max_attempts = "max_attempts";
constexpr std::string_view delay_ms = "delay_ms";
constexpr std::string_view initial_backoff_ms = "initial_backoff_ms";
constexpr std::string_view max_backoff_ms = "max_backoff_ms";
constexpr std::string_view backoff_multiplier = "backoff_multiplier";
constexpr std::string_view reset_backoff_after_ms = "reset_backoff_after_ms";
constexpr std::string_view max_failures_per_interval = "max_failures_per_interval";
constexpr std::string_view failure_rate_interval_ms = "failure_rate_interval_ms";
}  // namespace key

// Enum values on the wire: the declaration order, which therefore must never change.
constexpr std::uint32_t partitioning_count = 4;
constexpr std::uint32_t checkpointing_mode_count = 2;
constexpr std::uint32_t externalized_retention_count = 2;
constexpr std::uint32_t restart_strategy_count = 4;
constexpr std::uint32_t operator_role_count = 4;

using packer = msgpack::packer<msgpack::sbuffer>;

void pack_string(packer& pk, std::string_view s) {
  const auto size = static_cast<std::uint32_t>(s.size());
  pk.pack_str(size);
  pk.pack_str_body(s.data(), size);
}

void pack_ids(packer& pk, const std::vector<vertex_id>& ids) {
  pk.pack_array(static_cast<std::uint32_t>(ids.size()));
  for (vertex_id id : ids) pk.pack_uint32(id);
}

void pack_config(packer& pk, const checkpoint_config& c) {
  // Added after the first version and written only when not the default, so configs that
  // keep it encode exactly as before.
  const bool inline_default =
      c.inline_state_max_bytes == checkpoint_config{}.inline_state_max_bytes;
  const bool timeout_default = c.aligned_checkpoint_timeout.count() == 0;
  const bool bytes_default = c.max_in_flight_bytes == 0;
  pk.pack_map(13 + (inline_default ? 0 : 1) + (c.incremental ? 1 : 0) + (timeout_default ? 0 : 1) +
              (bytes_default ? 0 : 1) + (c.buffer_debloat ? 2 : 0));
  pack_string(pk, key::interval_ms);
  if (c.interval)
    pk.pack_int64(c.interval->count());
  else
    pk.pack_nil();
  pack_string(pk, key::timeout_ms);
  pk.pack_int64(c.timeout.count());
  pack_string(pk, key::min_pause_ms);
  pk.pack_int64(c.min_pause.count());
  pack_string(pk, key::max_concurrent);
  pk.pack_int32(c.max_concurrent);
  pack_string(pk, key::tolerable_failures);
  pk.pack_int32(c.tolerable_failures);
  pack_string(pk, key::mode);
  pk.pack_uint8(static_cast<std::uint8_t>(c.mode));
  pack_string(pk, key::unaligned);
  if (c.unaligned)
    pk.pack_true();
  else
    pk.pack_false();
  pack_string(pk, key::retained);
  pk.pack_int32(c.retained);
  pack_string(pk, key::retention);
  pk.pack_uint8(static_cast<std::uint8_t>(c.retention));
  pack_string(pk, key::checkpoint_dir);
  pack_string(pk, c.checkpoint_dir);
  pack_string(pk, key::savepoint_dir);
  pack_string(pk, c.savepoint_dir);
  pack_string(pk, key::stats_history_size);
  pk.pack_int32(c.stats_history_size);
  pack_string(pk, key::state_backend);
  pack_string(pk, c.state_backend);
  if (!inline_default) {
    pack_string(pk, key::inline_state_max_bytes);
    pk.pack_int32(c.inline_state_max_bytes);
  }
  if (c.incremental) {
    pack_string(pk, key::incremental);
    pk.pack_true();
  }
  if (!timeout_default) {
    pack_string(pk, key::aligned_checkpoint_timeout_ms);
    pk.pack_int64(c.aligned_checkpoint_timeout.count());
  }
  if (!bytes_default) {
    pack_string(pk, key::max_in_flight_bytes);
    pk.pack_int64(c.max_in_flight_bytes);
  }
  if (c.buffer_debloat) {
    pack_string(pk, key::buffer_debloat);
    pk.pack_true();
    pack_string(pk, key::buffer_debloat_target_ms);
    pk.pack_int64(c.buffer_debloat_target.count());
  }
}

void pack_restart(packer& pk, const restart_strategy_config& c) {
  pk.pack_map(9);
  pack_string(pk, key::strategy);
  pk.pack_uint8(static_cast<std::uint8_t>(c.type));
  pack_string(pk, key::max_attempts);
  pk.pack_int32(c.max_attempts);
  pack_string(pk, key::delay_ms);
  pk.pack_int64(c.delay_ms);
  pack_string(pk, key::initial_backoff_ms);
  pk.pack_int64(c.initial_backoff_ms);
  pack_string(pk, key::max_backoff_ms);
  pk.pack_int64(c.max_backoff_ms);
  pack_string(pk, key::backoff_multiplier);
  pk.pack_double(c.backoff_multiplier);
  pack_string(pk, key::reset_backoff_after_ms);
  pk.pack_int64(c.reset_backoff_after_ms);
  pack_string(pk, key::max_failures_per_interval);
  pk.pack_int32(c.max_failures_per_interval);
  pack_string(pk, key::failure_rate_interval_ms);
  pk.pack_int64(c.failure_rate_interval_ms);
}

void pack_vertex(packer& pk, const job_vertex& v) {
  // `custom_role` is only written when set, so a vertex of a built-in kind encodes exactly as
  // before (persisted jobs and the fuzz corpus keep their bytes).
  pk.pack_map(v.custom_role ? 8 : 7);
  pack_string(pk, key::id);
  pk.pack_uint32(v.id);
  pack_string(pk, key::name);
  pack_string(pk, v.name);
  pack_string(pk, key::uid);
  pack_string(pk, v.uid);
  pack_string(pk, key::kind);
  pack_string(pk, v.kind);
  pack_string(pk, key::params);
  pk.pack_map(static_cast<std::uint32_t>(v.params.size()));
  for (const auto& [name, value] : v.params) {
    pack_string(pk, name);
    pack_string(pk, value);
  }
  pack_string(pk, key::parallelism);
  pk.pack_uint32(v.parallelism);
  pack_string(pk, key::max_parallelism);
  pk.pack_uint32(v.max_parallelism);
  if (v.custom_role) {
    pack_string(pk, key::custom_role);
    pk.pack_uint32(static_cast<std::uint32_t>(*v.custom_role));
  }
}

void pack_edge(packer& pk, const job_edge& e) {
  pk.pack_map(3);
  pack_string(pk, key::source);
  pk.pack_uint32(e.source);
  pack_string(pk, key::target);
  pk.pack_uint32(e.target);
  pack_string(pk, key::partitioning);
  pk.pack_uint8(static_cast<std::uint8_t>(e.part));
}

std::string_view type_name(msgpack::type::object_type type) {
  switch (type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
      return "a non-negative integer";
    case msgpack::type::NEGATIVE_INTEGER:
      return "a negative integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "a float";
    case msgpack::type::STR:
      return "a string";
    case msgpack::type::BIN:
      return "binary data";
    case msgpack::type::ARRAY:
      return "an array";
    case msgpack::type::MAP:
      return "a map";
    case msgpack::type::EXT:
      return "an extension value";
  }
  return "an unknown msgpack type";
}

// Walks an unpacked object and keeps the first problem. Field paths are built only when
// something is wrong, so decoding a good checkpoint config allocates nothing beyond the config.
class reader {
 public:
  bool failed() const { return !error_.empty(); }
  std::string take_error() { return std::move(error_); }

  // `prefix` is the enclosing record's path ("" at the top, "vertices[2]"), `key` the field.
  bool fail(std::string_view prefix, std::string_view key, std::string_view problem) {
    if (!error_.empty()) return false;  // later problems are usually consequences of the first
    if (prefix.empty() && key.empty()) {
      error_ = "top-level value: ";
    } else {
      error_ = "field '";
      error_ += prefix;
      if (!prefix.empty() && !key.empty()) error_ += '.';
      error_ += key;
      error_ += "': ";
    }
    error_ += problem;
    return false;
  }

  bool expect(const msgpack::object& o, msgpack::type::object_type type, std::string_view prefix,
              std::string_view key) {
    if (o.type == type) return true;
    return fail(prefix, key,
                "expected " + std::string(type_name(type)) + ", got " +
                    std::string(type_name(o.type)));
  }

  // A map's value for `key`; null (after recording the problem) when the field is missing.
  // Unknown keys are skipped, which is what lets newer senders add fields.
  const msgpack::object* field(const msgpack::object& map, std::string_view prefix,
                               std::string_view key) {
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
      const msgpack::object_kv& kv = map.via.map.ptr[i];
      if (kv.key.type == msgpack::type::STR &&
          std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
        return &kv.val;
    }
    fail(prefix, key, "missing");
    return nullptr;
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::string& out) {
    if (!expect(o, msgpack::type::STR, prefix, key)) return false;
    out.assign(o.via.str.ptr, o.via.str.size);
    return true;
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            bool& out) {
    if (!expect(o, msgpack::type::BOOLEAN, prefix, key)) return false;
    out = o.via.boolean;
    return true;
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::uint32_t& out) {
    if (o.type == msgpack::type::POSITIVE_INTEGER &&
        o.via.u64 <= std::numeric_limits<std::uint32_t>::max()) {
      out = static_cast<std::uint32_t>(o.via.u64);
      return true;
    }
    if (o.type == msgpack::type::POSITIVE_INTEGER || o.type == msgpack::type::NEGATIVE_INTEGER)
      return fail(prefix, key, "out of range for an unsigned 32-bit integer (got " +
                                   integer_text(o) + ")");
    return expect(o, msgpack::type::POSITIVE_INTEGER, prefix, key);
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::int64_t& out) {
    return read_signed(o, prefix, key, std::numeric_limits<std::int64_t>::min(),
                       std::numeric_limits<std::int64_t>::max(), "a 64-bit", out);
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::int32_t& out) {
    std::int64_t wide = 0;
    if (!read_signed(o, prefix, key, std::numeric_limits<std::int32_t>::min(),
                     std::numeric_limits<std::int32_t>::max(), "a 32-bit", wide))
      return false;
    out = static_cast<std::int32_t>(wide);
    return true;
  }

  // Any msgpack number; NaN and infinities are refused so a decoded value always compares
  // equal to itself after a round trip.
  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key, double& out) {
    double value = 0;
    if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64)
      value = o.via.f64;
    else if (o.type == msgpack::type::POSITIVE_INTEGER)
      value = static_cast<double>(o.via.u64);
    else if (o.type == msgpack::type::NEGATIVE_INTEGER)
      value = static_cast<double>(o.via.i64);
    else
      return fail(prefix, key, "expected a number, got " + std::string(type_name(o.type)));
    if (!std::isfinite(value)) return fail(prefix, key, "expected a finite number");
    out = value;
    return true;
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::chrono::milliseconds& out) {
    std::int64_t ms = 0;
    if (!read(o, prefix, key, ms)) return false;
    out = std::chrono::milliseconds(ms);
    return true;
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::optional<std::chrono::milliseconds>& out) {
    if (o.type == msgpack::type::NIL) {
      out.reset();
      return true;
    }
    std::chrono::milliseconds ms{0};
    if (o.type != msgpack::type::POSITIVE_INTEGER && o.type != msgpack::type::NEGATIVE_INTEGER)
      return fail(prefix, key, "expected an integer or nil, got " + std::string(type_name(o.type)));
    if (!read(o, prefix, key, ms)) return false;
    out = ms;
    return true;
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::map<std::string, std::string>& out) {
    if (!expect(o, msgpack::type::MAP, prefix, key)) return false;
    out.clear();
    for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
      const msgpack::object_kv& kv = o.via.map.ptr[i];
      std::string name;
      std::string value;
      if (!read(kv.key, prefix, key, name)) return false;
      if (kv.val.type != msgpack::type::STR) return read(kv.val, path(prefix, key), name, value);
      value.assign(kv.val.via.str.ptr, kv.val.via.str.size);
      if (out.contains(name)) return fail(prefix, key, "duplicate key '" + name + "'");
      out.emplace(std::move(name), std::move(value));
    }
    return true;
  }

  bool read(const msgpack::object& o, std::string_view prefix, std::string_view key,
            std::vector<vertex_id>& out) {
    if (!expect(o, msgpack::type::ARRAY, prefix, key)) return false;
    out.clear();
    out.reserve(o.via.array.size);
    for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
      const msgpack::object& element = o.via.array.ptr[i];
      vertex_id id = 0;
      const bool fits = element.type == msgpack::type::POSITIVE_INTEGER &&
                        element.via.u64 <= std::numeric_limits<vertex_id>::max();
      // Only a bad element pays for building its path.
      if (!fits) return read(element, path(prefix, key) + index(i), "", id);
      out.push_back(static_cast<vertex_id>(element.via.u64));
    }
    return true;
  }

  // An enum sent as its declaration index; anything at or past `count` is refused.
  template <typename Enum>
  bool read_enum(const msgpack::object& o, std::string_view prefix, std::string_view key,
                 std::uint32_t count, Enum& out) {
    std::uint32_t raw = 0;
    if (!read(o, prefix, key, raw)) return false;
    if (raw >= count)
      return fail(prefix, key, "unknown value " + std::to_string(raw) + " (expected 0 to " +
                                   std::to_string(count - 1) + ")");
    out = static_cast<Enum>(raw);
    return true;
  }

  // Looks `key` up in `map` and reads it into `out`.
  template <typename T>
  bool get(const msgpack::object& map, std::string_view prefix, std::string_view key, T& out) {
    const msgpack::object* value = field(map, prefix, key);
    return value != nullptr && read(*value, prefix, key, out);
  }

  template <typename Enum>
  bool get_enum(const msgpack::object& map, std::string_view prefix, std::string_view key,
                std::uint32_t count, Enum& out) {
    const msgpack::object* value = field(map, prefix, key);
    return value != nullptr && read_enum(*value, prefix, key, count, out);
  }

  static std::string path(std::string_view prefix, std::string_view key) {
    std::string out(prefix);
    if (!out.empty() && !key.empty()) out += '.';
    out += key;
    return out;
  }

  static std::string index(std::uint32_t i) { return "[" + std::to_string(i) + "]"; }

 private:
  static std::string integer_text(const msgpack::object& o) {
    return o.type == msgpack::type::NEGATIVE_INTEGER ? std::to_string(o.via.i64)
                                                     : std::to_string(o.via.u64);
  }

  bool read_signed(const msgpack::object& o, std::string_view prefix, std::string_view key,
                   std::int64_t min, std::int64_t max, std::string_view width,
                   std::int64_t& out) {
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
      if (o.via.u64 <= static_cast<std::uint64_t>(max)) {
        out = static_cast<std::int64_t>(o.via.u64);
        return true;
      }
    } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      if (o.via.i64 >= min) {
        out = o.via.i64;
        return true;
      }
    } else {
      return fail(prefix, key, "expected an integer, got " + std::string(type_name(o.type)));
    }
    return fail(prefix, key, "out of range for " + std::string(width) + " integer (got " +
                                 integer_text(o) + ")");
  }

  std::string error_;
};

const msgpack::object* optional_field(const msgpack::object& map, std::string_view key);

// Each reader call after the first failure only returns false, so a record is read field by
// field without checking every step; the first problem is the one reported.
void read_config(reader& r, const msgpack::object& o, std::string_view prefix,
                 std::string_view name, checkpoint_config& c) {
  if (!r.expect(o, msgpack::type::MAP, prefix, name)) return;
  const std::string at = reader::path(prefix, name);
  r.get(o, at, key::interval_ms, c.interval);
  r.get(o, at, key::timeout_ms, c.timeout);
  r.get(o, at, key::min_pause_ms, c.min_pause);
  r.get(o, at, key::max_concurrent, c.max_concurrent);
  r.get(o, at, key::tolerable_failures, c.tolerable_failures);
  r.get_enum(o, at, key::mode, checkpointing_mode_count, c.mode);
  r.get(o, at, key::unaligned, c.unaligned);
  r.get(o, at, key::retained, c.retained);
  r.get_enum(o, at, key::retention, externalized_retention_count, c.retention);
  r.get(o, at, key::checkpoint_dir, c.checkpoint_dir);
  r.get(o, at, key::savepoint_dir, c.savepoint_dir);
  r.get(o, at, key::stats_history_size, c.stats_history_size);
  r.get(o, at, key::state_backend, c.state_backend);
  // Added after the first version: absent or nil keeps the default.
  if (const msgpack::object* limit = optional_field(o, key::inline_state_max_bytes);
      limit != nullptr && limit->type != msgpack::type::NIL && !r.failed())
    r.read(*limit, at, key::inline_state_max_bytes, c.inline_state_max_bytes);
  if (const msgpack::object* incremental = optional_field(o, key::incremental);
      incremental != nullptr && incremental->type != msgpack::type::NIL && !r.failed())
    r.read(*incremental, at, key::incremental, c.incremental);
  if (const msgpack::object* timeout = optional_field(o, key::aligned_checkpoint_timeout_ms);
      timeout != nullptr && timeout->type != msgpack::type::NIL && !r.failed())
    r.read(*timeout, at, key::aligned_checkpoint_timeout_ms, c.aligned_checkpoint_timeout);
  if (const msgpack::object* bytes = optional_field(o, key::max_in_flight_bytes);
      bytes != nullptr && bytes->type != msgpack::type::NIL && !r.failed())
    r.read(*bytes, at, key::max_in_flight_bytes, c.max_in_flight_bytes);
  if (const msgpack::object* debloat = optional_field(o, key::buffer_debloat);
      debloat != nullptr && debloat->type != msgpack::type::NIL && !r.failed())
    r.read(*debloat, at, key::buffer_debloat, c.buffer_debloat);
  if (const msgpack::object* target = optional_field(o, key::buffer_debloat_target_ms);
      target != nullptr && target->type != msgpack::type::NIL && !r.failed())
    r.read(*target, at, key::buffer_debloat_target_ms, c.buffer_debloat_target);
}

void read_restart(reader& r, const msgpack::object& o, restart_strategy_config& c) {
  const std::string_view at = key::restart;
  if (!r.expect(o, msgpack::type::MAP, "", at)) return;
  r.get_enum(o, at, key::strategy, restart_strategy_count, c.type);
  r.get(o, at, key::max_attempts, c.max_attempts);
  r.get(o, at, key::delay_ms, c.delay_ms);
  r.get(o, at, key::initial_backoff_ms, c.initial_backoff_ms);
  r.get(o, at, key::max_backoff_ms, c.max_backoff_ms);
  r.get(o, at, key::backoff_multiplier, c.backoff_multiplier);
  r.get(o, at, key::reset_backoff_after_ms, c.reset_backoff_after_ms);
  r.get(o, at, key::max_failures_per_interval, c.max_failures_per_interval);
  r.get(o, at, key::failure_rate_interval_ms, c.failure_rate_interval_ms);
}

// A map's value for `key`, or null when absent: for fields added after the first version.
const msgpack::object* optional_field(const msgpack::object& map, std::string_view key) {
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR &&
        std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
      return &kv.val;
  }
  return nullptr;
}

void read_vertex(reader& r, const msgpack::object& o, const std::string& at, job_vertex& v) {
  if (!r.expect(o, msgpack::type::MAP, at, "")) return;
  r.get(o, at, key::id, v.id);
  r.get(o, at, key::name, v.name);
  r.get(o, at, key::uid, v.uid);
  r.get(o, at, key::kind, v.kind);
  r.get(o, at, key::params, v.params);
  r.get(o, at, key::parallelism, v.parallelism);
  r.get(o, at, key::max_parallelism, v.max_parallelism);
  // Added after the first version: absent or nil means the kind is a built-in one.
  if (const msgpack::object* role = optional_field(o, key::custom_role);
      role != nullptr && role->type != msgpack::type::NIL && !r.failed()) {
    operator_role value = operator_role::transform;
    if (r.read_enum(*role, at, key::custom_role, operator_role_count, value))
      v.custom_role = value;
  }
}

void read_edge(reader& r, const msgpack::object& o, const std::string& at, job_edge& e) {
  if (!r.expect(o, msgpack::type::MAP, at, "")) return;
  r.get(o, at, key::source, e.source);
  r.get(o, at, key::target, e.target);
  r.get_enum(o, at, key::partitioning, partitioning_count, e.part);
}

void read_settings(reader& r, const msgpack::object& o, job_checkpointing_settings& s) {
  const std::string_view at = key::checkpointing;
  if (!r.expect(o, msgpack::type::MAP, "", at)) return;
  r.get(o, at, key::to_trigger, s.to_trigger);
  r.get(o, at, key::to_acknowledge, s.to_acknowledge);
  r.get(o, at, key::to_confirm, s.to_confirm);
  if (r.failed()) return;
  if (const msgpack::object* config = r.field(o, at, key::config))
    read_config(r, *config, at, key::config, s.config);
}

// Structural sanity the rest of the runtime may index by: unique vertex ids, and every edge
// and checkpoint list naming a vertex that exists. Kinds and shape are validate()'s business.
void check_references(reader& r, const job_graph& g) {
  std::unordered_set<vertex_id> ids;
  for (std::size_t i = 0; i < g.vertices.size(); ++i)
    if (!ids.insert(g.vertices[i].id).second) {
      r.fail("vertices" + reader::index(static_cast<std::uint32_t>(i)), key::id,
             "duplicate vertex id " + std::to_string(g.vertices[i].id));
      return;
    }
  auto known = [&](vertex_id id, std::string_view prefix, std::string_view field) {
    if (ids.contains(id)) return true;
    return r.fail(prefix, field, "no vertex has id " + std::to_string(id));
  };
  for (std::size_t i = 0; i < g.edges.size(); ++i) {
    const std::string at = "edges" + reader::index(static_cast<std::uint32_t>(i));
    if (!known(g.edges[i].source, at, key::source) || !known(g.edges[i].target, at, key::target))
      return;
  }
  if (!g.checkpointing) return;
  const std::pair<std::string_view, const std::vector<vertex_id>*> lists[] = {
      {key::to_trigger, &g.checkpointing->to_trigger},
      {key::to_acknowledge, &g.checkpointing->to_acknowledge},
      {key::to_confirm, &g.checkpointing->to_confirm},
  };
  for (const auto& [name, list] : lists)
    for (std::size_t i = 0; i < list->size(); ++i)
      if (!known((*list)[i], key::checkpointing,
                 std::string(name) + reader::index(static_cast<std::uint32_t>(i))))
        return;
}

job_graph read_graph(reader& r, const msgpack::object& o) {
  job_graph g;
  if (!r.expect(o, msgpack::type::MAP, "", "")) return g;
  r.get(o, "", key::id, g.id);
  r.get(o, "", key::name, g.name);
  if (r.failed()) return g;

  const msgpack::object* vertices = r.field(o, "", key::vertices);
  if (vertices == nullptr || !r.expect(*vertices, msgpack::type::ARRAY, "", key::vertices))
    return g;
  // Grown one good element at a time rather than sized from the declared count: an array of
  // a million nils is a few bytes per element on the wire but hundreds in a job_vertex.
  for (std::uint32_t i = 0; i < vertices->via.array.size && !r.failed(); ++i)
    read_vertex(r, vertices->via.array.ptr[i], "vertices" + reader::index(i),
                g.vertices.emplace_back());

  const msgpack::object* edges = r.field(o, "", key::edges);
  if (edges == nullptr || !r.expect(*edges, msgpack::type::ARRAY, "", key::edges)) return g;
  for (std::uint32_t i = 0; i < edges->via.array.size && !r.failed(); ++i)
    read_edge(r, edges->via.array.ptr[i], "edges" + reader::index(i), g.edges.emplace_back());

  const msgpack::object* settings = r.field(o, "", key::checkpointing);
  if (settings == nullptr || r.failed()) return g;
  if (settings->type != msgpack::type::NIL) {
    g.checkpointing.emplace();
    read_settings(r, *settings, *g.checkpointing);
  }
  // Added after the first version: absent (older senders and persisted jobs) or nil means the
  // coordinator's default strategy.
  if (const msgpack::object* restart = optional_field(o, key::restart);
      restart != nullptr && restart->type != msgpack::type::NIL && !r.failed()) {
    g.restart.emplace();
    read_restart(r, *restart, *g.restart);
  }
  // Added later still: absent or nil for jobs not submitted by a user program.
  if (const msgpack::object* program = optional_field(o, key::program);
      program != nullptr && program->type != msgpack::type::NIL && !r.failed()) {
    job_program p;
    if (r.expect(*program, msgpack::type::MAP, "", key::program)) {
      r.get(*program, key::program, key::name, p.name);
      r.get(*program, key::program, key::fingerprint, p.fingerprint);
    }
    if (!r.failed()) g.program = std::move(p);
  }
  if (!r.failed()) check_references(r, g);
  return g;
}

template <typename T, typename Read>
result<T> read_guarded(Read read) {
  // Reading only allocates, but "never throws" includes running out of memory.
  try {
    reader r;
    T value = read(r);
    if (r.failed()) return error{r.take_error()};
    return value;
  } catch (const std::exception& e) {
    return error{std::string("cannot decode: ") + e.what()};
  }
}

// Unpacks one msgpack value spanning all of `bytes` and hands it to `read`. Every exception the
// unpacker can throw stops here.
template <typename T, typename Read>
result<T> decode_bytes(std::string_view bytes, Read read) {
  try {
    std::size_t offset = 0;
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr,
                                                    nullptr, unpack_limit_for(bytes.size()));
    if (offset != bytes.size())
      return error{std::to_string(bytes.size() - offset) +
                          " unexpected bytes after the msgpack value"};
    return read(handle.get());
  } catch (const msgpack::insufficient_bytes&) {
    return error{"truncated msgpack value (" + std::to_string(bytes.size()) + " bytes)"};
  } catch (const msgpack::depth_size_overflow&) {
    return error{"msgpack value nested deeper than " + std::to_string(max_decode_depth) +
                        " levels"};
  } catch (const msgpack::size_overflow& e) {
    return error{std::string("msgpack value declares more elements than its ") +
                        std::to_string(bytes.size()) + " bytes can hold (" + e.what() + ")"};
  } catch (const msgpack::unpack_error& e) {
    return error{std::string("malformed msgpack: ") + e.what()};
  } catch (const std::exception& e) {
    return error{std::string("cannot decode msgpack: ") + e.what()};
  }
}

}  // namespace

msgpack::unpack_limit unpack_limit_for(std::size_t bytes) {
  // Every array element and string byte takes at least one byte of the frame and every map
  // entry two, so these bounds never refuse a well-formed value. The unpacker reserves a
  // container's slots when it reads the header; with at most max_decode_depth containers open
  // at once, what it can reserve stays within a small multiple of the frame size.
  return msgpack::unpack_limit(bytes, bytes / 2, bytes, bytes, bytes, max_decode_depth);
}

void pack_job_graph(packer& pk, const job_graph& g) {
  // `restart` and `program` are only written when set, so a graph without them encodes
  // exactly as before.
  pk.pack_map(5 + (g.restart ? 1 : 0) + (g.program ? 1 : 0));
  pack_string(pk, key::id);
  pack_string(pk, g.id);
  pack_string(pk, key::name);
  pack_string(pk, g.name);
  pack_string(pk, key::vertices);
  pk.pack_array(static_cast<std::uint32_t>(g.vertices.size()));
  for (const auto& v : g.vertices) pack_vertex(pk, v);
  pack_string(pk, key::edges);
  pk.pack_array(static_cast<std::uint32_t>(g.edges.size()));
  for (const auto& e : g.edges) pack_edge(pk, e);
  pack_string(pk, key::checkpointing);
  if (!g.checkpointing) {
    pk.pack_nil();
  } else {
    const job_checkpointing_settings& s = *g.checkpointing;
    pk.pack_map(4);
    pack_string(pk, key::to_trigger);
    pack_ids(pk, s.to_trigger);
    pack_string(pk, key::to_acknowledge);
    pack_ids(pk, s.to_acknowledge);
    pack_string(pk, key::to_confirm);
    pack_ids(pk, s.to_confirm);
    pack_string(pk, key::config);
    pack_config(pk, s.config);
  }
  if (g.restart) {
    pack_string(pk, key::restart);
    pack_restart(pk, *g.restart);
  }
  if (g.program) {
    pack_string(pk, key::program);
    pk.pack_map(2);
    pack_string(pk, key::name);
    pack_string(pk, g.program->name);
    pack_string(pk, key::fingerprint);
    pack_string(pk, g.program->fingerprint);
  }
}

void pack_checkpoint_config(packer& pk, const checkpoint_config& config) {
  pack_config(pk, config);
}

result<job_graph> read_job_graph(const msgpack::object& object) {
  return read_guarded<job_graph>([&](reader& r) { return read_graph(r, object); });
}

result<checkpoint_config> read_checkpoint_config(const msgpack::object& object) {
  return read_guarded<checkpoint_config>([&](reader& r) {
    checkpoint_config c;
    read_config(r, object, "", "", c);
    return c;
  });
}

std::string encode_job_graph(const job_graph& graph) {
  msgpack::sbuffer buffer;
  packer pk(buffer);
  pack_job_graph(pk, graph);
  return std::string(buffer.data(), buffer.size());
}

result<job_graph> decode_job_graph(std::string_view bytes) {
  return decode_bytes<job_graph>(bytes, [](const msgpack::object& o) { return read_job_graph(o); });
}

std::string encode_checkpoint_config(const checkpoint_config& config) {
  msgpack::sbuffer buffer;
  packer pk(buffer);
  pack_config(pk, config);
  return std::string(buffer.data(), buffer.size());
}

result<checkpoint_config> decode_checkpoint_config(std::string_view bytes) {
  return decode_bytes<checkpoint_config>(
      bytes, [](const msgpack::object& o) { return read_checkpoint_config(o); });
}

}  // namespace snapflow
