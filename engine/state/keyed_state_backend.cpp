#include "engine/state/keyed_state_backend.hpp"

#include <algorithm>

#include "engine/state/int64_state_value.hpp"

namespace snapflow {

keyed_state_backend::keyed_state_backend(std::uint32_t max_parallelism, key_group_range range)
    : max_parallelism_(max_parallelism), range_(range), current_group_(range.first) {
  assert(max_parallelism_ >= 1);
  assert(!range_.empty());
  assert(range_.last < max_parallelism_);
}

std::int64_t keyed_state_backend::int64_of(std::string_view state, std::string_view bytes) {
  auto v = decode_int64_state(bytes);
  if (!v)
    throw state_type_error("keyed state '" + std::string(state) + "' holds a value of " +
                           std::to_string(bytes.size()) + " bytes, not an int64 (8 bytes)");
  return *v;
}

std::optional<std::int64_t> keyed_state_backend::value(std::string_view state) const {
  auto bytes = value_bytes(state);
  if (!bytes) return std::nullopt;
  return int64_of(state, *bytes);
}

void keyed_state_backend::set_value(std::string_view state, std::int64_t v) {
  set_value_bytes(state, encode_int64_state(v));
}

std::optional<std::int64_t> keyed_state_backend::map_get(std::string_view state,
                                                         std::string_view map_key) const {
  auto bytes = map_get_bytes(state, map_key);
  if (!bytes) return std::nullopt;
  return int64_of(state, *bytes);
}

void keyed_state_backend::map_put(std::string_view state, std::string_view map_key,
                                  std::int64_t v) {
  map_put_bytes(state, map_key, encode_int64_state(v));
}

std::vector<std::pair<std::string, std::int64_t>> keyed_state_backend::map_entries(
    std::string_view state) const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (auto& [key, bytes] : map_entries_bytes(state))
    out.emplace_back(std::move(key), int64_of(state, bytes));
  return out;
}

error keyed_state_backend::cannot_read_files() {
  return error{"this state backend cannot read state stored as rocksdb files (an "
               "incremental checkpoint) itself: read it into the neutral form first"};
}

result<void> keyed_state_backend::begin_restore(const std::vector<keyed_files_restore>& files) {
  restoring_ = false;
  last_restored_.reset();
  restored_from_files_.clear();
  for (const auto& part : files)
    restored_from_files_.push_back(
        {part.manifest.first_key_group, part.manifest.last_key_group});
  if (auto r = start_restore(files); !r) return r;
  restoring_ = true;
  return success();
}

result<void> keyed_state_backend::restore_group(std::uint32_t group,
                                                const key_group_state& state) {
  if (!restoring_)
    return error{"key group " + std::to_string(group) + " restored outside a restore"};
  if (group >= max_parallelism_)
    return error{"keyed state names key group " + std::to_string(group) +
                 " beyond max parallelism " + std::to_string(max_parallelism_)};
  if (!range_.contains(group))
    return error{"key group " + std::to_string(group) + " is not this subtask's (" +
                 std::to_string(range_.first) + ".." + std::to_string(range_.last) + ")"};
  if (last_restored_ && group == *last_restored_)
    return error{"key group " + std::to_string(group) + " appears in two state files"};
  if (last_restored_ && group < *last_restored_)
    return error{"key group " + std::to_string(group) + " restored after key group " +
                 std::to_string(*last_restored_) + " (key groups must come in ascending order)"};
  for (const auto& from_files : restored_from_files_)
    if (group >= from_files.first && group <= from_files.last)
      return error{"key group " + std::to_string(group) + " appears in two state files"};
  last_restored_ = group;
  return add_restored_group(group, state);
}

result<void> keyed_state_backend::end_restore() {
  if (!restoring_) return error{"a restore ended that was not begun"};
  restoring_ = false;
  return finish_restore();
}

result<void> keyed_state_backend::restore_with_files(
    const std::vector<keyed_files_restore>& files,
    const std::vector<keyed_state_snapshot>& parts) {
  // Every check on the parts first, so a refused restore changes nothing.
  auto owned = owned_groups(parts);
  if (!owned) return owned.err();
  for (const auto& [group, _] : *owned)
    for (const auto& part : files)
      if (group >= part.manifest.first_key_group && group <= part.manifest.last_key_group)
        return error{"key group " + std::to_string(group) + " appears in two state files"};
  std::sort(owned->begin(), owned->end(),
            [](const owned_group& a, const owned_group& b) { return a.group < b.group; });
  if (auto r = begin_restore(files); !r) return r;
  for (const auto& [group, state] : *owned)
    if (auto r = restore_group(group, *state); !r) return r;
  return end_restore();
}

result<void> keyed_state_backend::restore_sink::key_group(std::uint32_t group,
                                                         key_group_state& state) {
  if (max_parallelism_ != backend_.max_parallelism_)
    return error{"keyed state was written with max parallelism " +
                 std::to_string(max_parallelism_) + ", this job uses " +
                 std::to_string(backend_.max_parallelism_) +
                 "; key groups cannot be remapped (keep max_parallelism stable)"};
  if (group >= backend_.max_parallelism_)
    return error{"keyed state names key group " + std::to_string(group) +
                 " beyond max parallelism " + std::to_string(backend_.max_parallelism_)};
  if (!backend_.range_.contains(group)) return success();  // another subtask's
  if (auto r = backend_.restore_group(group, state); !r) return r;
  ++restored_;
  return success();
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
