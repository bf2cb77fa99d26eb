#include "graph/operator_registry.hpp"

#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>

namespace snapflow {

std::string_view to_string(operator_role role) {
  switch (role) {
    case operator_role::source:
      return "source";
    case operator_role::transform:
      return "transform";
    case operator_role::keyed:
      return "keyed";
    case operator_role::sink:
      return "sink";
  }
  return "unknown";
}

const param_spec* operator_kind::find_param(std::string_view param) const {
  for (const auto& p : params)
    if (p.name == param) return &p;
  return nullptr;
}

namespace {

param_spec integer(std::string name, bool required, std::string def, std::string help) {
  return {std::move(name), param_type::integer, required, std::move(def), std::move(help)};
}
// An integer within [min, max] (no upper bound without `max`).
param_spec bounded(std::string name, bool required, std::string def, std::string help,
                   std::int64_t min, std::optional<std::int64_t> max = std::nullopt) {
  param_spec p = integer(std::move(name), required, std::move(def), std::move(help));
  p.min = min;
  p.max = max;
  return p;
}
constexpr std::int64_t max_delay_us = 1'000'000;
constexpr std::int64_t max_repeat = 1'000'000;
constexpr std::int64_t max_state_bytes = std::int64_t{1} << 30;
constexpr std::int64_t max_value_bytes = std::int64_t{1} << 20;

std::optional<std::string> remainder_below_modulus(const std::map<std::string, std::string>& p) {
  const auto remainder = p.find("remainder");
  if (remainder == p.end()) return std::nullopt;
  // Both are well-formed integers by now (check_params checked each one first).
  if (std::stoll(remainder->second) < std::stoll(p.at("modulus"))) return std::nullopt;
  return "parameter 'remainder' of operator kind 'filter_modulo' must be below modulus (got " +
         remainder->second + ", modulus " + p.at("modulus") + ")";
}
param_spec text(std::string name, bool required, std::string def, std::string help) {
  return {std::move(name), param_type::string, required, std::move(def), std::move(help)};
}
param_spec path(std::string name, bool required, std::string def, std::string help) {
  param_spec p = text(std::move(name), required, std::move(def), std::move(help));
  p.is_path = true;
  return p;
}

// The exactly-once sink's operator state belongs to one subtask: its transactions, which new
// subtask i % p commits, the same i % p that round_robin hands it. The other kinds keep no
// operator state that is read back (keyed_sum's state_bytes ballast is not), only keyed state,
// except the sources: their split positions are picked from the union of every old subtask's
// (a restored subtask takes the splits it owns at the new parallelism; the entries are tiny),
// and user_stateful_process, whose even-split lists need every old subtask's elements.
struct builtin_kinds {
  operator_registry registry;
  void add(operator_kind kind,
           operator_state_redistribution mode = operator_state_redistribution::round_robin) {
    kind.redistribution = mode;
    registry.add(std::move(kind));
  }
};

operator_registry make_builtin() {
  builtin_kinds r;
  r.add({"sequence_source",
         operator_role::source,
         {bounded("count", true, "", "records to emit in all (split across subtasks)", 0),
          bounded("keys", false, "16", "number of distinct keys; record key = seq % keys", 1),
          bounded("rate", false, "0", "records per second per subtask; 0 = unlimited", 0),
          bounded("start", false, "0", "first sequence number", 0)},
         "deterministic sequence start..start+count-1 in max_parallelism splits; rescalable"},
        operator_state_redistribution::split_modulo);
  r.add({"line_source",
         operator_role::source,
         {path("path", true, "", "file to read, one record per line")},
         "lines of a file as records, in max_parallelism splits by line number; rescalable"},
        operator_state_redistribution::split_modulo);
  r.add({"map_identity",
         operator_role::transform,
         {bounded("delay_us_per_record", false, "0",
                  "sleep before each record, 0..1000000 (a deliberately slow stage)", 0,
                  max_delay_us)},
         "passes records through"});
  r.add({"map_add",
         operator_role::transform,
         {integer("value", true, "", "added to record.value")},
         "adds a constant to the value"});
  r.add({"map_scale",
         operator_role::transform,
         {integer("factor", true, "", "record.value is multiplied by it")},
         "multiplies the value by a constant"});
  r.add({"filter_modulo",
         operator_role::transform,
         {bounded("modulus", true, "", "divisor applied to record.seq", 1),
          bounded("remainder", false, "0", "records with seq % modulus == remainder pass", 0)},
         "keeps records by sequence number",
         operator_state_redistribution::union_all,
         remainder_below_modulus});
  r.add({"flat_map_split_words", operator_role::transform, {},
         "one record per whitespace-separated word of the payload"});
  r.add({"flat_map_repeat",
         operator_role::transform,
         {bounded("times", true, "", "copies emitted per input record, 0..1000000", 0,
                  max_repeat)},
         "emits each record several times"});
  r.add({"keyed_sum",
         operator_role::keyed,
         {bounded("state_bytes", false, "0",
                  "extra opaque operator state per subtask, in bytes (for benchmarks)", 0,
                  max_state_bytes),
          bounded("value_bytes", false, "0",
                  "bytes of keyed state each key also holds, rewritten by each of its records "
                  "(for benchmarks)",
                  0, max_value_bytes)},
         "running sum of record.value per key"});
  r.add({"keyed_count", operator_role::keyed, {}, "running count of records per key"});
  r.add({"print_sink", operator_role::sink, {}, "prints records to standard output"});
  r.add({"discard_sink",
         operator_role::sink,
         {bounded("delay_us_per_record", false, "0",
                  "sleep before each record, 0..1000000 (a deliberately slow sink)", 0,
                  max_delay_us)},
         "drops every record (benchmarks: the pipeline's cost without a sink's)"});
  r.add({"file_sink",
         operator_role::sink,
         {path("path", true, "", "output folder"),
          bounded("delay_us_per_record", false, "0",
                  "sleep before each record, 0..1000000 (a deliberately slow sink)", 0,
                  max_delay_us)},
         "appends records to a file (at-least-once)"});
  r.add({"two_phase_commit_file_sink",
         operator_role::sink,
         {path("path", true, "", "output folder; only committed files appear in it")},
         "exactly-once file sink: pre-commit on barrier, commit on notify-complete"});
  // Kinds backed by a C++ callable declared through stream_environment.
  r.add({"user_map", operator_role::transform, {}, "C++ map callable"});
  r.add({"user_filter", operator_role::transform, {}, "C++ filter callable"});
  r.add({"user_flat_map", operator_role::transform, {}, "C++ flat_map callable"});
  r.add({"user_key_by", operator_role::transform, {}, "C++ key selector"});
  r.add({"user_process", operator_role::keyed, {}, "C++ keyed process callable"});
  // Every new subtask reads every old one's lists and takes its share itself
  // (operator_list_states): even-split needs the counts of all of them.
  r.add({"user_stateful_process", operator_role::transform, {},
         "C++ non-keyed process callable with operator list state"},
         operator_state_redistribution::union_all);
  r.add({"user_timestamps", operator_role::transform, {},
         "C++ timestamp assigner: event time and watermarks"});
  return std::move(r.registry);
}

}  // namespace

const operator_registry& operator_registry::builtin() {
  static const operator_registry registry = make_builtin();
  return registry;
}

void operator_registry::add(operator_kind kind) {
  if (kind.name.empty()) throw std::invalid_argument("operator kind name must not be blank");
  auto name = kind.name;
  if (!kinds_.emplace(name, std::move(kind)).second)
    throw std::invalid_argument("operator kind '" + name + "' is already registered");
}

const operator_kind* operator_registry::find(std::string_view name) const {
  auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : &it->second;
}

std::vector<std::string> operator_registry::names() const {
  std::vector<std::string> out;
  out.reserve(kinds_.size());
  for (const auto& [name, _] : kinds_) out.push_back(name);
  return out;
}

std::optional<std::string> check_params(const operator_kind& kind,
                                        const std::map<std::string, std::string>& params) {
  for (const auto& [key, value] : params) {
    const param_spec* spec = kind.find_param(key);
    if (spec == nullptr)
      return "unknown parameter '" + key + "' for operator kind '" + kind.name + "'";
    if (spec->type == param_type::integer) {
      long long parsed = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
      if (ec != std::errc() || ptr != value.data() + value.size() || value.empty())
        return "parameter '" + key + "' of operator kind '" + kind.name +
               "' must be an integer (got '" + value + "')";
      if ((spec->min && parsed < *spec->min) || (spec->max && parsed > *spec->max))
        return "parameter '" + key + "' of operator kind '" + kind.name + "' must be " +
               (spec->max ? "between " + std::to_string(spec->min.value_or(INT64_MIN)) + " and " +
                                std::to_string(*spec->max)
                          : "at least " + std::to_string(*spec->min)) +
               " (got " + value + ")";
    } else if (spec->is_path && value.find_first_not_of(" \t") == std::string::npos) {
      return "parameter '" + key + "' of operator kind '" + kind.name +
             "' must name a file or folder (got '" + value + "')";
    } else if (spec->type == param_type::boolean) {
      if (value != "true" && value != "false")
        return "parameter '" + key + "' of operator kind '" + kind.name +
               "' must be true or false (got '" + value + "')";
    }
  }
  for (const auto& spec : kind.params)
    if (spec.required && !params.contains(spec.name))
      return "operator kind '" + kind.name + "' requires parameter '" + spec.name + "'";
  if (kind.check_together) return kind.check_together(params);
  return std::nullopt;
}

}  // namespace snapflow
