#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/stream_operator.hpp"
#include "graph/user_function.hpp"

namespace snapflow {

// The part of `total` elements that subtask `index` of `parallelism` receives under even-split
// redistribution: [begin, end) of the concatenation. The first total % parallelism subtasks
// take one element more than the others, so sizes differ by at most one and every element is
// in exactly one part (subtasks beyond `total` receive an empty part).
struct element_range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool operator==(const element_range&) const = default;
};
element_range even_split_range(std::uint64_t total, std::uint32_t parallelism,
                               std::uint32_t index);

// One named list as it travels in a checkpoint.
struct operator_list {
  list_redistribution mode = list_redistribution::even_split;
  std::vector<std::string> elements;
  bool operator==(const operator_list&) const = default;
};

// Operator (non-keyed) list state of one subtask: what a user_stateful_process function reads
// and writes through operator_state_context, what its snapshot writes and what a restore hands
// back, redistributed by each list's mode.
//
// In the snapshot each list is one operator_state_entry named "list:" + its name, whose bytes
// are (integers little-endian)
//   u8 mode (0 even-split, 1 union) | u32 count | count x (u32 length, bytes)
// A restore needs every old subtask's entries (the kind declares union_all); it takes the old
// subtasks in index order and, per list:
//   - union: every element of every old subtask;
//   - even-split: at unchanged parallelism its own old subtask's list; otherwise its
//     even_split_range of the concatenation.
// The entries come from files: a malformed one (unknown name, mode or trailing bytes, a count or
// length beyond the bytes, two modes for one list, an old subtask index outside the old
// parallelism or seen twice) is an error naming what is wrong, never a crash.
class operator_list_states final : public operator_state_context {
 public:
  static constexpr std::string_view entry_prefix = "list:";

  operator_list_states(std::uint32_t subtask_index, std::uint32_t parallelism)
      : subtask_index_(subtask_index), parallelism_(parallelism) {}

  // Replaces the lists with this subtask's share of the old subtasks' lists.
  result<void> restore(const std::vector<restored_operator_state>& restored);
  // Every list as an entry; an error when a list or an element is beyond the format's u32
  // counts (4 GiB elements, 4 billion of them).
  result<std::vector<operator_state_entry>> snapshot() const;

  std::vector<std::string>& list_bytes(std::string_view name, list_redistribution mode) override;
  std::uint32_t subtask_index() const override { return subtask_index_; }
  std::uint32_t parallelism() const override { return parallelism_; }

  const std::map<std::string, operator_list, std::less<>>& lists() const { return lists_; }

  static operator_state_entry encode_entry(std::string_view name, const operator_list& list);
  // The list an entry holds and its name (without the prefix), or why the bytes are not one.
  static result<std::pair<std::string, operator_list>> decode_entry(
      const operator_state_entry& entry);

 private:
  std::uint32_t subtask_index_;
  std::uint32_t parallelism_;
  std::map<std::string, operator_list, std::less<>> lists_;
};

}  // namespace snapflow
