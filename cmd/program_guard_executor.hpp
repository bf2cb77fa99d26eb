#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/runtime/task_executor.hpp"

namespace snapflow {

// A worker's own check that a deployed task belongs to a program it holds (the coordinator
// checks first; this is defence in depth): a job that names a user program (job_graph::program)
// whose fingerprint is not among `programs` is refused, the attempt reported FAILED with both
// programs named and nothing started. Jobs that name no program pass. Everything else is handed
// to the wrapped executor as is.
class program_guard_executor final : public task_executor {
 public:
  // `programs`: fingerprint -> program name.
  program_guard_executor(std::shared_ptr<task_executor> inner,
                         std::shared_ptr<task_executor_listener> listener,
                         std::map<std::string, std::string> programs);

  // Why this worker refuses the job in `descriptor`, or nothing.
  std::optional<std::string> refusal(const task_deployment_descriptor& descriptor) const;

  void deploy(const task_deployment_descriptor& descriptor) override;
  void cancel(const job_id& job, const execution_attempt_id& attempt) override;
  void trigger_checkpoint(const job_id& job, const execution_attempt_id& attempt, checkpoint_id id,
                          std::int64_t timestamp_us, const checkpoint_options& options) override;
  void notify_checkpoint_complete(const job_id& job, const execution_attempt_id& attempt,
                                  checkpoint_id id) override;
  void notify_checkpoint_aborted(const job_id& job, const execution_attempt_id& attempt,
                                 checkpoint_id id, checkpoint_id latest_completed) override;
  void finish(const job_id& job, const execution_attempt_id& attempt) override;
  void cancel_all() override;
  std::string data_endpoint() const override;
  std::vector<task_io_counters> take_io_counters() override;

 private:
  std::shared_ptr<task_executor> inner_;
  std::shared_ptr<task_executor_listener> listener_;
  std::map<std::string, std::string> programs_;
};

}  // namespace snapflow
