#pragma once

#include <optional>
#include <string>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/deployment/task_io_metrics.hpp"
#include "engine/jobmaster/worker_registry.hpp"
#include "graph/execution_vertex.hpp"

namespace snapflow::transport {

// What the coordinator endpoint tells the job side about workers, and the one question it asks
// (who owns an attempt). dispatcher_event_handler maps it onto the dispatcher; benchmarks and
// tests plug in a trivial one. Every member is called on the coordinator's executor.
class worker_event_handler {
 public:
  virtual ~worker_event_handler() = default;

  // The registry the endpoint registers workers in, feeds heartbeats to and expires.
  virtual worker_registry& workers() = 0;
  virtual void worker_registered(const worker_id& worker, bool replaced_earlier_incarnation) = 0;
  virtual void worker_lost(const worker_id& worker) = 0;
  virtual void task_state_changed(const job_id& job, const execution_attempt_id& attempt,
                                  execution_state state, const std::string& message) = 0;
  // The worker running the current attempt `attempt` of `job`; nothing when the attempt is not
  // current (an earlier deployment) or the job is unknown.
  virtual std::optional<worker_id> owner_of(const job_id& job,
                                            const execution_attempt_id& attempt) const = 0;
  // Only called with attempts the sender owns.
  virtual void acknowledge_checkpoint(checkpoint_ack ack) = 0;
  virtual void decline_checkpoint(const checkpoint_decline& decline) = 0;
  // Only called with attempts the sender owns.
  virtual void source_exhausted(const job_id& job, const execution_attempt_id& attempt,
                                checkpoint_id last_barrier) = 0;
  // Record counters a worker's heartbeat carried, with the checkpoint notifications the
  // attempt handled, only for attempts the sender owns. Handlers that show no metrics ignore
  // them.
  virtual void task_io_reported(const task_io_counters& /*counters*/) {}
};

}  // namespace snapflow::transport
