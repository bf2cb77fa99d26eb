#include "engine/state/key_groups.hpp"

#include <cassert>

namespace snapflow::key_groups {

std::uint64_t hash_key(std::uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ULL;
  key ^= key >> 33;
  return key;
}

std::uint32_t key_group_for_key(std::uint64_t key, std::uint32_t max_parallelism) {
  assert(max_parallelism >= 1);
  return static_cast<std::uint32_t>(hash_key(key) % max_parallelism);
}

std::uint32_t subtask_for_key_group(std::uint32_t key_group, std::uint32_t parallelism,
                                    std::uint32_t max_parallelism) {
  assert(parallelism >= 1);
  assert(parallelism <= max_parallelism);
  assert(key_group < max_parallelism);
  // 64-bit product: key_group * parallelism can exceed 32 bits at the 32768 limits.
  return static_cast<std::uint32_t>(std::uint64_t{key_group} * parallelism / max_parallelism);
}

std::uint32_t subtask_for_key(std::uint64_t key, std::uint32_t parallelism,
                              std::uint32_t max_parallelism) {
  return subtask_for_key_group(key_group_for_key(key, max_parallelism), parallelism,
                               max_parallelism);
}

key_group_range range_for_subtask(std::uint32_t index, std::uint32_t parallelism,
                                  std::uint32_t max_parallelism) {
  assert(parallelism >= 1);
  assert(parallelism <= max_parallelism);
  assert(index < parallelism);
  const std::uint64_t p = parallelism;
  const std::uint64_t m = max_parallelism;
  // Smallest kg with kg * p / m == index, and the largest.
  const auto first = static_cast<std::uint32_t>((index * m + p - 1) / p);
  const auto last = static_cast<std::uint32_t>(((index + 1) * m - 1) / p);
  return {first, last};
}

subtask_range overlapping_subtasks(std::uint32_t index, std::uint32_t parallelism,
                                   std::uint32_t other_parallelism,
                                   std::uint32_t max_parallelism) {
  assert(other_parallelism >= 1);
  assert(other_parallelism <= max_parallelism);
  const key_group_range own = range_for_subtask(index, parallelism, max_parallelism);
  return {subtask_for_key_group(own.first, other_parallelism, max_parallelism),
          subtask_for_key_group(own.last, other_parallelism, max_parallelism)};
}

}  // namespace snapflow::key_groups
