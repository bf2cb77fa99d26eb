#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "graph/checkpoint_config.hpp"
#include "graph/job_status.hpp"

namespace snapflow {

// The completed checkpoints the coordinator keeps (after Flink's CompletedCheckpointStore): the
// newest `retained` ones, plus the savepoints on the side. In memory on the coordinator thread;
// the durability is the metadata on disk (checkpoint_storage), from which recover() rebuilds it.
// It decides retention only: it returns what to delete and never touches a file.
//
// Savepoints belong to the user: never subsumed, never counted in retention, never subsuming a
// checkpoint, never returned for deletion. At most `max_savepoints` are remembered (the oldest
// is forgotten, its files stay).
class completed_checkpoint_store {
 public:
  static constexpr std::size_t max_savepoints = 1000;

  explicit completed_checkpoint_store(int retained);
  virtual ~completed_checkpoint_store() = default;

  // Adds a durable checkpoint; returns the checkpoints it subsumed (the caller discards their
  // files). Error if the id is not greater than the latest retained checkpoint's (for a
  // savepoint: the latest savepoint's).
  virtual result<std::vector<completed_checkpoint>> add(completed_checkpoint checkpoint);

  // The latest non-savepoint checkpoint (what restore-latest uses), null if none.
  const completed_checkpoint* latest() const;
  const completed_checkpoint* latest_savepoint() const;
  // Both oldest first.
  const std::deque<completed_checkpoint>& checkpoints() const { return checkpoints_; }
  const std::vector<completed_checkpoint>& savepoints() const { return savepoints_; }

  // Rebuilds from what checkpoint_storage::recover() found: keeps the newest `retained`
  // checkpoints and the savepoints. Older checkpoints are not tracked (their files stay).
  void recover(std::vector<completed_checkpoint> from_disk);

  // The job reached a terminal state: returns the checkpoints whose files must be deleted, and
  // forgets everything. Flink's rules for retained (externalized) checkpoints:
  //   FINISHED  -> delete them all: nothing will ever resume the job;
  //   CANCELED  -> delete them with delete_on_cancellation, keep with retain_on_cancellation;
  //   FAILED    -> keep them: a failed job is exactly when a user resumes from one by hand;
  //   SUSPENDED -> keep them: the job goes on in another coordinator.
  // Any other status deletes nothing. Savepoints are never deleted. A second call returns
  // nothing.
  std::vector<completed_checkpoint> shutdown(job_status status, externalized_retention retention);

  int retained() const { return retained_; }

 private:
  const int retained_;
  std::deque<completed_checkpoint> checkpoints_;
  std::vector<completed_checkpoint> savepoints_;
};

}  // namespace snapflow
