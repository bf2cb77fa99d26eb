#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/runtime/key_groups.hpp"
#include "graph/result.hpp"

namespace snapflow {

// The keyed state of one key group: per named state, per key, a value (value state) or a map
// of entries (map state).
struct key_group_state {
  std::map<std::string, std::unordered_map<std::uint64_t, std::int64_t>, std::less<>> values;
  std::map<std::string, std::unordered_map<std::uint64_t, std::map<std::string, std::int64_t>>,
           std::less<>>
      maps;

  bool empty() const { return values.empty() && maps.empty(); }
  bool operator==(const key_group_state&) const = default;
};

// A point-in-time copy of a backend's key groups (only the non-empty ones): what the task
// thread hands to the snapshot writer, and what restore reads back from state files.
struct keyed_state_snapshot {
  std::uint32_t max_parallelism = 0;
  std::map<std::uint32_t, key_group_state> key_groups;

  bool operator==(const keyed_state_snapshot&) const = default;
};

// Flink's HashMapStateBackend: keyed state in memory, scoped to the current key, organised by
// key group so a snapshot can be split and merged again at another parallelism. Value state
// holds an int64 per key; map state holds string -> int64 entries per key. Task thread only.
class keyed_state_backend {
 public:
  keyed_state_backend(std::uint32_t max_parallelism, key_group_range range);

  // Every state access below is for this key. Asserts that the key belongs to this subtask
  // (a partitioning bug otherwise).
  void set_current_key(std::uint64_t key);
  std::uint64_t current_key() const { return current_key_; }

  std::optional<std::int64_t> value(std::string_view state) const;
  void set_value(std::string_view state, std::int64_t v);
  // The current key's value, created as 0 when it has none: a read-modify-write with one
  // lookup instead of value() + set_value()'s two (keyed aggregations do this per record).
  std::int64_t& value_slot(std::string_view state);
  void clear_value(std::string_view state);

  std::optional<std::int64_t> map_get(std::string_view state, std::string_view map_key) const;
  void map_put(std::string_view state, std::string_view map_key, std::int64_t v);
  void map_remove(std::string_view state, std::string_view map_key);
  // The current key's entries, ordered by map key.
  std::vector<std::pair<std::string, std::int64_t>> map_entries(std::string_view state) const;

  // The synchronous part of a checkpoint: a deep copy, so processing can go on while the copy
  // is written.
  keyed_state_snapshot snapshot() const;
  // Merges the key groups this subtask owns out of `parts` (the snapshots of every old
  // subtask); others are skipped. Fails when a snapshot was taken with another max
  // parallelism (key groups would not line up) or a key group appears twice.
  result<void> restore(const std::vector<keyed_state_snapshot>& parts);

  std::uint32_t max_parallelism() const { return max_parallelism_; }
  const key_group_range& range() const { return range_; }
  // Keys with any state, over all key groups (tests, metrics).
  std::size_t num_entries() const;

 private:
  key_group_state& current_group() { return groups_[current_group_ - range_.first]; }
  const key_group_state& current_group() const { return groups_[current_group_ - range_.first]; }

  std::uint32_t max_parallelism_;
  key_group_range range_;
  std::vector<key_group_state> groups_;  // index: key group - range.first
  std::uint64_t current_key_ = 0;
  std::uint32_t current_group_;
  bool has_key_ = false;
};

}  // namespace snapflow
