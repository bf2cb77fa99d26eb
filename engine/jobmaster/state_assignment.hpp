#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/checkpoint/completed_checkpoint.hpp"
#include "graph/job_graph.hpp"
#include "graph/operator_registry.hpp"

namespace snapflow {

// Which old subtask states each new subtask of one vertex receives when the job restores from a
// checkpoint (Flink's StateAssignmentOperation). A new subtask receives the union of
//   - keyed state: for a keyed vertex, every old subtask whose key-group range overlaps its own
//     (ranges from key_groups::range_for_subtask at the old and the new parallelism, same max
//     parallelism), so each key group reaches exactly the subtask that owns it now;
//   - operator state, by the kind's operator_state_redistribution: round_robin sends old
//     subtask i to new subtask i % p only, split_modulo sends each new subtask the old owners
//     of the splits it owns now (split j belongs to subtask j % p), union_all sends every old
//     subtask to everyone.
// Handing everything to everyone made a restore O(p^2) in deploy bytes and in state reads.
//
// Old parallelism is the number of old subtask states of the vertex (a completed checkpoint has
// one for every subtask, empty or not). When the states do not look like that (indexes not
// 0..n-1), or the old parallelism exceeds the max parallelism, every new subtask gets every old
// state: the tasks' own checks then name what is wrong, as they did before this selection.
class state_assignment {
 public:
  // `old_states`: the vertex's states in the checkpoint, by old subtask index.
  state_assignment(std::map<std::uint32_t, subtask_state> old_states, operator_role role,
                   operator_state_redistribution mode, std::uint32_t new_parallelism,
                   std::uint32_t max_parallelism);

  // For `vertex` in `checkpoint`: its role and redistribution from `registry`, or, for a kind
  // the registry does not know (a custom kind only the workers implement), its custom_role and
  // union_all.
  static state_assignment for_vertex(const job_vertex& vertex, const operator_registry& registry,
                                     const completed_checkpoint& checkpoint);

  // The old subtask indexes new subtask `index` receives, ascending.
  std::vector<std::uint32_t> old_indexes_for(std::uint32_t index) const;
  // Their states, by old subtask index (what a deploy descriptor carries).
  std::map<std::uint32_t, subtask_state> states_for(std::uint32_t index) const;

  // True when every new subtask receives every old state (union_all, or the fallback).
  bool is_union() const { return union_; }
  std::uint32_t old_parallelism() const { return old_parallelism_; }

 private:
  std::map<std::uint32_t, subtask_state> old_states_;
  bool keyed_ = false;
  bool split_modulo_ = false;
  bool union_ = false;
  std::uint32_t old_parallelism_ = 0;
  std::uint32_t new_parallelism_ = 1;
  std::uint32_t max_parallelism_ = 1;
};

// Why `checkpoint` cannot be restored into `graph` (Flink's check of the max parallelism before
// state assignment): a vertex whose keyed state was cut at another max parallelism than the
// vertex declares. Key groups are fixed by the max parallelism, so such state cannot be split;
// the message names the operator and both values. Nothing when every keyed state fits, and for
// state whose metadata does not record its max parallelism.
std::optional<std::string> max_parallelism_mismatch(const job_graph& graph,
                                                    const completed_checkpoint& checkpoint);

}  // namespace snapflow
