#include "engine/runtime/keyed_state_backend.hpp"

#include <cassert>

namespace snapflow {

keyed_state_backend::keyed_state_backend(std::uint32_t max_parallelism, key_group_range range)
    : max_parallelism_(max_parallelism),
      range_(range),
      groups_(range.size()),
      current_group_(range.first) {
  assert(max_parallelism_ >= 1);
  assert(!range_.empty());
  assert(range_.last < max_parallelism_);
}

void keyed_state_backend::set_current_key(std::uint64_t key) {
  const std::uint32_t group = key_groups::key_group_for_key(key, max_parallelism_);
  assert(range_.contains(group) && "a record reached a subtask that does not own its key group");
  current_key_ = key;
  current_group_ = group;
  has_key_ = true;
}

std::optional<std::int64_t> keyed_state_backend::value(std::string_view state) const {
  assert(has_key_);
  const auto& values = current_group().values;
  auto s = values.find(state);
  if (s == values.end()) return std::nullopt;
  auto v = s->second.find(current_key_);
  if (v == s->second.end()) return std::nullopt;
  return v->second;
}

void keyed_state_backend::set_value(std::string_view state, std::int64_t v) {
  assert(has_key_);
  auto& values = current_group().values;
  auto s = values.find(state);
  if (s == values.end()) s = values.emplace(std::string(state), decltype(s->second){}).first;
  s->second[current_key_] = v;
}

std::int64_t& keyed_state_backend::value_slot(std::string_view state) {
  assert(has_key_);
  auto& values = current_group().values;
  auto s = values.find(state);
  if (s == values.end()) s = values.emplace(std::string(state), decltype(s->second){}).first;
  return s->second[current_key_];
}

void keyed_state_backend::clear_value(std::string_view state) {
  assert(has_key_);
  auto& values = current_group().values;
  auto s = values.find(state);
  if (s == values.end()) return;
  s->second.erase(current_key_);
  if (s->second.empty()) values.erase(s);
}

std::optional<std::int64_t> keyed_state_backend::map_get(std::string_view state,
                                                         std::string_view map_key) const {
  assert(has_key_);
  const auto& maps = current_group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) return std::nullopt;
  auto k = s->second.find(current_key_);
  if (k == s->second.end()) return std::nullopt;
  auto e = k->second.find(std::string(map_key));
  if (e == k->second.end()) return std::nullopt;
  return e->second;
}

void keyed_state_backend::map_put(std::string_view state, std::string_view map_key,
                                  std::int64_t v) {
  assert(has_key_);
  auto& maps = current_group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) s = maps.emplace(std::string(state), decltype(s->second){}).first;
  s->second[current_key_][std::string(map_key)] = v;
}

void keyed_state_backend::map_remove(std::string_view state, std::string_view map_key) {
  assert(has_key_);
  auto& maps = current_group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) return;
  auto k = s->second.find(current_key_);
  if (k == s->second.end()) return;
  k->second.erase(std::string(map_key));
  if (k->second.empty()) s->second.erase(k);
  if (s->second.empty()) maps.erase(s);
}

std::vector<std::pair<std::string, std::int64_t>> keyed_state_backend::map_entries(
    std::string_view state) const {
  assert(has_key_);
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto& maps = current_group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) return out;
  auto k = s->second.find(current_key_);
  if (k == s->second.end()) return out;
  out.assign(k->second.begin(), k->second.end());
  return out;
}

keyed_state_snapshot keyed_state_backend::snapshot() const {
  keyed_state_snapshot out;
  out.max_parallelism = max_parallelism_;
  for (std::uint32_t i = 0; i < groups_.size(); ++i)
    if (!groups_[i].empty()) out.key_groups.emplace(range_.first + i, groups_[i]);
  return out;
}

result<void> keyed_state_backend::restore(const std::vector<keyed_state_snapshot>& parts) {
  std::vector<key_group_state> restored(groups_.size());
  std::vector<bool> seen(groups_.size(), false);
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
      restored[i] = state;
    }
  }
  groups_ = std::move(restored);
  return success();
}

std::size_t keyed_state_backend::num_entries() const {
  std::size_t n = 0;
  for (const auto& g : groups_) {
    for (const auto& [_, keys] : g.values) n += keys.size();
    for (const auto& [_, keys] : g.maps) n += keys.size();
  }
  return n;
}

}  // namespace snapflow
