#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace snapflow {

// What place an operator takes in a dataflow; it decides how many inputs a vertex may have.
enum class operator_role : std::uint8_t {
  source,     // no inputs; a checkpoint trigger vertex
  transform,  // one or more inputs, stateless per record
  keyed,      // one or more hash-partitioned inputs, keyed state
  sink,       // one or more inputs, no outputs
};

std::string_view to_string(operator_role role);

// Which old subtasks' operator state (a source's offset, a sink's pending transactions, not keyed
// state) each new subtask receives when a job restores, at the same or another parallelism.
// Keyed state needs no declaration: it always follows its key groups (the old subtasks whose
// key-group range overlaps the new subtask's). docs/architecture.md, "Restoring state", has the
// contract; engine/jobmaster/state_assignment.hpp applies it.
enum class operator_state_redistribution : std::uint8_t {
  // Every new subtask receives every old subtask's state and picks what it needs. Always
  // correct, but each of p subtasks reads p states: the default for kinds that declare nothing.
  union_all,
  // Old subtask i's state goes to new subtask i % p, and only there: at unchanged parallelism
  // each subtask gets exactly its own. For state that is owned by one subtask and may move
  // whole to another (offsets of a split, a sink's transactions).
  round_robin,
  // Split sources (engine/runtime/source_splits.hpp): split j of max-parallelism-many belongs
  // to subtask j % p. New subtask i receives every old subtask that owned a split it owns now,
  // { j % p_old : j = i, i + p, ... < max parallelism }: its own alone at unchanged
  // parallelism, and max-parallelism-many states over all subtasks, never p^2.
  split_modulo,
};

enum class param_type : std::uint8_t { integer, string, boolean };

struct param_spec {
  std::string name;
  param_type type = param_type::string;
  bool required = false;
  std::string default_value;  // empty when there is none
  std::string help;
  // A file or folder the operator reads or writes. Confined to the data roots of the workers
  // (their --data-root): checked by the coordinator at submission and by the worker at
  // deployment, and relative values resolve against the worker's first data root. Never blank.
  bool is_path = false;
  // An integer's bounds, inclusive: a value outside them is refused at submission, not by the
  // task at run time (where it would fail every restart the same way).
  std::optional<std::int64_t> min;
  std::optional<std::int64_t> max;
};

struct operator_kind {
  std::string name;
  operator_role role = operator_role::transform;
  std::vector<param_spec> params;
  std::string help;
  operator_state_redistribution redistribution = operator_state_redistribution::union_all;
  // What one parameter's spec cannot say (e.g. remainder < modulus): a message, or nothing.
  // Runs after every parameter passed its own checks.
  std::optional<std::string> (*check_together)(
      const std::map<std::string, std::string>& params) = nullptr;

  const param_spec* find_param(std::string_view param) const;
};

// The operator kinds a job may name. The graph layer only knows their shape (role and
// parameters); engine/runtime maps each kind to an implementation. A custom worker binary adds
// its own kinds to both.
class operator_registry {
 public:
  // The kinds snapflow ships with (sources, transforms, keyed aggregations, sinks).
  static const operator_registry& builtin();

  // Adds a kind; throws std::invalid_argument on a blank or duplicate name.
  void add(operator_kind kind);
  const operator_kind* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, operator_kind, std::less<>> kinds_;
};

// Checks `params` against `kind`: every key known, every required key present, integers and
// booleans well-formed, integers within their bounds, paths not blank, then the kind's
// check_together. Returns a message naming the first offending key, or nothing.
std::optional<std::string> check_params(const operator_kind& kind,
                                        const std::map<std::string, std::string>& params);

}  // namespace snapflow
