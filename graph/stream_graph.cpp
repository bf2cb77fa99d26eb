#include "graph/stream_graph.hpp"

#include <cassert>
#include <stdexcept>

namespace snapflow {

stream_node& stream_graph::add_node(std::string kind, std::string name) {
  stream_node n;
  n.id = static_cast<vertex_id>(nodes_.size());
  n.kind = std::move(kind);
  n.name = std::move(name);
  nodes_.push_back(std::move(n));
  return nodes_.back();
}

void stream_graph::add_edge(vertex_id source, vertex_id target, std::optional<partitioning> part) {
  assert(source < nodes_.size());
  assert(target < nodes_.size());
  edges_.push_back({source, target, part});
}

stream_node& stream_graph::node(vertex_id id) {
  if (id >= nodes_.size()) throw std::out_of_range("no stream node " + std::to_string(id));
  return nodes_[id];
}

const stream_node& stream_graph::node(vertex_id id) const {
  if (id >= nodes_.size()) throw std::out_of_range("no stream node " + std::to_string(id));
  return nodes_[id];
}

job_graph stream_graph::to_job_graph(const operator_registry& registry) const {
  job_graph g;
  g.id = generate_job_id();
  g.name = job_name;
  for (const auto& n : nodes_) {
    job_vertex v;
    v.id = n.id;
    v.name = n.name;
    // A generated uid is stable as long as the declaration order is; users who evolve jobs
    // set their own.
    v.uid = n.uid.empty() ? n.kind + "-" + std::to_string(n.id) : n.uid;
    v.kind = n.kind;
    v.params = n.params;
    v.parallelism = n.parallelism != 0 ? n.parallelism : default_parallelism;
    v.max_parallelism = n.max_parallelism != 0 ? n.max_parallelism
                                                : std::max(default_max_parallelism, v.parallelism);
    v.custom_role = n.custom_role;
    v.function = n.function;
    g.vertices.push_back(std::move(v));
  }
  for (const auto& e : edges_) {
    partitioning part = partitioning::forward;
    if (e.part)
      part = *e.part;
    else if (g.vertices[e.source].parallelism != g.vertices[e.target].parallelism)
      part = partitioning::rebalance;
    g.edges.push_back({e.source, e.target, part});
  }
  if (checkpointing) g.checkpointing = make_checkpointing_settings(g, *checkpointing);
  g.restart = restart;
  if (auto error = validate(g, registry)) throw invalid_config(*error);
  return g;
}

}  // namespace snapflow
