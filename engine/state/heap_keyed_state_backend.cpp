#include "engine/state/heap_keyed_state_backend.hpp"

namespace snapflow {

heap_keyed_state_backend::heap_keyed_state_backend(std::uint32_t max_parallelism,
                                                   key_group_range range)
    : keyed_state_backend(max_parallelism, range), groups_(range.size()) {}

std::optional<std::int64_t> heap_keyed_state_backend::value(std::string_view state) const {
  const auto& values = group().values;
  auto s = values.find(state);
  if (s == values.end()) return std::nullopt;
  auto v = s->second.find(current_key_);
  if (v == s->second.end()) return std::nullopt;
  return v->second;
}

std::int64_t& heap_keyed_state_backend::value_slot(std::string_view state) {
  auto& values = group().values;
  auto s = values.find(state);
  if (s == values.end()) s = values.emplace(std::string(state), decltype(s->second){}).first;
  return s->second[current_key_];
}

void heap_keyed_state_backend::set_value(std::string_view state, std::int64_t v) {
  value_slot(state) = v;
}

std::int64_t heap_keyed_state_backend::add_to_value(std::string_view state, std::int64_t delta) {
  std::int64_t& slot = value_slot(state);
  slot += delta;
  return slot;
}

void heap_keyed_state_backend::clear_value(std::string_view state) {
  auto& values = group().values;
  auto s = values.find(state);
  if (s == values.end()) return;
  s->second.erase(current_key_);
  if (s->second.empty()) values.erase(s);
}

std::optional<std::int64_t> heap_keyed_state_backend::map_get(std::string_view state,
                                                              std::string_view map_key) const {
  const auto& maps = group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) return std::nullopt;
  auto k = s->second.find(current_key_);
  if (k == s->second.end()) return std::nullopt;
  auto e = k->second.find(std::string(map_key));
  if (e == k->second.end()) return std::nullopt;
  return e->second;
}

void heap_keyed_state_backend::map_put(std::string_view state, std::string_view map_key,
                                       std::int64_t v) {
  auto& maps = group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) s = maps.emplace(std::string(state), decltype(s->second){}).first;
  s->second[current_key_][std::string(map_key)] = v;
}

void heap_keyed_state_backend::map_remove(std::string_view state, std::string_view map_key) {
  auto& maps = group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) return;
  auto k = s->second.find(current_key_);
  if (k == s->second.end()) return;
  k->second.erase(std::string(map_key));
  if (k->second.empty()) s->second.erase(k);
  if (s->second.empty()) maps.erase(s);
}

std::vector<std::pair<std::string, std::int64_t>> heap_keyed_state_backend::map_entries(
    std::string_view state) const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto& maps = group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) return out;
  auto k = s->second.find(current_key_);
  if (k == s->second.end()) return out;
  out.assign(k->second.begin(), k->second.end());
  return out;
}

keyed_snapshot_part heap_keyed_state_backend::snapshot() const {
  keyed_snapshot_part out;
  out.ready.max_parallelism = max_parallelism_;
  for (std::uint32_t i = 0; i < groups_.size(); ++i)
    if (!groups_[i].empty()) out.ready.key_groups.emplace(range_.first + i, groups_[i]);
  return out;
}

result<void> heap_keyed_state_backend::restore(const std::vector<keyed_state_snapshot>& parts) {
  auto owned = owned_groups(parts);
  if (!owned) return owned.err();
  std::vector<key_group_state> restored(groups_.size());
  for (const auto& [group, state] : *owned) restored[group - range_.first] = *state;
  groups_ = std::move(restored);
  return success();
}

std::size_t heap_keyed_state_backend::num_entries() const {
  std::size_t n = 0;
  for (const auto& g : groups_) {
    for (const auto& [_, keys] : g.values) n += keys.size();
    for (const auto& [_, keys] : g.maps) n += keys.size();
  }
  return n;
}

}  // namespace snapflow
