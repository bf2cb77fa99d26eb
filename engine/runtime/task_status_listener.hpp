#pragma once

#include <string>

#include "graph/execution_vertex.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// What a subtask tells whoever runs it (the worker, which forwards to the job master; or
// local_cluster). Called on the task thread: implementations must be thread-safe and must not
// block.
class task_status_listener {
 public:
  virtual ~task_status_listener() = default;

  // INITIALIZING (restoring state), RUNNING (processing), then one of FINISHED, FAILED (with
  // the cause in `message`) or CANCELED.
  virtual void on_task_state(const execution_attempt_id& attempt, execution_state state,
                             const std::string& message) = 0;

  // A bounded source emitted its last record. `last_barrier` is the newest barrier it injected
  // before that (0 for none): every checkpoint with a greater id is taken after its last record.
  // The source stays RUNNING, still taking checkpoints, until told to finish
  // (stream_task::finish), which the job master does once every source is exhausted and a
  // checkpoint with an id above every source's last barrier completed.
  virtual void on_source_exhausted(const execution_attempt_id& attempt,
                                   checkpoint_id last_barrier) = 0;
};

}  // namespace snapflow
