#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "engine/state/key_group_walk.hpp"
#include "engine/state/keyed_state_files.hpp"
#include "engine/state/keyed_state_snapshot.hpp"

namespace snapflow {

// Takes a keyed state one key group at a time (a state file being streamed, or a collector).
class keyed_group_sink {
 public:
  virtual ~keyed_group_sink() = default;
  // Each non-empty key group once, in ascending order. The sink may take the state's contents;
  // the caller clears it before the next group. An error stops the walk and is returned.
  virtual result<void> key_group(std::uint32_t group, key_group_state& state) = 0;
  // The same for a key group its holder walks in place (a backend's own tables). A sink that
  // writes as it is walked overrides this; by default the neutral form is collected and handed
  // to key_group().
  virtual result<void> walked_key_group(std::uint32_t group, const key_group_walk& walk);
};

// The sink that keeps every key group: the whole state in memory.
class keyed_snapshot_collector final : public keyed_group_sink {
 public:
  explicit keyed_snapshot_collector(keyed_state_snapshot& out) : out_(out) {}
  result<void> key_group(std::uint32_t group, key_group_state& state) override {
    out_.key_groups.emplace(group, std::move(state));
    return success();
  }

 private:
  keyed_state_snapshot& out_;
};

// A consistent view of a backend's keyed state, taken in a checkpoint's synchronous part and
// turned into the neutral form in its asynchronous part, off the task thread, while the task
// goes on changing the state. Holds what the view needs (the store, its snapshot) until it is
// destroyed, whatever happened to the backend meanwhile.
class deferred_keyed_snapshot {
 public:
  virtual ~deferred_keyed_snapshot() = default;
  virtual std::uint32_t max_parallelism() const = 0;
  // Any thread; at most once (either this or materialize()). Hands the key groups to `sink`
  // one at a time, holding at most one of them in the neutral form, so a state larger than
  // memory can be written out; releases the view when done.
  virtual result<void> write_to(keyed_group_sink& sink) = 0;
  // The whole state at once (tests, and callers that need it in memory), on top of write_to().
  result<keyed_state_snapshot> materialize();
};

// The synchronous part of an incremental checkpoint (Flink's RocksIncrementalSnapshotStrategy):
// the backend's files as they were at the barrier, set aside locally. Its asynchronous part
// stores them: files a confirmed checkpoint of this backend already stored are named again
// (shared_reused), the others are copied into the job's shared folder (shared_new) or, for the
// small files that describe the instance, into the checkpoint's own folder (exclusive).
class incremental_keyed_snapshot {
 public:
  struct stored {
    keyed_state_files manifest;       // goes into the subtask's state file
    std::vector<state_handle> handles;  // shared ones relative to the shared folder, exclusive
                                        // ones relative to the checkpoint's folder
    std::uint64_t full_size = 0;        // every file's bytes: the state's size
    std::uint64_t written_size = 0;     // bytes this checkpoint copied
  };
  virtual ~incremental_keyed_snapshot() = default;
  // Any thread; at most once. `name_prefix` makes this subtask attempt's file names unique in
  // the shared folder (with a random part: an attempt number repeats across restarts of the
  // job's coordinator). Whatever it copied is removed again when it fails.
  virtual result<stored> store(const std::filesystem::path& shared_folder,
                               const std::filesystem::path& checkpoint_folder,
                               const std::string& name_prefix) = 0;
};

// What a backend's synchronous snapshot yields: the state itself, already copied (the heap
// backend: a copy costs less than a hand-off), or a deferred view (rocksdb: a copy of a state
// larger than memory cannot be made on the task thread).
struct keyed_snapshot_part {
  keyed_state_snapshot ready;  // the state, when `deferred` is null
  // Shared: the hand-off to the snapshot writer is a copyable std::function.
  std::shared_ptr<deferred_keyed_snapshot> deferred;

  // The neutral form, whichever way it was taken (tests, and anything that needs it at once).
  result<keyed_state_snapshot> materialize() &&;
};

}  // namespace snapflow
