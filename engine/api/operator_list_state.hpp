#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/api/codec.hpp"
#include "graph/user_function.hpp"

namespace snapflow::api {

// A list of V in operator (non-keyed) state (Flink's ListState from the OperatorStateStore):
// one per subtask, not per key. Each element is stored msgpack-encoded on its own, so add() only
// appends. What a new subtask receives on restore follows the list's mode: even-split (its part
// of all old subtasks' elements) or union (all of them). docs/api.md, "Operator state".
template <typename V>
class operator_list_state {
 public:
  operator_list_state(operator_state_context& context, const std::string& name,
                      list_redistribution mode)
      : name_(name), elements_(context.list_bytes(name, mode)) {}

  std::vector<V> get() const {
    std::vector<V> out;
    out.reserve(elements_.size());
    for (const auto& e : elements_)
      out.push_back(decode_or_throw<V>(
          e, [&] { return "an element of operator list state '" + name_ + "'"; }));
    return out;
  }
  void add(const V& v) { elements_.push_back(encode(v)); }
  void add_all(const std::vector<V>& vs) {
    for (const auto& v : vs) add(v);
  }
  // Replaces the list; an empty one clears it.
  void update(const std::vector<V>& items) {
    elements_.clear();
    add_all(items);
  }
  void clear() { elements_.clear(); }
  std::size_t size() const { return elements_.size(); }
  bool empty() const { return elements_.empty(); }

 private:
  std::string name_;
  std::vector<std::string>& elements_;
};

// What a typed non-keyed process function sees besides its input: its subtask and its operator
// list state (Flink's ProcessFunction context with CheckpointedFunction's OperatorStateStore).
// Handles are cheap: take them per record. A name keeps its type and its mode: asking for an
// even-split list as a union one (or the reverse) throws std::logic_error.
class process_context {
 public:
  explicit process_context(operator_state_context& state) : state_(state) {}

  std::uint32_t subtask_index() const { return state_.subtask_index(); }
  std::uint32_t parallelism() const { return state_.parallelism(); }

  // Flink's getListState: on restore the old subtasks' elements are split evenly.
  template <typename V>
  operator_list_state<V> get_list_state(const std::string& name) {
    return operator_list_state<V>(state_, name, list_redistribution::even_split);
  }
  // Flink's getUnionListState: on restore every subtask receives every old subtask's elements.
  template <typename V>
  operator_list_state<V> get_union_list_state(const std::string& name) {
    return operator_list_state<V>(state_, name, list_redistribution::union_all);
  }

 private:
  operator_state_context& state_;
};

}  // namespace snapflow::api
