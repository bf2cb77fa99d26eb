#include "engine/jobmaster/state_assignment.hpp"

#include <algorithm>
#include <cassert>

#include "engine/state/key_groups.hpp"

namespace snapflow {

state_assignment::state_assignment(std::map<std::uint32_t, subtask_state> old_states,
                                   operator_role role, operator_state_redistribution mode,
                                   std::uint32_t new_parallelism, std::uint32_t max_parallelism)
    : old_states_(std::move(old_states)),
      keyed_(role == operator_role::keyed),
      split_modulo_(mode == operator_state_redistribution::split_modulo),
      new_parallelism_(new_parallelism),
      max_parallelism_(max_parallelism) {
  assert(new_parallelism >= 1);
  assert(max_parallelism >= 1);
  old_parallelism_ = static_cast<std::uint32_t>(old_states_.size());
  // A map's keys are ascending and distinct: they are 0..n-1 exactly when the last is n-1.
  const bool dense = old_states_.empty() || old_states_.rbegin()->first + 1 == old_parallelism_;
  const bool ranges_computable =
      !keyed_ || (old_parallelism_ <= max_parallelism && new_parallelism <= max_parallelism);
  union_ = mode == operator_state_redistribution::union_all || !dense || !ranges_computable;
}

state_assignment state_assignment::for_vertex(const job_vertex& vertex,
                                              const operator_registry& registry,
                                              const completed_checkpoint& checkpoint) {
  std::map<std::uint32_t, subtask_state> old_states;
  for (auto it = checkpoint.subtask_states.lower_bound(subtask_id{vertex.id, 0});
       it != checkpoint.subtask_states.end() && it->first.vertex == vertex.id; ++it)
    old_states.emplace(it->first.index, it->second);
  const operator_kind* kind = registry.find(vertex.kind);
  // validate() let the vertex through: its kind is registered or it declares a custom role.
  assert(kind != nullptr || vertex.custom_role);
  const operator_role role =
      kind != nullptr ? kind->role : vertex.custom_role.value_or(operator_role::transform);
  const operator_state_redistribution mode =
      kind != nullptr ? kind->redistribution : operator_state_redistribution::union_all;
  return state_assignment(std::move(old_states), role, mode, vertex.parallelism,
                          vertex.max_parallelism);
}

std::vector<std::uint32_t> state_assignment::old_indexes_for(std::uint32_t index) const {
  assert(index < new_parallelism_);
  std::vector<std::uint32_t> out;
  if (old_parallelism_ == 0) return out;
  if (union_) {
    out.reserve(old_parallelism_);
    for (std::uint32_t i = 0; i < old_parallelism_; ++i) out.push_back(i);
    return out;
  }
  if (split_modulo_) {
    // The owners of splits index, index + p, ... at the old parallelism.
    for (std::uint64_t j = index; j < max_parallelism_; j += new_parallelism_)
      out.push_back(static_cast<std::uint32_t>(j % old_parallelism_));
  } else {
    // Operator state, round robin: index, index + p, index + 2p, ...
    for (std::uint64_t i = index; i < old_parallelism_; i += new_parallelism_)
      out.push_back(static_cast<std::uint32_t>(i));
  }
  if (keyed_) {
    const key_groups::subtask_range overlapping = key_groups::overlapping_subtasks(
        index, new_parallelism_, old_parallelism_, max_parallelism_);
    for (std::uint32_t i = overlapping.first; i <= overlapping.last; ++i) out.push_back(i);
  }
  if (keyed_ || split_modulo_) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

std::map<std::uint32_t, subtask_state> state_assignment::states_for(std::uint32_t index) const {
  if (union_) return old_states_;
  std::map<std::uint32_t, subtask_state> out;
  for (std::uint32_t i : old_indexes_for(index)) {
    auto it = old_states_.find(i);
    assert(it != old_states_.end());  // dense: every index below old_parallelism_ is present
    out.emplace_hint(out.end(), i, it->second);
  }
  return out;
}

std::optional<std::string> max_parallelism_mismatch(const job_graph& graph,
                                                    const completed_checkpoint& checkpoint) {
  for (const job_vertex& vertex : graph.vertices) {
    for (auto it = checkpoint.subtask_states.lower_bound(subtask_id{vertex.id, 0});
         it != checkpoint.subtask_states.end() && it->first.vertex == vertex.id; ++it) {
      const std::optional<keyed_state_scope>& scope = it->second.keyed;
      if (!scope || scope->max_parallelism == vertex.max_parallelism) continue;
      return "operator '" + vertex.uid + "': the state in " + checkpoint.location +
             " was taken at max parallelism " + std::to_string(scope->max_parallelism) +
             ", the job declares max parallelism " + std::to_string(vertex.max_parallelism) +
             "; key groups cannot be remapped, so set max_parallelism = " +
             std::to_string(scope->max_parallelism) + " to restore it";
    }
  }
  return std::nullopt;
}

}  // namespace snapflow
