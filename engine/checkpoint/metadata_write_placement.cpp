#include "engine/checkpoint/metadata_write_placement.hpp"

#include <cassert>

namespace snapflow {

namespace {
// Per entry: msgpack map headers, keys and fixed-width numbers, with room to spare.
constexpr std::size_t checkpoint_overhead_bytes = 256;
constexpr std::size_t subtask_overhead_bytes = 64;
constexpr std::size_t handle_overhead_bytes = 48;
}  // namespace

metadata_write_placement::metadata_write_placement(options o) : options_(o) {
  assert(options_.window >= 1);
}

bool metadata_write_placement::write_inline(const completed_checkpoint& checkpoint) const {
  if (checkpoint.is_savepoint() || !recent_writes_fast()) return false;
  return estimated_metadata_bytes(checkpoint) <= options_.inline_max_bytes;
}

bool metadata_write_placement::recent_writes_fast() const {
  return options_.inline_max.count() > 0 && fast_in_a_row_ >= options_.window;
}

void metadata_write_placement::record(std::chrono::microseconds took) {
  if (took < options_.inline_max) {
    if (fast_in_a_row_ < options_.window) ++fast_in_a_row_;
  } else {
    fast_in_a_row_ = 0;
  }
}

std::size_t estimated_metadata_bytes(const completed_checkpoint& checkpoint) {
  std::size_t n = checkpoint_overhead_bytes + checkpoint.job.size() + checkpoint.location.size();
  for (const auto& [_, state] : checkpoint.subtask_states) {
    n += subtask_overhead_bytes;
    for (const state_handle& h : state.handles)
      n += handle_overhead_bytes + h.path.size() + (h.inline_bytes ? h.inline_bytes->size() : 0);
  }
  for (const auto& [name, bytes] : checkpoint.master_states) n += 16 + name.size() + bytes.size();
  return n;
}

}  // namespace snapflow
