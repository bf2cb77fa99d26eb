#include "graph/job_graph.hpp"

#include <algorithm>
#include <random>
#include <set>
#include <unordered_map>

namespace snapflow {

std::string_view to_string(partitioning p) {
  switch (p) {
    case partitioning::forward:
      return "forward";
    case partitioning::hash:
      return "hash";
    case partitioning::rebalance:
      return "rebalance";
    case partitioning::broadcast:
      return "broadcast";
  }
  return "unknown";
}

std::optional<partitioning> parse_partitioning(std::string_view text) {
  if (text == "forward") return partitioning::forward;
  if (text == "hash") return partitioning::hash;
  if (text == "rebalance") return partitioning::rebalance;
  if (text == "broadcast") return partitioning::broadcast;
  return std::nullopt;
}

const job_vertex* job_graph::find_vertex(vertex_id vid) const {
  for (const auto& v : vertices)
    if (v.id == vid) return &v;
  return nullptr;
}

const job_vertex* job_graph::find_vertex_by_uid(std::string_view uid) const {
  for (const auto& v : vertices)
    if (v.uid == uid) return &v;
  return nullptr;
}

std::vector<const job_edge*> job_graph::inputs_of(vertex_id vid) const {
  std::vector<const job_edge*> out;
  for (const auto& e : edges)
    if (e.target == vid) out.push_back(&e);
  return out;
}

std::vector<const job_edge*> job_graph::outputs_of(vertex_id vid) const {
  std::vector<const job_edge*> out;
  for (const auto& e : edges)
    if (e.source == vid) out.push_back(&e);
  return out;
}

namespace {

std::string describe(const job_vertex& v) {
  return "vertex '" + (v.uid.empty() ? std::to_string(v.id) : v.uid) + "'";
}

}  // namespace

std::optional<std::string> validate(const job_graph& graph, const operator_registry& registry) {
  if (graph.vertices.empty()) return std::string("job has no operators");
  if (graph.restart)
    if (auto error = graph.restart->validate()) return error;
  if (graph.program) {
    if (auto error = program_name_problem(graph.program->name)) return *error;
    if (auto error = program_fingerprint_problem(graph.program->fingerprint))
      return "program '" + graph.program->name + "': " + *error;
  }
  std::unordered_map<vertex_id, const job_vertex*> by_id;
  std::set<std::string, std::less<>> uids;
  for (const auto& v : graph.vertices) {
    if (!by_id.emplace(v.id, &v).second)
      return "duplicate vertex id " + std::to_string(v.id);
    if (!v.uid.empty() && !uids.insert(v.uid).second) return "duplicate uid '" + v.uid + "'";
    const operator_kind* kind = registry.find(v.kind);
    if (kind == nullptr && !v.custom_role)
      return describe(v) + ": unknown operator kind '" + v.kind +
             "'; a kind only your workers know needs role = source|transform|keyed|sink";
    if (kind != nullptr && v.custom_role && *v.custom_role != kind->role)
      return describe(v) + ": operator kind '" + v.kind + "' is a " +
             std::string(to_string(kind->role)) + ", not a " +
             std::string(to_string(*v.custom_role));
    // A custom kind's parameters are the worker's to check: the coordinator has no spec.
    if (kind != nullptr)
      if (auto error = check_params(*kind, v.params)) return describe(v) + ": " + *error;
    if (v.parallelism < 1 || v.parallelism > job_graph::max_parallelism_limit)
      return describe(v) + ": parallelism must be between 1 and 32768 (got " +
             std::to_string(v.parallelism) + ")";
    if (v.max_parallelism < v.parallelism || v.max_parallelism > job_graph::max_parallelism_limit)
      return describe(v) + ": max_parallelism must be between parallelism (" +
             std::to_string(v.parallelism) + ") and 32768 (got " +
             std::to_string(v.max_parallelism) + ")";
  }
  std::set<std::pair<vertex_id, vertex_id>> seen_edges;
  for (const auto& e : graph.edges) {
    auto src = by_id.find(e.source);
    auto dst = by_id.find(e.target);
    if (src == by_id.end())
      return "edge into vertex " + std::to_string(e.target) + " has unknown input " +
             std::to_string(e.source);
    if (dst == by_id.end())
      return "edge from vertex " + std::to_string(e.source) + " has unknown target " +
             std::to_string(e.target);
    if (!seen_edges.emplace(e.source, e.target).second)
      return describe(*dst->second) + ": input " + describe(*src->second) + " listed twice";
    if (e.part == partitioning::forward && src->second->parallelism != dst->second->parallelism)
      return "forward edge from " + describe(*src->second) + " (parallelism " +
             std::to_string(src->second->parallelism) + ") to " + describe(*dst->second) +
             " (parallelism " + std::to_string(dst->second->parallelism) +
             ") needs equal parallelism; use hash, rebalance or broadcast";
  }
  // Adjacency once, so validating a large graph from the wire stays linear.
  std::unordered_map<vertex_id, std::vector<const job_edge*>> inputs_by_vertex, outputs_by_vertex;
  for (const auto& e : graph.edges) {
    inputs_by_vertex[e.target].push_back(&e);
    outputs_by_vertex[e.source].push_back(&e);
  }
  for (const auto& v : graph.vertices) {
    const operator_kind* kind = registry.find(v.kind);
    const operator_role role = kind != nullptr ? kind->role : *v.custom_role;
    const auto& inputs = inputs_by_vertex[v.id];
    const auto& outputs = outputs_by_vertex[v.id];
    if (role == operator_role::source && !inputs.empty())
      return describe(v) + ": a source (" + v.kind + ") takes no inputs";
    if (role != operator_role::source && inputs.empty())
      return describe(v) + ": missing input (" + v.kind + " needs at least one)";
    if (role == operator_role::sink && !outputs.empty())
      return describe(v) + ": a sink (" + v.kind + ") has no outputs";
    if (role == operator_role::keyed)
      for (const auto* e : inputs)
        if (e->part != partitioning::hash)
          return describe(v) + ": keyed operator " + v.kind +
                 " needs hash-partitioned inputs (key_by), got " +
                 std::string(to_string(e->part));
  }
  // Kahn's algorithm: anything left with inputs after peeling sits on a cycle.
  std::unordered_map<vertex_id, std::size_t> indegree;
  for (const auto& v : graph.vertices) indegree[v.id] = 0;
  for (const auto& e : graph.edges) ++indegree[e.target];
  std::vector<vertex_id> ready;
  for (const auto& v : graph.vertices)
    if (indegree[v.id] == 0) ready.push_back(v.id);
  std::size_t visited = 0;
  while (!ready.empty()) {
    vertex_id id = ready.back();
    ready.pop_back();
    ++visited;
    for (const auto* e : outputs_by_vertex[id])
      if (--indegree[e->target] == 0) ready.push_back(e->target);
  }
  if (visited != graph.vertices.size()) {
    for (const auto& v : graph.vertices)
      if (indegree[v.id] != 0) return "cycle through " + describe(v);
  }
  if (graph.checkpointing) {
    for (const auto* list : {&graph.checkpointing->to_trigger,
                             &graph.checkpointing->to_acknowledge,
                             &graph.checkpointing->to_confirm})
      for (vertex_id id : *list)
        if (!by_id.contains(id))
          return "checkpoint settings name unknown vertex " + std::to_string(id);
    if (auto error = graph.checkpointing->config.validate()) return *error;
  }
  return std::nullopt;
}

job_checkpointing_settings make_checkpointing_settings(const job_graph& graph,
                                                       const checkpoint_config& config) {
  job_checkpointing_settings s;
  s.config = config;
  std::set<vertex_id> has_input;
  for (const auto& e : graph.edges) has_input.insert(e.target);
  for (const auto& v : graph.vertices) {
    if (!has_input.contains(v.id)) s.to_trigger.push_back(v.id);
    s.to_acknowledge.push_back(v.id);
    s.to_confirm.push_back(v.id);
  }
  return s;
}

std::optional<std::string> program_fingerprint_problem(std::string_view fingerprint) {
  if (fingerprint.empty() || fingerprint.size() > 128)
    return "a program fingerprint is 1 to 128 hex digits, not " +
           std::to_string(fingerprint.size()) + " characters";
  for (char c : fingerprint)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return std::string("a program fingerprint is lowercase hex digits only");
  return std::nullopt;
}

std::optional<std::string> program_name_problem(std::string_view name) {
  if (name.size() > 256)
    return "a program name is at most 256 characters, not " + std::to_string(name.size());
  for (char c : name)
    if (c < 0x20 || c > 0x7e) return std::string("a program name is printable ASCII only");
  return std::nullopt;
}

job_id generate_job_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = rng();
    for (int i = 0; i < 16; ++i) id[half * 16 + i] = hex[(bits >> (i * 4)) & 0xf];
  }
  return id;
}

std::ostream& operator<<(std::ostream& os, const job_vertex& v) {
  os << "job_vertex{id=" << v.id << ", uid=" << v.uid << ", kind=" << v.kind
     << ", parallelism=" << v.parallelism << ", max_parallelism=" << v.max_parallelism;
  if (v.custom_role) os << ", custom_role=" << to_string(*v.custom_role);
  os << ", params={";
  for (const auto& [k, val] : v.params) os << k << "=" << val << ";";
  return os << "}}";
}

std::ostream& operator<<(std::ostream& os, const job_edge& e) {
  return os << "job_edge{" << e.source << "->" << e.target << ", " << to_string(e.part) << "}";
}

std::ostream& operator<<(std::ostream& os, const job_graph& g) {
  os << "job_graph{id=" << g.id << ", name=" << g.name << ", vertices=[";
  for (const auto& v : g.vertices) os << v << " ";
  os << "], edges=[";
  for (const auto& e : g.edges) os << e << " ";
  os << "]";
  if (g.checkpointing) os << ", " << g.checkpointing->config;
  if (g.restart) os << ", " << *g.restart;
  return os << "}";
}

}  // namespace snapflow
