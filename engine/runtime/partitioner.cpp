#include "engine/runtime/partitioner.hpp"

#include <cassert>

#include "engine/state/key_groups.hpp"

namespace snapflow {

partitioner::partitioner(partitioning kind, std::uint32_t num_channels,
                         std::uint32_t max_parallelism, std::uint32_t subtask_index)
    : kind_(kind),
      num_channels_(num_channels),
      max_parallelism_(max_parallelism),
      next_(num_channels == 0 ? 0 : subtask_index % num_channels) {
  assert(num_channels_ >= 1);
  assert(kind_ != partitioning::forward || num_channels_ == 1);
  assert(kind_ != partitioning::hash || num_channels_ <= max_parallelism_);
}

std::uint32_t partitioner::select_by_key(std::uint64_t key) const {
  return key_groups::subtask_for_key(key, num_channels_, max_parallelism_);
}

}  // namespace snapflow
