#include "engine/state/keyed_state_backend.hpp"

namespace snapflow {

keyed_state_backend::keyed_state_backend(std::uint32_t max_parallelism, key_group_range range)
    : max_parallelism_(max_parallelism), range_(range), current_group_(range.first) {
  assert(max_parallelism_ >= 1);
  assert(!range_.empty());
  assert(range_.last < max_parallelism_);
}

result<std::vector<keyed_state_backend::owned_group>> keyed_state_backend::owned_groups(
    const std::vector<keyed_state_snapshot>& parts) const {
  std::vector<owned_group> out;
  std::vector<bool> seen(range_.size(), false);
  for (const auto& part : parts) {
    if (part.key_groups.empty()) continue;
    if (part.max_parallelism != max_parallelism_)
      return error{"keyed state was written with max parallelism " +
                   std::to_string(part.max_parallelism) + ", this job uses " +
                   std::to_string(max_parallelism_) +
                   "; key groups cannot be remapped (keep max_parallelism stable)"};
    for (const auto& [group, state] : part.key_groups) {
      if (group >= max_parallelism_)
        return error{"keyed state names key group " + std::to_string(group) +
                     " beyond max parallelism " + std::to_string(max_parallelism_)};
      if (!range_.contains(group)) continue;
      const std::uint32_t i = group - range_.first;
      if (seen[i])
        return error{"key group " + std::to_string(group) + " appears in two state files"};
      seen[i] = true;
      out.push_back({group, &state});
    }
  }
  return out;
}

}  // namespace snapflow
