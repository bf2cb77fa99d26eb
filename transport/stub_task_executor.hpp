#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/task_executor.hpp"

namespace snapflow::transport {

// A task executor with no tasks behind it, for tests, benchmarks and jobs made of sources: every
// deployed attempt reports RUNNING at once, and a checkpoint trigger is acknowledged at once,
// without state, by every attempt of that job deployed on this worker. A completion
// notification is handled at once too: its time goes out with the next heartbeat, like the
// runtime's.
//
// Why every attempt: without a data plane no barrier flows from a source to the subtasks after
// it, so the trigger a source receives is the only sign of the checkpoint this worker gets.
// Checkpoints therefore complete only when each worker that runs a subtask of the job also runs
// one of its sources (slot sharing does so when the sources have the largest parallelism).
// Never use it for real data: nothing is processed.
//
// It lives in transport/ rather than engine/runtime/ because it only exists to exercise the
// control plane end to end (the worker binary selects it with --executor stub).
//
// Called on the worker endpoint's thread only, like every task_executor.
class stub_task_executor final : public task_executor {
 public:
  stub_task_executor(std::shared_ptr<task_executor_listener> listener, std::string data_endpoint);

  void deploy(const task_deployment_descriptor& descriptor) override;
  void cancel(const job_id& job, const execution_attempt_id& attempt) override;
  void trigger_checkpoint(const job_id& job, const execution_attempt_id& attempt,
                          checkpoint_id id, std::int64_t timestamp_us,
                          const checkpoint_options& options) override;
  void notify_checkpoint_complete(const job_id& job, const execution_attempt_id& attempt,
                                  checkpoint_id id) override;
  void notify_checkpoint_aborted(const job_id& job, const execution_attempt_id& attempt,
                                 checkpoint_id id, checkpoint_id latest_completed) override;
  void cancel_all() override;
  std::string data_endpoint() const override { return data_endpoint_; }
  // No records are counted (always 0); an entry only for attempts notified since the last call.
  std::vector<task_io_counters> take_io_counters() override;

  std::size_t deployed() const;

 private:
  struct job_tasks {
    std::set<execution_attempt_id> attempts;
    // Checkpoints acknowledged already: a worker with several source attempts of a job gets a
    // trigger for each, yet each attempt acknowledges once. The newest few are enough, since
    // triggers for one checkpoint arrive together. Sorted, with room reserved for them all, so
    // remembering one allocates nothing (a std::set node per checkpoint did).
    std::vector<checkpoint_id> acknowledged;
    // The newest checkpoint each attempt was notified of: repeats and stale ones are skipped.
    std::map<execution_attempt_id, checkpoint_id> last_notified;
  };
  using attempt_key = std::pair<job_id, execution_attempt_id>;

  std::shared_ptr<task_executor_listener> listener_;
  checkpoint_ack ack_;  // refilled for every acknowledgement (see trigger_checkpoint)
  std::string data_endpoint_;
  std::map<job_id, job_tasks> jobs_;
  // Notifications handled since the last take_io_counters, per attempt, oldest first (each at
  // most max_notified_per_report). Kept when the attempt is cancelled: they still get reported.
  std::map<attempt_key, std::vector<checkpoint_notified>> notified_;
};

}  // namespace snapflow::transport
