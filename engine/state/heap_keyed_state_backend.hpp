#pragma once

#include <vector>

#include "engine/state/keyed_state_backend.hpp"

namespace snapflow {

// Flink's HashMapStateBackend ("hashmap"): keyed state in memory, one key_group_state per owned
// key group. A snapshot is a deep copy taken on the task thread, so processing can go on while
// the copy is written.
class heap_keyed_state_backend final : public keyed_state_backend {
 public:
  heap_keyed_state_backend(std::uint32_t max_parallelism, key_group_range range);

  std::optional<std::int64_t> value(std::string_view state) const override;
  void set_value(std::string_view state, std::int64_t v) override;
  std::int64_t add_to_value(std::string_view state, std::int64_t delta) override;
  void clear_value(std::string_view state) override;

  std::optional<std::int64_t> map_get(std::string_view state,
                                      std::string_view map_key) const override;
  void map_put(std::string_view state, std::string_view map_key, std::int64_t v) override;
  void map_remove(std::string_view state, std::string_view map_key) override;
  std::vector<std::pair<std::string, std::int64_t>> map_entries(
      std::string_view state) const override;

  keyed_snapshot_part snapshot() const override;
  result<void> restore(const std::vector<keyed_state_snapshot>& parts) override;

  std::size_t num_entries() const override;
  std::size_t synchronous_snapshot_entries() const override { return num_entries(); }

 private:
  key_group_state& group() { return groups_[current_group() - range_.first]; }
  const key_group_state& group() const { return groups_[current_group() - range_.first]; }
  // The current key's value, created as 0 when it has none.
  std::int64_t& value_slot(std::string_view state);

  std::vector<key_group_state> groups_;  // index: key group - range.first
};

}  // namespace snapflow
