#include "graph/job_file.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <system_error>
#include <vector>

#include <toml++/toml.h>

#include "graph/stream_graph.hpp"

namespace snapflow {

std::string job_file_error::what() const {
  std::string out = file;
  if (line != 0) out += ":" + std::to_string(line);
  if (!key.empty()) out += ": key '" + key + "'";
  out += ": " + message;
  return out;
}

std::ostream& operator<<(std::ostream& os, const job_file_error& error) {
  return os << error.what();
}

std::ostream& operator<<(std::ostream& os, const job_file_result& result) {
  if (result.ok()) return os << "ok: " << result.value();
  return os << "error: " << result.error();
}

namespace {

// A job file is a handful of kilobytes; anything this large is a mistake, not a job.
constexpr std::uintmax_t max_job_file_bytes = 16 * 1024 * 1024;

constexpr std::int64_t parallelism_limit = job_graph::max_parallelism_limit;

constexpr std::array<std::string_view, 4> top_level_keys = {"job", "checkpointing", "restart",
                                                            "operator"};
constexpr std::array<std::string_view, 5> job_keys = {"name", "parallelism", "max_parallelism",
                                                      "program", "program_fingerprint"};
constexpr std::array<std::string_view, 19> checkpointing_keys = {
    "interval_ms", "mode", "timeout_ms", "min_pause_ms", "max_concurrent", "tolerable_failures",
    "retained", "retention", "unaligned", "checkpoint_dir", "savepoint_dir", "stats_history_size",
    "state_backend", "inline_state_max_bytes", "incremental", "aligned_checkpoint_timeout_ms",
    "max_in_flight_bytes", "buffer_debloat", "buffer_debloat_target_ms"};
constexpr std::array<std::string_view, 9> restart_keys = {
    "strategy", "max_attempts", "delay_ms", "initial_backoff_ms", "max_backoff_ms",
    "backoff_multiplier", "reset_backoff_after_ms", "max_failures_per_interval",
    "failure_rate_interval_ms"};
constexpr std::array<std::string_view, 10> operator_keys = {
    "uid", "kind", "role", "name", "parallelism", "max_parallelism", "input", "inputs",
    "partition", "params"};

std::optional<operator_role> parse_role(std::string_view text) {
  if (text == "source") return operator_role::source;
  if (text == "transform") return operator_role::transform;
  if (text == "keyed") return operator_role::keyed;
  if (text == "sink") return operator_role::sink;
  return std::nullopt;
}

std::uint32_t line_of(const toml::node& node) { return node.source().begin.line; }

std::string join(std::string_view prefix, std::string_view key) {
  std::string out(prefix);
  if (!out.empty()) out += '.';
  out += key;
  return out;
}

std::string index_key(std::string_view name, std::size_t index) {
  return std::string(name) + "[" + std::to_string(index) + "]";
}

// The last component of a key path: "operator[1].parallelism" -> "parallelism".
std::string_view leaf(std::string_view key) {
  auto dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

std::string_view describe(toml::node_type type) {
  switch (type) {
    case toml::node_type::none:
      return "nothing";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
  }
  return "an unknown value";
}

template <typename List>
std::string comma_list(const List& names) {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// A table's entries in file order: toml++ keeps them sorted by name, but the first problem
// reported should be the first one in the file.
using entry_list = std::vector<std::pair<std::string_view, const toml::node*>>;

entry_list in_file_order(const toml::table& table) {
  entry_list out;
  for (auto&& [key, node] : table) out.emplace_back(key.str(), &node);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto& pa = a.second->source().begin;
    const auto& pb = b.second->source().begin;
    return std::pair(pa.line, pa.column) < std::pair(pb.line, pb.column);
  });
  return out;
}

const toml::node* find_entry(const entry_list& entries, std::string_view key) {
  for (const auto& [name, node] : entries)
    if (name == key) return node;
  return nullptr;
}

struct input_ref {
  std::string uid;
  std::string key;
  std::uint32_t line = 0;
};

// One [[operator]] table as read, before vertex ids exist.
struct operator_decl {
  std::string path;  // "operator[2]"
  std::uint32_t line = 0;
  std::string uid;
  std::uint32_t uid_line = 0;
  std::string name;
  const operator_kind* kind = nullptr;
  // A kind the registry lacks, declared with a role: `kind` then points at a shape made up from
  // the role alone, and its params are the worker's to check.
  bool custom = false;
  std::uint32_t parallelism = 0;
  std::uint32_t max_parallelism = 0;
  std::vector<input_ref> inputs;
  std::string inputs_key;  // the input or inputs key, for problems with the list as a whole
  std::uint32_t inputs_line = 0;
  std::optional<partitioning> part;
  std::string part_key;
  std::uint32_t part_line = 0;
  std::map<std::string, std::string> params;
  std::vector<std::size_t> input_decls;  // inputs resolved to indexes into the operator list
};

class job_file_parser {
 public:
  job_file_parser(std::string_view file, const operator_registry& registry)
      : file_(file), registry_(registry) {
    // Defaults are the C++ API's, so a file and the same job through stream_environment agree.
    const stream_graph defaults;
    job_name_ = defaults.job_name;
    default_parallelism_ = defaults.default_parallelism;
    default_max_parallelism_ = defaults.default_max_parallelism;
  }

  job_file_result run(std::string_view text) {
    std::optional<toml::table> root = parse_toml(text);
    if (!root) return *error_;
    if (!parse_root(*root)) return *error_;
    std::vector<std::size_t> order;
    if (!resolve_inputs() || !sort_topologically(order) || !check_partitions()) return *error_;
    job_graph graph = build(order);
    if (!check_graph(graph)) return *error_;
    return graph;
  }

 private:
  bool fail(std::string key, std::uint32_t line, std::string message) {
    if (!error_) error_ = job_file_error{file_, std::move(key), line, std::move(message)};
    return false;
  }

  bool wrong_type(const std::string& key, const toml::node& node, std::string_view expected) {
    return fail(key, line_of(node),
                "wrong value type: expected " + std::string(expected) + ", got " +
                    std::string(describe(node.type())));
  }

  std::optional<toml::table> parse_toml(std::string_view text) {
#if TOML_EXCEPTIONS
    try {
      return toml::parse(text, std::string_view(file_));
    } catch (const toml::parse_error& e) {
      fail("", e.source().begin.line, "TOML syntax error: " + std::string(e.description()));
      return std::nullopt;
    }
#else
    toml::parse_result result = toml::parse(text, std::string_view(file_));
    if (!result) {
      fail("", result.error().source().begin.line,
           "TOML syntax error: " + std::string(result.error().description()));
      return std::nullopt;
    }
    return std::move(result).table();
#endif
  }

  // The entries of `table` in file order, refusing any key outside `known`; the first unknown
  // key in the file is the one reported.
  std::optional<entry_list> entries(const toml::table& table, std::string_view prefix,
                                    std::string_view where,
                                    std::span<const std::string_view> known) {
    entry_list out;
    for (const auto& [key, node] : in_file_order(table)) {
      auto it = std::find(known.begin(), known.end(), key);
      if (it == known.end()) {
        fail(join(prefix, key), line_of(*node),
             "unknown key '" + std::string(key) + "' in " + std::string(where) +
                 " (known keys: " + comma_list(known) + ")");
        return std::nullopt;
      }
      out.emplace_back(key, node);
    }
    return out;
  }

  bool read_string(const toml::node& node, const std::string& key, std::string& out) {
    const auto* value = node.as_string();
    if (value == nullptr) return wrong_type(key, node, "a string");
    out = value->get();
    return true;
  }

  bool read_bool(const toml::node& node, const std::string& key, bool& out) {
    const auto* value = node.as_boolean();
    if (value == nullptr) return wrong_type(key, node, "a boolean");
    out = value->get();
    return true;
  }

  bool read_integer(const toml::node& node, const std::string& key, std::int64_t min,
                    std::int64_t max, std::int64_t& out) {
    const auto* value = node.as_integer();
    if (value == nullptr) return wrong_type(key, node, "an integer");
    const std::int64_t got = value->get();
    if (got < min || got > max)
      return fail(key, line_of(node),
                  std::string(leaf(key)) + " must be between " + std::to_string(min) + " and " +
                      std::to_string(max) + " (got " + std::to_string(got) + ")");
    out = got;
    return true;
  }

  bool read_int32(const toml::node& node, const std::string& key, std::int32_t& out) {
    std::int64_t wide = 0;
    if (!read_integer(node, key, std::numeric_limits<std::int32_t>::min(),
                      std::numeric_limits<std::int32_t>::max(), wide))
      return false;
    out = static_cast<std::int32_t>(wide);
    return true;
  }

  bool read_ms(const toml::node& node, const std::string& key, std::chrono::milliseconds& out) {
    std::int64_t ms = 0;
    if (!read_integer(node, key, std::numeric_limits<std::int64_t>::min(),
                      std::numeric_limits<std::int64_t>::max(), ms))
      return false;
    out = std::chrono::milliseconds(ms);
    return true;
  }

  bool read_parallelism(const toml::node& node, const std::string& key, std::uint32_t& out) {
    std::int64_t value = 0;
    if (!read_integer(node, key, 1, parallelism_limit, value)) return false;
    out = static_cast<std::uint32_t>(value);
    return true;
  }

  const toml::table* table_at(const toml::node& node, const std::string& key,
                              std::string_view expected) {
    const toml::table* table = node.as_table();
    if (table == nullptr) wrong_type(key, node, expected);
    return table;
  }

  bool parse_root(const toml::table& root) {
    auto top = entries(root, "", "the job file", top_level_keys);
    if (!top) return false;
    if (const toml::node* node = find_entry(*top, "job")) {
      const toml::table* job = table_at(*node, "job", "a table ([job])");
      if (job == nullptr || !parse_job(*job)) return false;
    }
    if (const toml::node* node = find_entry(*top, "checkpointing")) {
      const toml::table* section = table_at(*node, "checkpointing", "a table ([checkpointing])");
      if (section == nullptr || !parse_checkpointing(*section)) return false;
    }
    if (const toml::node* node = find_entry(*top, "restart")) {
      const toml::table* section = table_at(*node, "restart", "a table ([restart])");
      if (section == nullptr || !parse_restart(*section)) return false;
    }
    const toml::node* node = find_entry(*top, "operator");
    if (node == nullptr)
      return fail("operator", std::max<std::uint32_t>(1, line_of(root)),
                  "the job has no operators: declare them as [[operator]] tables");
    const toml::array* list = node->as_array();
    if (list == nullptr) return wrong_type("operator", *node, "[[operator]] tables");
    if (list->empty())
      return fail("operator", line_of(*list),
                  "the job has no operators: declare them as [[operator]] tables");
    for (std::size_t i = 0; i < list->size(); ++i) {
      const toml::node& element = *list->get(i);
      const toml::table* table =
          table_at(element, index_key("operator", i), "an [[operator]] table");
      if (table == nullptr || !parse_operator(*table, i)) return false;
    }
    return true;
  }

  bool parse_job(const toml::table& table) {
    auto keys = entries(table, "job", "[job]", job_keys);
    if (!keys) return false;
    if (const toml::node* name = find_entry(*keys, "name")) {
      if (!read_string(*name, "job.name", job_name_)) return false;
      if (job_name_.empty()) return fail("job.name", line_of(*name), "name must not be blank");
    }
    if (const toml::node* p = find_entry(*keys, "parallelism"))
      if (!read_parallelism(*p, "job.parallelism", default_parallelism_)) return false;
    if (const toml::node* p = find_entry(*keys, "max_parallelism"))
      if (!read_parallelism(*p, "job.max_parallelism", default_max_parallelism_)) return false;
    return parse_program(*keys);
  }

  // A job a user program submits names the program its callables live in.
  bool parse_program(const entry_list& keys) {
    const toml::node* name = find_entry(keys, "program");
    const toml::node* fingerprint = find_entry(keys, "program_fingerprint");
    if (name == nullptr && fingerprint == nullptr) return true;
    if (fingerprint == nullptr)
      return fail("job.program", line_of(*name), "program needs program_fingerprint");
    job_program p;
    if (!read_string(*fingerprint, "job.program_fingerprint", p.fingerprint)) return false;
    if (auto why = program_fingerprint_problem(p.fingerprint))
      return fail("job.program_fingerprint", line_of(*fingerprint), *why);
    if (name != nullptr) {
      if (!read_string(*name, "job.program", p.name)) return false;
      if (p.name.empty()) return fail("job.program", line_of(*name), "program must not be blank");
      if (auto why = program_name_problem(p.name)) return fail("job.program", line_of(*name), *why);
    }
    program_ = std::move(p);
    return true;
  }

  bool parse_checkpointing(const toml::table& table) {
    const std::string prefix = "checkpointing";
    auto keys = entries(table, prefix, "[checkpointing]", checkpointing_keys);
    if (!keys) return false;
    checkpoint_config c;
    for (const auto& [name, node] : *keys) {
      const std::string key = join(prefix, name);
      bool ok = true;
      if (name == "interval_ms") {
        std::chrono::milliseconds interval{0};
        ok = read_ms(*node, key, interval);
        c.interval = interval;
      } else if (name == "timeout_ms") {
        ok = read_ms(*node, key, c.timeout);
      } else if (name == "aligned_checkpoint_timeout_ms") {
        ok = read_ms(*node, key, c.aligned_checkpoint_timeout);
      } else if (name == "max_in_flight_bytes") {
        ok = read_integer(*node, key, std::numeric_limits<std::int64_t>::min(),
                          std::numeric_limits<std::int64_t>::max(), c.max_in_flight_bytes);
      } else if (name == "buffer_debloat") {
        ok = read_bool(*node, key, c.buffer_debloat);
      } else if (name == "buffer_debloat_target_ms") {
        ok = read_ms(*node, key, c.buffer_debloat_target);
      } else if (name == "min_pause_ms") {
        ok = read_ms(*node, key, c.min_pause);
      } else if (name == "max_concurrent") {
        ok = read_int32(*node, key, c.max_concurrent);
      } else if (name == "tolerable_failures") {
        ok = read_int32(*node, key, c.tolerable_failures);
      } else if (name == "retained") {
        ok = read_int32(*node, key, c.retained);
      } else if (name == "stats_history_size") {
        ok = read_int32(*node, key, c.stats_history_size);
      } else if (name == "inline_state_max_bytes") {
        ok = read_int32(*node, key, c.inline_state_max_bytes);
      } else if (name == "incremental") {
        ok = read_bool(*node, key, c.incremental);
      } else if (name == "unaligned") {
        ok = read_bool(*node, key, c.unaligned);
      } else if (name == "checkpoint_dir") {
        ok = read_string(*node, key, c.checkpoint_dir);
      } else if (name == "savepoint_dir") {
        ok = read_string(*node, key, c.savepoint_dir);
      } else if (name == "state_backend") {
        ok = read_string(*node, key, c.state_backend);
      } else if (name == "mode") {
        std::string text;
        ok = read_string(*node, key, text);
        if (ok) {
          auto mode = parse_checkpointing_mode(text);
          if (!mode)
            return fail(key, line_of(*node),
                        "unknown mode '" + text + "' (expected exactly_once or at_least_once)");
          c.mode = *mode;
        }
      } else if (name == "retention") {
        std::string text;
        ok = read_string(*node, key, text);
        if (ok) {
          auto retention = parse_externalized_retention(text);
          if (!retention)
            return fail(key, line_of(*node),
                        "unknown retention '" + text +
                            "' (expected delete_on_cancellation or retain_on_cancellation)");
          c.retention = *retention;
        }
      }
      if (!ok) return false;
    }
    if (auto error = c.validate()) {
      // validate() opens with "checkpoint <setting>" and names settings like the keys here,
      // which is how the message finds its line.
      std::string_view rest = *error;
      constexpr std::string_view opening = "checkpoint ";
      if (rest.starts_with(opening)) rest.remove_prefix(opening.size());
      const std::string_view setting = rest.substr(0, rest.find(' '));
      if (const toml::node* node = find_entry(*keys, setting))
        return fail(join(prefix, setting), line_of(*node), *error);
      return fail(prefix, line_of(table), *error);
    }
    checkpointing_ = c;
    return true;
  }

  // [restart]: the strategy, then only the settings that strategy uses, so a setting that
  // would be silently ignored is reported instead.
  bool parse_restart(const toml::table& table) {
    const std::string prefix = "restart";
    auto keys = entries(table, prefix, "[restart]", restart_keys);
    if (!keys) return false;
    restart_strategy_config c;
    const toml::node* strategy = find_entry(*keys, "strategy");
    if (strategy == nullptr)
      return fail(join(prefix, "strategy"), line_of(table),
                  "missing required key 'strategy' (none, fixed_delay, exponential_backoff or "
                  "failure_rate)");
    std::string text;
    if (!read_string(*strategy, join(prefix, "strategy"), text)) return false;
    auto type = parse_restart_strategy(text);
    if (!type)
      return fail(join(prefix, "strategy"), line_of(*strategy),
                  "unknown strategy '" + text +
                      "' (expected none, fixed_delay, exponential_backoff or failure_rate)");
    c.type = *type;
    for (const auto& [name, node] : *keys) {
      if (name == "strategy") continue;
      const std::string key = join(prefix, name);
      if (!restart_setting_applies(c.type, name)) {
        std::vector<std::string_view> used;
        for (std::string_view k : restart_keys)
          if (restart_setting_applies(c.type, k)) used.push_back(k);
        return fail(key, line_of(*node),
                    std::string(name) + " does not apply to strategy '" + text + "' (" +
                        (used.empty() ? std::string("it takes no settings")
                                      : "its settings: " + comma_list(used)) +
                        ")");
      }
      bool ok = true;
      if (name == "max_attempts") {
        ok = read_int32(*node, key, c.max_attempts);
      } else if (name == "max_failures_per_interval") {
        ok = read_int32(*node, key, c.max_failures_per_interval);
      } else if (name == "backoff_multiplier") {
        if (const auto* f = node->as_floating_point())
          c.backoff_multiplier = f->get();
        else if (const auto* i = node->as_integer())
          c.backoff_multiplier = static_cast<double>(i->get());
        else
          ok = wrong_type(key, *node, "a number");
      } else {
        std::int64_t* target = name == "delay_ms"                 ? &c.delay_ms
                               : name == "initial_backoff_ms"     ? &c.initial_backoff_ms
                               : name == "max_backoff_ms"         ? &c.max_backoff_ms
                               : name == "reset_backoff_after_ms" ? &c.reset_backoff_after_ms
                                                                  : &c.failure_rate_interval_ms;
        ok = read_integer(*node, key, std::numeric_limits<std::int64_t>::min(),
                          std::numeric_limits<std::int64_t>::max(), *target);
      }
      if (!ok) return false;
    }
    if (auto error = c.validate()) {
      // validate() opens with "restart <setting>", the setting named like the key here.
      std::string_view rest = *error;
      constexpr std::string_view opening = "restart ";
      if (rest.starts_with(opening)) rest.remove_prefix(opening.size());
      const std::string_view setting = rest.substr(0, rest.find(' '));
      if (const toml::node* node = find_entry(*keys, setting))
        return fail(join(prefix, setting), line_of(*node), *error);
      return fail(prefix, line_of(table), *error);
    }
    restart_ = c;
    return true;
  }

  bool parse_operator(const toml::table& table, std::size_t index) {
    operator_decl op;
    op.path = index_key("operator", index);
    op.line = line_of(table);
    auto keys = entries(table, op.path, "[[operator]]", operator_keys);
    if (!keys) return false;
    auto find = [&](std::string_view name) { return find_entry(*keys, name); };
    const std::string uid_key = join(op.path, "uid");
    const std::string kind_key = join(op.path, "kind");

    const toml::node* uid = find("uid");
    if (uid == nullptr)
      return fail(uid_key, op.line, "missing required key 'uid' (every operator needs one)");
    if (!read_string(*uid, uid_key, op.uid)) return false;
    op.uid_line = line_of(*uid);
    if (op.uid.empty()) return fail(uid_key, op.uid_line, "uid must not be blank");
    if (auto it = by_uid_.find(op.uid); it != by_uid_.end()) {
      const operator_decl& first = operators_[it->second];
      return fail(uid_key, op.uid_line,
                  "duplicate uid '" + op.uid + "' (already used by " + first.path + " on line " +
                      std::to_string(first.uid_line) + ")");
    }
    const std::string who = "operator '" + op.uid + "'";

    const toml::node* kind = find("kind");
    if (kind == nullptr) return fail(kind_key, op.line, who + ": missing required key 'kind'");
    std::string kind_name;
    if (!read_string(*kind, kind_key, kind_name)) return false;
    std::optional<operator_role> role;
    if (const toml::node* node = find("role")) {
      const std::string role_key = join(op.path, "role");
      std::string text;
      if (!read_string(*node, role_key, text)) return false;
      role = parse_role(text);
      if (!role)
        return fail(role_key, line_of(*node),
                    who + ": unknown role '" + text +
                        "' (expected source, transform, keyed or sink)");
      if (const operator_kind* known = registry_.find(kind_name); known && known->role != *role)
        return fail(role_key, line_of(*node),
                    who + ": operator kind '" + kind_name + "' is a " +
                        std::string(to_string(known->role)) + ", not a " + text);
    }
    op.kind = registry_.find(kind_name);
    if (op.kind == nullptr && !role)
      return fail(kind_key, line_of(*kind),
                  who + ": unknown operator kind '" + kind_name +
                      "' (known kinds: " + comma_list(registry_.names()) +
                      "); a kind only your workers know needs role = "
                      "source|transform|keyed|sink");
    if (op.kind == nullptr) {
      // A deque keeps earlier kinds where they are, so the pointers in operators_ stay good.
      op.kind = &custom_kinds_.emplace_back(
          operator_kind{kind_name, *role, {}, "custom kind, known only to the workers"});
      op.custom = true;
    }
    // The built-in kinds that run a C++ callable: a job file carries none, so only a job a
    // user program submitted (naming its fingerprint) can run on workers that have them.
    if (!op.custom && kind_name.starts_with("user_") && !program_)
      return fail(kind_key, line_of(*kind),
                  who + ": operator kind '" + kind_name +
                      "' runs a C++ callable, which a job file cannot carry: submit the job "
                      "from its program (PROGRAM submit), which names its program_fingerprint");

    op.name = op.kind->name;  // what stream_environment names an operator too
    if (const toml::node* name = find("name")) {
      const std::string key = join(op.path, "name");
      if (!read_string(*name, key, op.name)) return false;
      if (op.name.empty()) return fail(key, line_of(*name), who + ": name must not be blank");
    }

    op.parallelism = default_parallelism_;
    if (const toml::node* p = find("parallelism"))
      if (!read_parallelism(*p, join(op.path, "parallelism"), op.parallelism)) return false;
    op.max_parallelism = std::max(default_max_parallelism_, op.parallelism);
    if (const toml::node* p = find("max_parallelism")) {
      const std::string key = join(op.path, "max_parallelism");
      if (!read_parallelism(*p, key, op.max_parallelism)) return false;
      if (op.max_parallelism < op.parallelism)
        return fail(key, line_of(*p),
                    who + ": max_parallelism must be at least the parallelism (" +
                        std::to_string(op.parallelism) + "), got " +
                        std::to_string(op.max_parallelism));
    }

    if (!parse_inputs(find("input"), find("inputs"), op)) return false;
    if (!parse_partition(find("partition"), op)) return false;
    if (!parse_params(find("params"), op)) return false;

    by_uid_.emplace(op.uid, operators_.size());
    operators_.push_back(std::move(op));
    return true;
  }

  bool parse_inputs(const toml::node* input, const toml::node* inputs, operator_decl& op) {
    const std::string who = "operator '" + op.uid + "'";
    if (input != nullptr && inputs != nullptr)
      return fail(join(op.path, "inputs"), line_of(*inputs),
                  who + ": set either input or inputs, not both");
    if (input != nullptr) {
      op.inputs_key = join(op.path, "input");
      op.inputs_line = line_of(*input);
      input_ref ref{"", op.inputs_key, op.inputs_line};
      if (!read_string(*input, op.inputs_key, ref.uid)) return false;
      op.inputs.push_back(std::move(ref));
    } else if (inputs != nullptr) {
      op.inputs_key = join(op.path, "inputs");
      op.inputs_line = line_of(*inputs);
      const toml::array* list = inputs->as_array();
      if (list == nullptr) return wrong_type(op.inputs_key, *inputs, "an array of operator uids");
      if (list->empty())
        return fail(op.inputs_key, op.inputs_line,
                    who + ": inputs must name at least one operator");
      for (std::size_t i = 0; i < list->size(); ++i) {
        const toml::node& element = *list->get(i);
        input_ref ref{"", join(op.path, index_key("inputs", i)), line_of(element)};
        if (!read_string(element, ref.key, ref.uid)) return false;
        op.inputs.push_back(std::move(ref));
      }
    }
    const bool source = op.kind->role == operator_role::source;
    if (source && !op.inputs.empty())
      return fail(op.inputs_key, op.inputs_line,
                  who + " is a source (" + op.kind->name + ") and takes no input");
    if (!source && op.inputs.empty())
      return fail(join(op.path, "input"), op.line,
                  who + " (" + op.kind->name +
                      ") needs an input: set input = \"<uid>\" or inputs = [\"<uid>\", ...]");
    return true;
  }

  bool parse_partition(const toml::node* node, operator_decl& op) {
    if (node == nullptr) return true;
    op.part_key = join(op.path, "partition");
    op.part_line = line_of(*node);
    std::string text;
    if (!read_string(*node, op.part_key, text)) return false;
    op.part = parse_partitioning(text);
    if (!op.part)
      return fail(op.part_key, op.part_line,
                  "unknown partition '" + text +
                      "' (expected forward, hash, rebalance or broadcast)");
    if (op.kind->role == operator_role::source)
      return fail(op.part_key, op.part_line,
                  "operator '" + op.uid + "' is a source: partition applies to inputs and it has "
                  "none");
    if (op.kind->role == operator_role::keyed && *op.part != partitioning::hash)
      return fail(op.part_key, op.part_line,
                  "operator '" + op.uid + "' is keyed (" + op.kind->name +
                      ") and reads its inputs by key: partition must be hash (got " + text + ")");
    return true;
  }

  bool parse_params(const toml::node* node, operator_decl& op) {
    const std::string params_key = join(op.path, "params");
    std::uint32_t params_line = op.line;
    std::map<std::string, std::uint32_t> lines;
    if (node != nullptr && op.custom) {
      // No spec to check against: the worker's operator factory does that when the task starts.
      // Values still have to be ones a parameter can hold.
      const toml::table* table = table_at(*node, params_key, "a table of parameters");
      if (table == nullptr) return false;
      for (const auto& [name_view, value_node] : in_file_order(*table)) {
        const std::string name(name_view);
        const std::string key = join(params_key, name);
        std::string text;
        if (value_node->is_integer()) {
          text = std::to_string(value_node->as_integer()->get());
        } else if (value_node->is_boolean()) {
          text = value_node->as_boolean()->get() ? "true" : "false";
        } else if (value_node->is_string()) {
          text = value_node->as_string()->get();
        } else {
          return wrong_type(key, *value_node, "a string, an integer or a boolean");
        }
        op.params.emplace(name, std::move(text));
      }
      return true;
    }
    if (op.custom) return true;
    if (node != nullptr) {
      params_line = line_of(*node);
      const toml::table* table = table_at(*node, params_key, "a table of parameters");
      if (table == nullptr) return false;
      std::vector<std::string_view> names;
      for (const auto& spec : op.kind->params) names.push_back(spec.name);
      for (const auto& [name_view, value_node] : in_file_order(*table)) {
        const std::string name(name_view);
        const toml::node& value = *value_node;
        const std::string key = join(params_key, name);
        const param_spec* spec = op.kind->find_param(name);
        if (spec == nullptr) {
          // check_params words it as validate() would; the hint lists what the kind takes.
          auto message = check_params(*op.kind, {{name, ""}});
          std::string hint = names.empty() ? " (it takes no parameters)"
                                           : " (known parameters: " + comma_list(names) + ")";
          return fail(key, line_of(value),
                      message.value_or("unknown parameter '" + name + "'") + hint);
        }
        std::string text;
        if (!param_text(value, key, spec->type, text)) return false;
        op.params.emplace(name, std::move(text));
        lines.emplace(name, line_of(value));
      }
    }
    if (auto error = check_params(*op.kind, op.params)) {
      // A parameter out of its bounds, a blank path, parameters that do not fit together or a
      // missing required one: name the first parameter the message names in the key.
      for (const auto& spec : op.kind->params)
        if (error->find("'" + spec.name + "'") != std::string::npos) {
          auto it = lines.find(spec.name);
          return fail(join(params_key, spec.name), it == lines.end() ? params_line : it->second,
                      "operator '" + op.uid + "': " + *error);
        }
      return fail(params_key, params_line, "operator '" + op.uid + "': " + *error);
    }
    return true;
  }

  // Parameters are kept as strings (job_vertex::params); the TOML type must match the spec's.
  bool param_text(const toml::node& value, const std::string& key, param_type type,
                  std::string& out) {
    switch (type) {
      case param_type::integer:
        if (const auto* v = value.as_integer()) {
          out = std::to_string(v->get());
          return true;
        }
        return wrong_type(key, value, "an integer");
      case param_type::boolean:
        if (const auto* v = value.as_boolean()) {
          out = v->get() ? "true" : "false";
          return true;
        }
        return wrong_type(key, value, "a boolean");
      case param_type::string:
        return read_string(value, key, out);
    }
    return wrong_type(key, value, "a parameter value");
  }

  bool resolve_inputs() {
    for (auto& op : operators_) {
      std::set<std::size_t> seen;
      for (const auto& ref : op.inputs) {
        auto it = by_uid_.find(ref.uid);
        if (it == by_uid_.end())
          return fail(ref.key, ref.line,
                      "operator '" + op.uid + "': input '" + ref.uid + "' names no operator");
        const operator_decl& input = operators_[it->second];
        if (input.kind->role == operator_role::sink)
          return fail(ref.key, ref.line,
                      "operator '" + op.uid + "': input '" + ref.uid + "' is a sink (" +
                          input.kind->name + "), which has no output");
        if (!seen.insert(it->second).second)
          return fail(ref.key, ref.line,
                      "operator '" + op.uid + "': input '" + ref.uid + "' is listed twice");
        op.input_decls.push_back(it->second);
      }
    }
    return true;
  }

  // Kahn's algorithm, taking the earliest declared operator among the ready ones so a file
  // written inputs-first keeps its order.
  bool sort_topologically(std::vector<std::size_t>& order) {
    const std::size_t n = operators_.size();
    std::vector<std::size_t> pending(n);
    std::vector<std::vector<std::size_t>> outputs(n);
    std::set<std::size_t> ready;
    for (std::size_t i = 0; i < n; ++i) {
      pending[i] = operators_[i].input_decls.size();
      for (std::size_t input : operators_[i].input_decls) outputs[input].push_back(i);
      if (pending[i] == 0) ready.insert(i);
    }
    while (!ready.empty()) {
      const std::size_t i = *ready.begin();
      ready.erase(ready.begin());
      order.push_back(i);
      for (std::size_t next : outputs[i])
        if (--pending[next] == 0) ready.insert(next);
    }
    if (order.size() == n) return true;

    // Everything left waits on another leftover, so walking leftover inputs from the first
    // leftover operator must come back to an operator already walked: that loop is a cycle.
    std::size_t start = 0;
    while (pending[start] == 0) ++start;
    std::vector<std::size_t> walk;
    std::vector<std::size_t> position(n, n);
    std::size_t current = start;
    while (position[current] == n) {
      position[current] = walk.size();
      walk.push_back(current);
      for (std::size_t input : operators_[current].input_decls)
        if (pending[input] != 0) {
          current = input;
          break;
        }
    }
    // walk[position[current]..] follows inputs backwards; report the cycle in data-flow order
    // from its earliest declared operator.
    std::vector<std::size_t> cycle(walk.begin() + static_cast<std::ptrdiff_t>(position[current]),
                                   walk.end());
    std::reverse(cycle.begin(), cycle.end());
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    const operator_decl& first = operators_[cycle.front()];
    std::string path;
    for (std::size_t i : cycle) path += operators_[i].uid + " -> ";
    path += first.uid;
    return fail(first.inputs_key, first.inputs_line,
                "operator '" + first.uid + "' is on a cycle: " + path);
  }

  partitioning partition_of(const operator_decl& op, const operator_decl& input) const {
    if (op.part) return *op.part;
    if (op.kind->role == operator_role::keyed) return partitioning::hash;
    // Flink's rule, as stream_graph applies it.
    return input.parallelism == op.parallelism ? partitioning::forward : partitioning::rebalance;
  }

  bool check_partitions() {
    for (const auto& op : operators_)
      for (std::size_t i : op.input_decls) {
        const operator_decl& input = operators_[i];
        if (partition_of(op, input) == partitioning::forward &&
            input.parallelism != op.parallelism)
          return fail(op.part_key, op.part_line,
                      "forward partition from '" + input.uid + "' (parallelism " +
                          std::to_string(input.parallelism) + ") to '" + op.uid +
                          "' (parallelism " + std::to_string(op.parallelism) +
                          ") needs equal parallelism; use hash, rebalance or broadcast");
      }
    return true;
  }

  job_graph build(const std::vector<std::size_t>& order) const {
    job_graph g;
    g.id = generate_job_id();
    g.name = job_name_;
    std::vector<vertex_id> id_of(operators_.size());
    for (std::size_t pos = 0; pos < order.size(); ++pos)
      id_of[order[pos]] = static_cast<vertex_id>(pos);
    for (std::size_t i : order) {
      const operator_decl& op = operators_[i];
      job_vertex v;
      v.id = id_of[i];
      v.name = op.name;
      v.uid = op.uid;
      v.kind = op.kind->name;
      v.params = op.params;
      v.parallelism = op.parallelism;
      v.max_parallelism = op.max_parallelism;
      if (op.custom) v.custom_role = op.kind->role;
      g.vertices.push_back(std::move(v));
    }
    for (std::size_t i : order) {
      const operator_decl& op = operators_[i];
      for (std::size_t input : op.input_decls)
        g.edges.push_back({id_of[input], id_of[i], partition_of(op, operators_[input])});
    }
    if (checkpointing_) g.checkpointing = make_checkpointing_settings(g, *checkpointing_);
    g.restart = restart_;
    g.program = program_;
    return g;
  }

  // validate() is the same check every other way of making a job graph goes through; the
  // checks above should leave it nothing to find, but if it does the message gets the line of
  // the operator it names.
  bool check_graph(const job_graph& graph) {
    auto error = validate(graph, registry_);
    if (!error) return true;
    const operator_decl* named = nullptr;
    std::size_t earliest = std::string::npos;
    for (const auto& op : operators_) {
      std::size_t at = error->find("vertex '" + op.uid + "'");
      if (at < earliest) {
        earliest = at;
        named = &op;
      }
    }
    if (named != nullptr) return fail(named->path, named->line, *error);
    return fail("operator", operators_.front().line, *error);
  }

  std::string file_;
  const operator_registry& registry_;
  std::optional<job_file_error> error_;
  std::string job_name_;
  std::uint32_t default_parallelism_ = 1;
  std::uint32_t default_max_parallelism_ = 1;
  std::optional<checkpoint_config> checkpointing_;
  std::optional<restart_strategy_config> restart_;
  std::optional<job_program> program_;
  std::vector<operator_decl> operators_;
  std::map<std::string, std::size_t, std::less<>> by_uid_;
  std::deque<operator_kind> custom_kinds_;  // shapes of custom kinds, one per operator using one
};

}  // namespace

job_file_result parse_job_file(std::string_view text, std::string_view source_name,
                               const operator_registry& registry) {
  // The parser reports problems as values; what is left to catch is running out of memory.
  try {
    job_file_parser parser(source_name, registry);
    return parser.run(text);
  } catch (const std::exception& e) {
    return job_file_error{std::string(source_name), "", 0,
                          std::string("cannot load job file: ") + e.what()};
  }
}

job_file_result load_job_file(const std::filesystem::path& path,
                              const operator_registry& registry) {
  const std::string name = path.string();
  auto error = [&](std::string message) {
    return job_file_error{name, "", 0, "cannot read job file: " + std::move(message)};
  };
  try {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (status.type() == std::filesystem::file_type::not_found)
      return error("no such file");
    if (ec) return error(ec.message());
    if (std::filesystem::is_directory(status)) return error("it is a directory");
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > max_job_file_bytes)
      return error("larger than " + std::to_string(max_job_file_bytes / (1024 * 1024)) +
                   " MiB (" + std::to_string(size) + " bytes)");
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return error("read failed");
    return parse_job_file(text.str(), name, registry);
  } catch (const std::exception& e) {
    return error(e.what());
  }
}

}  // namespace snapflow
