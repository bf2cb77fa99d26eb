#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/deployment/task_deployment.hpp"
#include "engine/deployment/task_io_metrics.hpp"
#include "graph/execution_vertex.hpp"

namespace snapflow {

// How tasks running in a worker talk back to the coordinator. The worker endpoint implements
// it; every member is thread-safe (tasks call it from their own threads) and must not block.
class task_executor_listener {
 public:
  virtual ~task_executor_listener() = default;
  virtual void task_state_changed(const job_id& job, const execution_attempt_id& attempt,
                                  execution_state state, const std::string& message) = 0;
  virtual void acknowledge_checkpoint(const checkpoint_ack& ack) = 0;
  virtual void decline_checkpoint(const checkpoint_decline& decline) = 0;
  // A bounded source attempt emitted its last record (task_status_listener::on_source_exhausted
  // says what `last_barrier` means). A listener that never runs sources may ignore it.
  virtual void source_exhausted(const job_id& /*job*/, const execution_attempt_id& /*attempt*/,
                                checkpoint_id /*last_barrier*/) {}
};

// What a worker endpoint drives: the tasks of one worker process. Called on the worker's
// control thread; implementations hand work to task threads and return at once.
class task_executor {
 public:
  virtual ~task_executor() = default;
  virtual void deploy(const task_deployment_descriptor& descriptor) = 0;
  virtual void cancel(const job_id& job, const execution_attempt_id& attempt) = 0;
  virtual void trigger_checkpoint(const job_id& job, const execution_attempt_id& attempt,
                                  checkpoint_id id, std::int64_t timestamp_us,
                                  const checkpoint_options& options) = 0;
  virtual void notify_checkpoint_complete(const job_id& job, const execution_attempt_id& attempt,
                                          checkpoint_id id) = 0;
  virtual void notify_checkpoint_aborted(const job_id& job, const execution_attempt_id& attempt,
                                         checkpoint_id id, checkpoint_id latest_completed) = 0;
  // The final-checkpoint rule's last step (stream_task::finish): an exhausted source emits
  // end-of-input and ends. An executor without bounded sources may ignore it.
  virtual void finish(const job_id& /*job*/, const execution_attempt_id& /*attempt*/) {}
  // The coordinator is gone or the process exits: stop every task.
  virtual void cancel_all() = 0;
  // Where this worker's data channels accept connections (reported at registration).
  virtual std::string data_endpoint() const = 0;
  // The record counters of every task it runs, and the final ones of tasks that ended since
  // the last call (each reported once), for the worker's heartbeat; each with the checkpoint
  // notifications its task handled since the last call (task_io_counters::notified). An
  // executor that neither counts records nor records notifications returns nothing.
  virtual std::vector<task_io_counters> take_io_counters() { return {}; }
};

}  // namespace snapflow
