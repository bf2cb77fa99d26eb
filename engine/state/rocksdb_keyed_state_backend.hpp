#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/state/keyed_state_backend.hpp"
#include "engine/state/rocksdb_sst_ingestion.hpp"
#include "engine/state/state_backend_kind.hpp"

namespace snapflow {

// Flink's EmbeddedRocksDBStateBackend ("rocksdb"): keyed state in an embedded RocksDB instance
// in a local working folder of this subtask attempt, so state can be larger than memory. The
// folder is the backend's alone: whatever is in it when the backend opens is removed, and it is
// removed again once the backend and every snapshot taken from it are gone.
//
// Layout, integers big-endian so that bytewise order is key group order:
//   key   = u16 key group | u8 kind (1 value, 2 map) | u32 name length | name | u64 key
//           [| map key, for map state]
//   value = the bytes the operator stored (an int64 as int64_state_value.hpp encodes it)
// The key group comes first so that a range of key groups is one contiguous key range (a
// rescale can cut it out or drop it with one range delete).
//
// The working folder holds the instance in db/ and, for a moment, local checkpoints in chk-<id>/,
// old instances being rebuilt in restore-<n>/ and SST files being written for a restore in
// ingest/.
//
// Full checkpoints (and every savepoint): the synchronous part takes a RocksDB snapshot (no
// copy); the asynchronous part reads it into the backend-neutral keyed_state_snapshot, the same
// format as the heap backend's, so savepoints move between backends.
//
// Incremental checkpoints (`incremental`, Flink's RocksIncrementalSnapshotStrategy): the
// synchronous part makes a RocksDB checkpoint (a flush, then hard links) in chk-<id>/; the
// asynchronous part stores its SST files in the job's shared folder, except those the last
// checkpoint confirmed complete already stored, which it names again, and the few other files
// in the checkpoint's own folder (incremental_keyed_snapshot). SST files never change once
// written, so one stored under a name stays right for every later checkpoint naming it. The
// confirmed base starts empty in every backend, so the first checkpoint after a (re)start is
// full: it never names files a checkpoint of another attempt stored (Flink's NO_CLAIM).
// A restore rebuilds instances from such files: the one overlapping this subtask's key groups
// most becomes the instance, cut to them with range deletes; the owned key groups of the
// others are read out in key order into SST files, which are ingested (rocksdb_sst_ingestion).
// A restore from the neutral form (savepoints, full checkpoints, another backend's state) is
// ingested the same way: no restore writes a record through the memtable.
//
// RocksDB failing a read or a write (a full disk, a corrupt file) throws std::runtime_error
// naming the folder: the task fails, and restarts from its latest checkpoint.
class rocksdb_keyed_state_backend final : public keyed_state_backend {
 public:
  // Opens a fresh instance in `folder` (created; anything already there is removed).
  static result<std::unique_ptr<rocksdb_keyed_state_backend>> open(
      std::uint32_t max_parallelism, key_group_range range, const std::filesystem::path& folder,
      bool incremental = false,
      std::size_t block_cache_bytes = default_rocksdb_block_cache_bytes);
  ~rocksdb_keyed_state_backend() override;

  std::optional<std::string> value_bytes(std::string_view state) const override;
  void set_value_bytes(std::string_view state, std::string_view bytes) override;
  void clear_value(std::string_view state) override;
  std::int64_t add_to_value(std::string_view state, std::int64_t delta) override;

  std::optional<std::string> map_get_bytes(std::string_view state,
                                           std::string_view map_key) const override;
  void map_put_bytes(std::string_view state, std::string_view map_key,
                     std::string_view bytes) override;
  void map_remove(std::string_view state, std::string_view map_key) override;
  std::vector<std::pair<std::string, std::string>> map_entries_bytes(
      std::string_view state) const override;

  keyed_snapshot_part snapshot() const override;

  result<std::shared_ptr<incremental_keyed_snapshot>> snapshot_incremental(
      checkpoint_id id) override;
  void notify_checkpoint_complete(checkpoint_id id) override;

  // The neutral form of one old subtask's stored files, rebuilt in `scratch` (removed again):
  // how another backend restores an incremental checkpoint.
  static result<keyed_state_snapshot> read_files(const keyed_files_restore& part,
                                                 const std::filesystem::path& scratch);

  std::size_t num_entries() const override;
  // An incremental snapshot flushes the memtables: the task thread's work, never a caller's.
  std::size_t synchronous_snapshot_entries() const override {
    return incremental_ ? static_cast<std::size_t>(-1) : 0;
  }
  bool incremental() const { return incremental_; }

  const std::filesystem::path& folder() const;
  // A RocksDB integer property of the instance ("rocksdb.num-entries-active-mem-table"...), or
  // nothing when RocksDB does not know it (tests, metrics).
  std::optional<std::uint64_t> int_property(const std::string& name) const;
  // How much a restore writes into one SST file before it starts the next (tests: several
  // files out of little state).
  void set_restore_file_bytes(std::size_t bytes) { sst_file_bytes_ = bytes; }

  class store;  // the open instance and its folder, shared with deferred snapshots
  // The SST files this backend's incremental checkpoints stored, per checkpoint, and the set
  // of the latest one confirmed: what the next checkpoint may name again. Shared with the
  // snapshots that store files (they record what they stored from the writer's thread).
  class stored_files;

 private:
  rocksdb_keyed_state_backend(std::uint32_t max_parallelism, key_group_range range,
                              std::shared_ptr<store> db, bool incremental,
                              std::size_t block_cache_bytes);

  // A restore: the instance rebuilt from `files` (or its owned key groups cleared), then the
  // streamed key groups written into SST files in key order and ingested at the end.
  result<void> start_restore(const std::vector<keyed_files_restore>& files) override;
  result<void> add_restored_group(std::uint32_t group, const key_group_state& state) override;
  result<void> finish_restore() override;
  // The files' part: checks them all, then rebuilds the instance out of those overlapping this
  // subtask's key groups; without any, clears the owned key groups.
  result<void> restore_files(const std::vector<keyed_files_restore>& files);
  result<void> clear_owned();
  // Replaces the instance by `base`'s files, cut to this subtask's key groups.
  result<void> restore_base(const keyed_files_restore& base);
  // Ingests this subtask's key groups out of `other`'s files, rebuilt in `scratch`.
  result<void> ingest_owned_from(const keyed_files_restore& other,
                                 const std::filesystem::path& scratch);
  // Where a restore writes its SST files before they are ingested.
  std::filesystem::path ingest_folder() const;

  // The current key's key for `state` of `kind`, in key_ (reused: no allocation per access).
  const std::string& key_of(char kind, std::string_view state) const;
  const std::string& map_key_of(std::string_view state, std::string_view map_key) const;
  std::optional<std::string> get(const std::string& key) const;
  void put(const std::string& key, std::string_view bytes);
  void remove(const std::string& key);

  std::shared_ptr<store> store_;
  std::shared_ptr<stored_files> stored_;
  bool incremental_;
  std::size_t block_cache_bytes_;
  std::size_t sst_file_bytes_;
  std::unique_ptr<rocksdb_sst_ingestion> restore_sst_;  // the streamed restore under way
  mutable std::string key_;
};

}  // namespace snapflow
