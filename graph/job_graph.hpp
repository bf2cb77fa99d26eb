#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "graph/checkpoint_config.hpp"
#include "graph/ids.hpp"
#include "graph/operator_registry.hpp"
#include "graph/restart_strategy_config.hpp"
#include "graph/user_function.hpp"

namespace snapflow {

// How records of one vertex's subtasks are spread over the next vertex's subtasks.
enum class partitioning : std::uint8_t {
  forward,    // subtask i -> subtask i; needs equal parallelism
  hash,       // by key group of record.key (key groups = the target's max parallelism)
  rebalance,  // round robin
  broadcast,  // every record to every subtask
};

std::string_view to_string(partitioning p);
std::optional<partitioning> parse_partitioning(std::string_view text);

struct job_vertex {
  vertex_id id = 0;
  std::string name;
  std::string uid;  // stable across job versions; state is matched to operators by it
  std::string kind;
  std::map<std::string, std::string> params;
  std::uint32_t parallelism = 1;
  std::uint32_t max_parallelism = 128;
  // The declared role of a kind only the workers know (registered by a custom worker binary).
  // With it the coordinator can check the graph's shape without knowing the kind; the worker's
  // operator factory checks `params` when the task starts. Absent for built-in kinds.
  std::optional<operator_role> custom_role;
  // Set only for vertices declared with a C++ callable; never serialized.
  std::shared_ptr<const user_function> function;

  bool operator==(const job_vertex& o) const {
    return id == o.id && name == o.name && uid == o.uid && kind == o.kind &&
           params == o.params && parallelism == o.parallelism &&
           max_parallelism == o.max_parallelism && custom_role == o.custom_role;
  }
};

struct job_edge {
  vertex_id source = 0;
  vertex_id target = 0;
  partitioning part = partitioning::forward;

  bool operator==(const job_edge&) const = default;
};

// Which vertices take part in checkpoints, Flink's JobCheckpointingSettings: the coordinator
// triggers the sources, waits for every vertex to acknowledge, and confirms to every vertex.
struct job_checkpointing_settings {
  std::vector<vertex_id> to_trigger;
  std::vector<vertex_id> to_acknowledge;
  std::vector<vertex_id> to_confirm;
  checkpoint_config config;

  bool operator==(const job_checkpointing_settings&) const = default;
};

// The user program a job's C++ callables live in (snapflow::run_program, cmd/program.hpp):
// callables are never serialized, so only workers started from that program can run the job.
// The fingerprint identifies the program's job graph (docs/api.md, "Running a program on a
// cluster"); the coordinator deploys the job only to workers that registered it.
struct job_program {
  std::string name;         // what the user called the program and its version, for messages
  std::string fingerprint;  // hex, not blank

  bool operator==(const job_program&) const = default;
};

struct job_graph {
  job_id id;
  std::string name;
  std::vector<job_vertex> vertices;  // in topological order once validated
  std::vector<job_edge> edges;
  std::optional<job_checkpointing_settings> checkpointing;
  // The job's own restart strategy; absent means the coordinator's default applies.
  std::optional<restart_strategy_config> restart;
  // Set when the job was submitted by a user program: which one its callables need.
  std::optional<job_program> program;

  static constexpr std::uint32_t max_parallelism_limit = 32768;

  const job_vertex* find_vertex(vertex_id id) const;
  const job_vertex* find_vertex_by_uid(std::string_view uid) const;
  std::vector<const job_edge*> inputs_of(vertex_id id) const;
  std::vector<const job_edge*> outputs_of(vertex_id id) const;

  bool operator==(const job_graph&) const = default;
};

// Structural checks shared by every way a job graph is made (the C++ API, job files, msgpack
// from the wire): known kinds and parameters (a kind the registry lacks is accepted when the
// vertex declares its custom_role; its parameters are left to the worker), input counts that fit
// each role, no cycles, parallelism within [1, max parallelism], forward edges between equal
// parallelisms, hash edges into keyed vertices, unique ids and uids. Returns the first problem,
// naming the vertex.
std::optional<std::string> validate(const job_graph& graph, const operator_registry& registry);

// Fills `checkpointing` from `config`: trigger the sources, acknowledge and confirm all.
job_checkpointing_settings make_checkpointing_settings(const job_graph& graph,
                                                       const checkpoint_config& config);

// Why `fingerprint` cannot be a program fingerprint (1 to 128 lowercase hex digits), or
// nothing.
std::optional<std::string> program_fingerprint_problem(std::string_view fingerprint);

// Why `name` cannot be a program's name (at most 256 printable ASCII characters: it is echoed
// in logs, REST answers and refusals), or nothing.
std::optional<std::string> program_name_problem(std::string_view name);

// A random 32-hex-digit job id, like Flink's JobID.
job_id generate_job_id();

std::ostream& operator<<(std::ostream& os, const job_vertex& v);
std::ostream& operator<<(std::ostream& os, const job_edge& e);
std::ostream& operator<<(std::ostream& os, const job_graph& g);

}  // namespace snapflow
