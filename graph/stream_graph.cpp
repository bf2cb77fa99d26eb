#include "graph/stream_graph.hpp"

#include <algorithm>
#include <cassert>
#include <stdexcept>

#include "graph/key_selector_fusion.hpp"

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

namespace {

bool is_key_selector(const job_vertex& v) {
  return v.kind == "user_key_by" && v.function && std::holds_alternative<key_function>(*v.function);
}

// Folds each key selector it can into its input (graph/key_selector_fusion.hpp): one forward
// edge in from a user operator of the same parallelisms, whose only output it is. Edges from a
// folded selector leave from its input after this; `kept[id]` says which vertices remain.
void fold_key_selectors(std::vector<job_vertex>& vertices, std::vector<stream_edge>& edges,
                        std::vector<bool>& kept) {
  for (auto& selector : vertices) {
    if (!is_key_selector(selector)) continue;
    const auto into = [&](const stream_edge& e) { return e.target == selector.id; };
    if (std::count_if(edges.begin(), edges.end(), into) != 1) continue;
    const auto in = std::find_if(edges.begin(), edges.end(), into);
    if (in->part != partitioning::forward) continue;
    job_vertex& input = vertices[in->source];
    const vertex_id from = input.id;
    if (std::count_if(edges.begin(), edges.end(),
                      [&](const stream_edge& e) { return e.source == from; }) != 1)
      continue;
    if (!input.function || input.parallelism != selector.parallelism ||
        input.max_parallelism != selector.max_parallelism)
      continue;
    auto fused = with_key_selector(*input.function, std::get<key_function>(*selector.function));
    if (!fused) continue;
    input.function = std::move(fused);
    kept[selector.id] = false;
    edges.erase(in);
    for (auto& e : edges)
      if (e.source == selector.id) e.source = from;
  }
}

}  // namespace

job_graph stream_graph::to_job_graph(const operator_registry& registry) const {
  // Every declared node as a vertex first, with its stream node's id.
  std::vector<job_vertex> vertices;
  for (const auto& n : nodes_) {
    job_vertex v;
    v.id = n.id;
    v.name = n.name;
    // A generated uid is stable as long as the declaration order is; users who evolve jobs
    // set their own. It keeps the stream node's id when fused selectors renumber the vertices.
    v.uid = n.uid.empty() ? n.kind + "-" + std::to_string(n.id) : n.uid;
    v.kind = n.kind;
    v.params = n.params;
    v.parallelism = n.parallelism != 0 ? n.parallelism : default_parallelism;
    v.max_parallelism = n.max_parallelism != 0 ? n.max_parallelism
                                                : std::max(default_max_parallelism, v.parallelism);
    v.custom_role = n.custom_role;
    v.function = n.function;
    vertices.push_back(std::move(v));
  }
  std::vector<stream_edge> edges = edges_;
  std::vector<bool> kept(vertices.size(), true);
  if (fuse_key_selectors) fold_key_selectors(vertices, edges, kept);

  job_graph g;
  g.id = generate_job_id();
  g.name = job_name;
  std::vector<vertex_id> renumbered(vertices.size(), 0);
  for (auto& v : vertices) {
    if (!kept[v.id]) continue;
    renumbered[v.id] = static_cast<vertex_id>(g.vertices.size());
    v.id = renumbered[v.id];
    g.vertices.push_back(std::move(v));
  }
  for (const auto& e : edges) {
    const vertex_id source = renumbered[e.source];
    const vertex_id target = renumbered[e.target];
    partitioning part = partitioning::forward;
    if (e.part)
      part = *e.part;
    else if (g.vertices[source].parallelism != g.vertices[target].parallelism)
      part = partitioning::rebalance;
    g.edges.push_back({source, target, part});
  }
  if (checkpointing) g.checkpointing = make_checkpointing_settings(g, *checkpointing);
  g.restart = restart;
  if (auto error = validate(g, registry)) throw invalid_config(*error);
  return g;
}

}  // namespace snapflow
