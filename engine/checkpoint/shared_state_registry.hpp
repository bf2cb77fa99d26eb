#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/checkpoint/completed_checkpoint.hpp"

namespace snapflow {

// The files of the job's `shared/` folder that retained checkpoints use (after Flink's
// SharedStateRegistry). An incremental checkpoint writes only the files no earlier checkpoint
// holds and names the others again; so a file is in use as long as the newest checkpoint that
// names it is retained. Each file remembers that checkpoint (its last use): once every
// retained checkpoint is newer, no retained checkpoint can name it, and it is deleted. A file
// that a later checkpoint names again is used again: incremental snapshots reuse what their
// previous one had, never something older.
//
// Who deletes what:
// - a completed checkpoint's shared files are registered here, and never deleted with it;
// - an aborted checkpoint deletes the files it wrote (shared_new) that the registry does not
//   hold, never the ones it reused;
// - a file released while checkpoints were pending stays held until every checkpoint pending
//   at its release has ended: a task that had not yet heard of the completion that released it
//   may have reused it in one of those (its barrier overtook the notification), and such a
//   checkpoint completes and keeps it;
// - a checkpoint that reuses a file the registry no longer holds cannot complete: it fails
//   rather than name a deleted file.
// In memory on the coordinator thread; after a coordinator restart it is rebuilt from the
// retained checkpoints' metadata (recover).
class shared_state_registry {
 public:
  // `checkpoint` is durable: every shared file it names is in use up to its id.
  void register_checkpoint(const completed_checkpoint& checkpoint);

  // Why `checkpoint` must not complete: the first file it reuses that is not held here (no
  // retained checkpoint uses it: it may be gone). Nothing when all are held.
  std::optional<std::string> check_reused(const completed_checkpoint& checkpoint) const;

  bool holds(const std::string& path) const { return entries_.contains(path); }

  // Releases every file last used before `lowest_retained` (the oldest checkpoint the store
  // keeps). With checkpoints pending (`newest_pending`, 0 for none) those stay held until
  // every checkpoint up to it has ended (release_after_pending); otherwise they are forgotten
  // and returned for deletion.
  std::vector<state_handle> release_older_than(checkpoint_id lowest_retained,
                                               checkpoint_id newest_pending = 0);
  // Forgets, and returns for deletion, the released files no pending checkpoint may still
  // reuse: those released while only checkpoints older than `oldest_pending` were pending (0:
  // none is pending any more).
  std::vector<state_handle> release_after_pending(checkpoint_id oldest_pending);
  // Forgets, and returns for deletion, every file (the job ended and its checkpoints go).
  std::vector<state_handle> release_all();

  // Of `handles` (of a checkpoint that failed, or of an acknowledgement that came too late),
  // those that may be deleted: its own files and the shared ones it wrote that are not held
  // here. A file it reused belongs to another checkpoint.
  std::vector<state_handle> discardable(std::vector<state_handle> handles) const;

  // Rebuilds from the checkpoints a restarted coordinator's store retains (oldest first).
  void recover(const std::deque<completed_checkpoint>& retained);

  std::size_t size() const { return entries_.size(); }
  // The bytes of the files held.
  std::uint64_t bytes() const { return bytes_; }

 private:
  struct entry {
    state_handle handle;
    checkpoint_id last_used = 0;
    // Released while checkpoints up to this id were pending: deleted once they all ended,
    // unless one of them completes naming it (register_checkpoint clears it).
    std::optional<checkpoint_id> released_pending_up_to;
  };

  // Forgets, and returns, the files whose entry `released` says so.
  template <typename Predicate>
  std::vector<state_handle> take_if(Predicate released);

  std::unordered_map<std::string, entry> entries_;
  std::uint64_t bytes_ = 0;
};

// A subsumed or discarded checkpoint's handles without its shared ones (the registry decides
// about those).
std::vector<state_handle> exclusive_handles(const completed_checkpoint& checkpoint);

// What a subtask wrote for one checkpoint (Flink's checkpointed size): its full state size when
// it reused nothing, else the bytes of the handles it did not reuse.
std::uint64_t checkpointed_size(const subtask_state& state);

}  // namespace snapflow
