#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/state/keyed_state_backend.hpp"

namespace snapflow {

// Flink's EmbeddedRocksDBStateBackend ("rocksdb"): keyed state in an embedded RocksDB instance
// in a local working folder of this subtask attempt, so state can be larger than memory. The
// folder is the backend's alone: whatever is in it when the backend opens is removed, and it is
// removed again once the backend and every snapshot taken from it are gone.
//
// Layout, integers big-endian so that bytewise order is key group order:
//   key   = u16 key group | u8 kind (1 value, 2 map) | u32 name length | name | u64 key
//           [| map key, for map state]
//   value = i64
// The key group comes first so that a range of key groups is one contiguous key range (a
// rescale can cut it out or drop it with one range delete).
//
// A checkpoint's synchronous part takes a RocksDB snapshot (no copy); its asynchronous part
// reads that snapshot into the backend-neutral keyed_state_snapshot, so checkpoints are full
// checkpoints in the same format as the heap backend's, and savepoints move between backends.
//
// RocksDB failing a read or a write (a full disk, a corrupt file) throws std::runtime_error
// naming the folder: the task fails, and restarts from its latest checkpoint.
class rocksdb_keyed_state_backend final : public keyed_state_backend {
 public:
  // Opens a fresh instance in `folder` (created; anything already there is removed).
  static result<std::unique_ptr<rocksdb_keyed_state_backend>> open(
      std::uint32_t max_parallelism, key_group_range range, const std::filesystem::path& folder);
  ~rocksdb_keyed_state_backend() override;

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
  std::size_t synchronous_snapshot_entries() const override { return 0; }

  const std::filesystem::path& folder() const;

  class store;  // the open instance and its folder, shared with deferred snapshots

 private:
  rocksdb_keyed_state_backend(std::uint32_t max_parallelism, key_group_range range,
                              std::shared_ptr<store> db);

  // The current key's key for `state` of `kind`, in key_ (reused: no allocation per access).
  const std::string& key_of(char kind, std::string_view state) const;
  const std::string& map_key_of(std::string_view state, std::string_view map_key) const;
  std::optional<std::int64_t> get(const std::string& key) const;
  void put(const std::string& key, std::int64_t v);
  void remove(const std::string& key);

  std::shared_ptr<store> store_;
  mutable std::string key_;
};

}  // namespace snapflow
