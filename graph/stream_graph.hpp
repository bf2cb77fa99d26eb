#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/checkpoint_config.hpp"
#include "graph/job_graph.hpp"

namespace snapflow {

// An operator as the user declared it. Parallelism 0 means "the environment's default".
struct stream_node {
  vertex_id id = 0;
  std::string name;
  std::string uid;
  std::string kind;
  std::map<std::string, std::string> params;
  std::uint32_t parallelism = 0;
  std::uint32_t max_parallelism = 0;
  std::optional<operator_role> custom_role;  // a kind only custom workers know
  std::shared_ptr<const user_function> function;
};

// partitioning unset = forward when parallelisms match, otherwise rebalance (Flink's rule).
struct stream_edge {
  vertex_id source = 0;
  vertex_id target = 0;
  std::optional<partitioning> part;
};

// The job exactly as the user declared it through stream_environment.
class stream_graph {
 public:
  std::string job_name = "snapflow job";
  std::uint32_t default_parallelism = 1;
  std::uint32_t default_max_parallelism = 128;
  // Set by enable_checkpointing; absent means checkpointing is off.
  std::optional<checkpoint_config> checkpointing;
  // Set by set_restart_strategy; absent means the coordinator's default.
  std::optional<restart_strategy_config> restart;
  // Key selectors run in the operator that feeds them where they can
  // (graph/key_selector_fusion.hpp); off, each is a task of its own.
  bool fuse_key_selectors = true;

  stream_node& add_node(std::string kind, std::string name);
  void add_edge(vertex_id source, vertex_id target, std::optional<partitioning> part);

  stream_node& node(vertex_id id);
  const stream_node& node(vertex_id id) const;
  const std::vector<stream_node>& nodes() const { return nodes_; }
  const std::vector<stream_edge>& edges() const { return edges_; }

  // Resolves defaults (parallelism, uids, partitioning), derives the checkpointing settings
  // and validates the result against `registry`; throws invalid_config with the first problem.
  job_graph to_job_graph(const operator_registry& registry = operator_registry::builtin()) const;

 private:
  std::vector<stream_node> nodes_;
  std::vector<stream_edge> edges_;
};

}  // namespace snapflow
