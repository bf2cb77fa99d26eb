#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The read positions of a built-in source, cut into splits so the source can change its
// parallelism on restore (as Flink's FLIP-27 sources reassign splits).
//
// The input is a sequence of numbers first, first+1, first+2, ... (sequence numbers or line
// numbers). It is cut into S splits: split j holds first+j, first+j+S, first+j+2S, ... S is the
// vertex's max parallelism on a fresh start and, after a restore, the S the state was written
// with (so the splits never change once a job has run). Subtask i of p owns the splits j with
// j % p == i: every split has exactly one owner, a subtask i >= S owns none, and when p divides
// S the numbers subtask i owns are exactly first+i, first+i+p, ... (the stride split).
//
// Operator state, all values decimal:
//   "splits"     S; written by every subtask, all equal.
//   "split/<j>"  the next number split j emits (a number of its residue class, >= first+j;
//                past the end when the split is done); one entry per split the subtask owns.
// A restored subtask receives the old subtasks that owned any split it owns now (the kinds
// redistribute split_modulo: new subtask i of p gets old subtask j % p_old for every split
// j = i, i + p, ... below the max parallelism, so O(S) states in all, not p^2), or every old
// subtask when the coordinator falls back to union; each split it owns must be there exactly
// once, and it keeps those.
//
// The state written before splits existed (one entry "offset" per subtask, the next number of
// the stride split first+i, first+i+p, ...) restores at the same parallelism p as S = p splits,
// split i = old subtask i's offset: the very same numbers, in the same order.
class source_splits {
 public:
  struct split {
    std::uint32_t index = 0;  // j
    std::int64_t next = 0;    // the next number it emits
  };

  // The splits subtask `context.subtask_index` owns: fresh when `restored` holds no state, else
  // taken from it (every inconsistency is an error naming `kind` and what is wrong).
  static result<source_splits> open(std::string_view kind, std::int64_t first,
                                    const operator_context& context,
                                    const std::vector<restored_operator_state>& restored);

  std::uint32_t count() const { return count_; }  // S
  std::int64_t first() const { return first_; }
  // The owned splits, by ascending index; `next` is kept up to date by the source.
  std::vector<split>& owned() { return owned_; }
  const std::vector<split>& owned() const { return owned_; }

  // The entries described above, for the owned splits.
  std::vector<operator_state_entry> snapshot() const;

  // The largest S a state may declare (the largest max parallelism a job may declare).
  static std::uint32_t max_count();

 private:
  source_splits(std::int64_t first, std::uint32_t count) : first_(first), count_(count) {}

  // Keeps the splits `context`'s subtask owns out of `next_by_split` (all S of them).
  void take_owned(const operator_context& context, const std::vector<std::int64_t>& next_by_split);

  std::int64_t first_ = 0;
  std::uint32_t count_ = 1;
  std::vector<split> owned_;
};

}  // namespace snapflow
