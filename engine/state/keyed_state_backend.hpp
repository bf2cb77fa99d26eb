#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "engine/state/key_groups.hpp"
#include "engine/state/keyed_snapshot_part.hpp"
#include "engine/state/keyed_state_files.hpp"
#include "engine/state/keyed_state_snapshot.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// A state read as an int64 holds bytes of another length: the operator and the state disagree
// on its type (a changed job restored from old state, or two operators sharing a name).
class state_type_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Keyed state of one subtask (Flink's KeyedStateBackend): scoped to the current key, organised
// by key group so a snapshot can be split and merged again at another parallelism. Bytes in,
// bytes out: value state holds bytes per key, map state bytes -> bytes entries per key; typed
// state serialises on top. The int64 accessors on top serve the built-in operators' sums and
// counts (int64_state_value.hpp's encoding); reading a value of another length through them
// throws state_type_error, which fails the task with the state's name. Reads of missing entries
// return nothing. Task thread only (a snapshot's deferred part excepted).
//
// set_current_key is not virtual: the task calls it for every record, operators access state
// far less often than that in most jobs, and one virtual call per access is what the choice of
// backend costs.
class keyed_state_backend {
 public:
  virtual ~keyed_state_backend() = default;
  keyed_state_backend(const keyed_state_backend&) = delete;
  keyed_state_backend& operator=(const keyed_state_backend&) = delete;

  // Every state access below is for this key. Asserts that the key belongs to this subtask
  // (a partitioning bug otherwise).
  void set_current_key(std::uint64_t key) {
    const std::uint32_t group = key_groups::key_group_for_key(key, max_parallelism_);
    assert(range_.contains(group) && "a record reached a subtask that does not own its key group");
    current_key_ = key;
    current_group_ = group;
    has_key_ = true;
  }
  std::uint64_t current_key() const { return current_key_; }

  virtual std::optional<std::string> value_bytes(std::string_view state) const = 0;
  virtual void set_value_bytes(std::string_view state, std::string_view bytes) = 0;
  virtual void clear_value(std::string_view state) = 0;
  // Adds `delta` to the current key's int64 value (0 when it has none) and returns the new
  // value: a read-modify-write that keyed aggregations do per record, one lookup on the heap
  // instead of value() + set_value()'s two.
  virtual std::int64_t add_to_value(std::string_view state, std::int64_t delta) = 0;

  virtual std::optional<std::string> map_get_bytes(std::string_view state,
                                                   std::string_view map_key) const = 0;
  virtual void map_put_bytes(std::string_view state, std::string_view map_key,
                             std::string_view bytes) = 0;
  virtual void map_remove(std::string_view state, std::string_view map_key) = 0;
  // The current key's entries, ordered by map key (bytewise).
  virtual std::vector<std::pair<std::string, std::string>> map_entries_bytes(
      std::string_view state) const = 0;

  // The same for int64 values.
  std::optional<std::int64_t> value(std::string_view state) const;
  void set_value(std::string_view state, std::int64_t v);
  std::optional<std::int64_t> map_get(std::string_view state, std::string_view map_key) const;
  void map_put(std::string_view state, std::string_view map_key, std::int64_t v);
  std::vector<std::pair<std::string, std::int64_t>> map_entries(std::string_view state) const;

  // The synchronous part of a checkpoint: the state as it is now, copied or as a consistent
  // view the asynchronous part streams to the state file. Later updates never change it.
  virtual keyed_snapshot_part snapshot() const = 0;
  // snapshot(), materialised at once.
  result<keyed_state_snapshot> snapshot_now() const { return snapshot().materialize(); }
  // Replaces the state with the key groups this subtask owns out of `parts` (the snapshots of
  // every old subtask); others are skipped. Fails, changing nothing, when a snapshot was taken
  // with another max parallelism (key groups would not line up) or a key group appears twice.
  // The streamed restore below, fed from memory.
  result<void> restore(const std::vector<keyed_state_snapshot>& parts) {
    return restore_with_files({}, parts);
  }

  // A restore as a stream (a restore from state files read one key group at a time, so a state
  // larger than memory can be restored): begin_restore(), restore_group() for each key group
  // this subtask owns in strictly ascending order, end_restore(). The state is replaced: what
  // was there is gone once end_restore() succeeds. `files`: old subtasks whose state is stored
  // as the backend's own files (an incremental rocksdb checkpoint), rebuilt first; the groups
  // streamed afterwards are those of the old subtasks without (they must not be in `files`).
  // A failed step leaves the state undefined until the next begin_restore(): the task fails.
  result<void> begin_restore(const std::vector<keyed_files_restore>& files = {});
  // A key group outside this subtask's range, beyond max parallelism, not above the previous
  // one, or one `files` already hold, is refused.
  result<void> restore_group(std::uint32_t group, const key_group_state& state);
  result<void> end_restore();

  // Hands the key groups of one old subtask's state file to restore_group(): checks that the
  // file was cut at this max parallelism and skips the key groups other subtasks own. Feed it
  // the files in the order of their key groups (old subtasks' ranges are disjoint).
  class restore_sink final : public keyed_group_sink {
   public:
    restore_sink(keyed_state_backend& backend, std::uint32_t file_max_parallelism)
        : backend_(backend), max_parallelism_(file_max_parallelism) {}
    result<void> key_group(std::uint32_t group, key_group_state& state) override;
    std::uint64_t restored_groups() const { return restored_; }

   private:
    keyed_state_backend& backend_;
    std::uint32_t max_parallelism_;
    std::uint64_t restored_ = 0;
  };

  // Incremental checkpoints, for a backend that keeps its state as files and was asked to.
  // The synchronous part of checkpoint `id` as files, or null when this backend takes full
  // checkpoints only (snapshot() then). Savepoints always use snapshot(): they own their files.
  virtual result<std::shared_ptr<incremental_keyed_snapshot>> snapshot_incremental(
      checkpoint_id id) {
    (void)id;
    return std::shared_ptr<incremental_keyed_snapshot>();
  }
  // Checkpoint `id` completed: its files may be named again by later incremental checkpoints.
  virtual void notify_checkpoint_complete(checkpoint_id id) { (void)id; }
  // restore() for old subtasks of which some stored their state as files (`files`), the others
  // in the neutral form (`parts`). Only a backend that writes such files can read them (the
  // task turns them into the neutral form for the others: rocksdb_keyed_state_backend::read_files).
  result<void> restore_with_files(const std::vector<keyed_files_restore>& files,
                                  const std::vector<keyed_state_snapshot>& parts);

  std::uint32_t max_parallelism() const { return max_parallelism_; }
  const key_group_range& range() const { return range_; }
  // Keys with any state, over all key groups (tests, metrics): may scan the whole state.
  virtual std::size_t num_entries() const = 0;
  // How many entries snapshot() copies on the calling thread: whether a checkpoint's
  // synchronous part is quick enough to take on a thread that is not the task's.
  virtual std::size_t synchronous_snapshot_entries() const = 0;

 protected:
  keyed_state_backend(std::uint32_t max_parallelism, key_group_range range);

  // The backend's part of the streamed restore, after the checks begin_restore(),
  // restore_group() and end_restore() share. A backend without files of its own refuses them.
  virtual result<void> start_restore(const std::vector<keyed_files_restore>& files) = 0;
  virtual result<void> add_restored_group(std::uint32_t group, const key_group_state& state) = 0;
  virtual result<void> finish_restore() = 0;
  static error cannot_read_files();

  // The int64 `bytes` of `state` hold, or state_type_error.
  static std::int64_t int64_of(std::string_view state, std::string_view bytes);

  // One owned key group of restore()'s parts.
  struct owned_group {
    std::uint32_t group;
    const key_group_state* state;
  };
  // restore()'s checks, shared by every backend: the key groups of `parts` this subtask owns,
  // or why the parts cannot be restored.
  result<std::vector<owned_group>> owned_groups(
      const std::vector<keyed_state_snapshot>& parts) const;

  std::uint32_t current_group() const {
    assert(has_key_);
    return current_group_;
  }

  std::uint32_t max_parallelism_;
  key_group_range range_;
  std::uint64_t current_key_ = 0;
  std::uint32_t current_group_;
  bool has_key_ = false;

 private:
  // The streamed restore under way: the last key group restored, and the key groups `files`
  // hold (a neutral group among them appears twice).
  bool restoring_ = false;
  std::optional<std::uint32_t> last_restored_;
  std::vector<key_group_range> restored_from_files_;
};

}  // namespace snapflow
