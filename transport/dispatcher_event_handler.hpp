#pragma once

#include <memory>

#include "engine/jobmaster/dispatcher.hpp"
#include "transport/worker_event_handler.hpp"

namespace snapflow::transport {

// The coordinator process's worker_event_handler: worker and task events go to the dispatcher,
// acknowledgements and declines to the checkpoint coordinator of their job.
class dispatcher_event_handler final : public worker_event_handler {
 public:
  // Record counters from heartbeats go to `io` when given (the REST API reads them there); the
  // checkpoint notifications they carry go to the job's checkpoint statistics.
  explicit dispatcher_event_handler(std::shared_ptr<dispatcher> jobs,
                                    std::shared_ptr<task_io_metrics> io = nullptr);

  worker_registry& workers() override;
  void worker_registered(const worker_id& worker, bool replaced_earlier_incarnation) override;
  void worker_lost(const worker_id& worker) override;
  void task_state_changed(const job_id& job, const execution_attempt_id& attempt,
                          execution_state state, const std::string& message) override;
  std::optional<worker_id> owner_of(const job_id& job,
                                    const execution_attempt_id& attempt) const override;
  void acknowledge_checkpoint(checkpoint_ack ack) override;
  void decline_checkpoint(const checkpoint_decline& decline) override;
  void source_exhausted(const job_id& job, const execution_attempt_id& attempt,
                        checkpoint_id last_barrier) override;
  void task_io_reported(const task_io_counters& counters) override;

 private:
  std::shared_ptr<dispatcher> jobs_;
  std::shared_ptr<task_io_metrics> io_;
};

}  // namespace snapflow::transport
