#pragma once

#include <cstdint>

#include "engine/checkpoint/checkpoint_messages.hpp"

namespace snapflow {

// How the checkpoint coordinator reaches the subtasks of one job. The transport implements it
// (ZeroMQ to workers); tests implement it in memory. Calls are made on the coordinator's
// executor and must not block it.
class checkpoint_task_gateway {
 public:
  virtual ~checkpoint_task_gateway() = default;
  virtual void trigger_checkpoint(const execution_attempt_id& attempt, checkpoint_id id,
                                  std::int64_t timestamp_us, const checkpoint_options& options) = 0;
  virtual void notify_checkpoint_complete(const execution_attempt_id& attempt, checkpoint_id id,
                                          std::int64_t timestamp_us) = 0;
  virtual void notify_checkpoint_aborted(const execution_attempt_id& attempt, checkpoint_id id,
                                         checkpoint_id latest_completed_id) = 0;
  // The calls between hold() and flush() are one run of the coordinator's work (all the
  // triggers of a checkpoint, all its notifications): a gateway may keep them until flush() so
  // they travel together (one frame per worker), but must have sent them all when flush()
  // returns, so nothing waits for calls still to come. Calls outside such a run go at once.
  virtual void hold() {}
  virtual void flush() {}
};

}  // namespace snapflow
