#pragma once

#include <cstdint>
#include <ostream>

namespace snapflow {

// A contiguous, inclusive range of key groups [first, last]; empty when first > last.
struct key_group_range {
  std::uint32_t first = 0;
  std::uint32_t last = 0;

  bool empty() const { return first > last; }
  std::uint32_t size() const { return empty() ? 0 : last - first + 1; }
  bool contains(std::uint32_t key_group) const { return key_group >= first && key_group <= last; }

  bool operator==(const key_group_range&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const key_group_range& r) {
  return os << "key_groups[" << r.first << ", " << r.last << "]";
}

// Keyed state is sharded into `max_parallelism` key groups (Flink's KeyGroupRangeAssignment):
// a key always lands in the same key group, and each subtask owns a contiguous range of them.
// Changing the parallelism moves whole key groups between subtasks, never single keys, which is
// what lets a checkpoint taken at one parallelism be restored at another.
namespace key_groups {

// A murmur3-style 64-bit finalizer: spreads keys that differ in a few low bits (sequence numbers
// modulo small key counts) over all key groups.
std::uint64_t hash_key(std::uint64_t key);

std::uint32_t key_group_for_key(std::uint64_t key, std::uint32_t max_parallelism);

// subtask = key_group * parallelism / max_parallelism.
std::uint32_t subtask_for_key_group(std::uint32_t key_group, std::uint32_t parallelism,
                                    std::uint32_t max_parallelism);

std::uint32_t subtask_for_key(std::uint64_t key, std::uint32_t parallelism,
                              std::uint32_t max_parallelism);

// The key groups subtask `index` of `parallelism` owns: the exact inverse of
// subtask_for_key_group.
key_group_range range_for_subtask(std::uint32_t index, std::uint32_t parallelism,
                                  std::uint32_t max_parallelism);

// A contiguous, inclusive range of subtask indexes [first, last].
struct subtask_range {
  std::uint32_t first = 0;
  std::uint32_t last = 0;

  bool contains(std::uint32_t index) const { return index >= first && index <= last; }
  bool operator==(const subtask_range&) const = default;
};

// The subtasks of `other_parallelism` whose key groups overlap the ones subtask `index` of
// `parallelism` owns: after a rescale, the old subtasks whose keyed state a new subtask needs.
// Ranges are contiguous and ordered by subtask, so the owners of the range's first and last
// key group bound every overlapping one.
subtask_range overlapping_subtasks(std::uint32_t index, std::uint32_t parallelism,
                                   std::uint32_t other_parallelism, std::uint32_t max_parallelism);

}  // namespace key_groups

}  // namespace snapflow
