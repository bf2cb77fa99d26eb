#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "engine/checkpoint/checkpoint_failure_reason.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Counts consecutive failed checkpoints (after Flink's CheckpointFailureManager) and fails the
// job once more than `tolerable_failures` failed in a row.
//
// Only reasons for which counts_toward_tolerable() holds count; each checkpoint id counts once
// (a decline followed by the abort of the same checkpoint is one failure); failures of ids at or
// below the last successful one are stale and ignored; a success ends the streak. When the count
// first exceeds the tolerable number the fail callback runs, exactly once per streak; the streak
// then stops counting until a success or reset(), since the job is already on its way down.
//
// Coordinator thread only. Callbacks run synchronously inside handle_checkpoint_failure: the
// caller (the execution graph) posts them to the job master's executor, so the job is failed
// from outside the coordinator.
class checkpoint_failure_manager {
 public:
  struct callbacks {
    std::function<void(const std::string& cause)> fail_job;
    std::function<void(const std::string& cause, const execution_attempt_id& task)>
        fail_job_due_to_task_failure;
  };

  checkpoint_failure_manager(int tolerable_failures, callbacks cb);

  // `id` is nullopt for failures before an id was allocated (they always count if the reason
  // counts). `failing_task` names the subtask whose failure caused this one, if any.
  void handle_checkpoint_failure(std::optional<checkpoint_id> id, checkpoint_failure_reason reason,
                                 const std::string& message,
                                 std::optional<execution_attempt_id> failing_task = std::nullopt);
  void handle_checkpoint_success(checkpoint_id id);
  // The job restarted: forget the streak (the last successful id stays).
  void reset();

  int continuous_failure_count() const { return count_; }
  int tolerable_failures() const { return tolerable_failures_; }
  // The fail callback fired in this streak.
  bool job_failed() const { return job_failed_; }
  std::optional<checkpoint_id> last_success() const { return last_success_; }

 private:
  const int tolerable_failures_;
  callbacks callbacks_;
  int count_ = 0;
  bool job_failed_ = false;
  std::optional<checkpoint_id> last_success_;
  // Ids counted in this streak; at most tolerable_failures + 1 entries, since counting stops
  // once the job failed.
  std::set<checkpoint_id> counted_;
};

}  // namespace snapflow
