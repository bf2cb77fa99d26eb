#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "graph/ids.hpp"

namespace snapflow {

// The lifecycle of one deployment attempt of a subtask (Flink's ExecutionState).
enum class execution_state : std::uint8_t {
  created,
  scheduled,
  deploying,
  initializing,
  running,
  finished,
  canceling,
  canceled,
  failed,
};

std::string_view to_string(execution_state state);
bool is_terminal(execution_state state);

// One parallel instance of a job vertex and its current deployment attempt. The execution graph
// owns these; the checkpoint coordinator reads their attempt and state when it triggers and
// when it sorts acknowledgements from current and stale attempts.
class execution_vertex {
 public:
  // `first_attempt`: the attempt number of the first deployment. Attempt numbers only grow
  // over a job's life, across coordinator restarts too (job_master::load_durable_state), because
  // workers drop data and messages of attempts older than one they have seen.
  execution_vertex(subtask_id id, std::uint32_t parallelism, std::string task_name,
                   std::uint32_t first_attempt = 0)
      : id_(id),
        parallelism_(parallelism),
        task_name_(std::move(task_name)),
        attempt_number_(first_attempt) {}

  subtask_id id() const { return id_; }
  std::uint32_t parallelism() const { return parallelism_; }
  const std::string& task_name() const { return task_name_; }
  execution_attempt_id current_attempt() const { return {id_, attempt_number_}; }
  execution_state state() const { return state_; }
  bool is_running() const { return state_ == execution_state::running; }

  void set_state(execution_state state) { state_ = state; }
  // A new deployment after a failure: a fresh attempt id, back to CREATED.
  execution_attempt_id reset_for_new_attempt() {
    ++attempt_number_;
    state_ = execution_state::created;
    return current_attempt();
  }

 private:
  subtask_id id_;
  std::uint32_t parallelism_;
  std::string task_name_;
  std::uint32_t attempt_number_ = 0;
  execution_state state_ = execution_state::created;
};

inline std::string_view to_string(execution_state state) {
  switch (state) {
    case execution_state::created: return "CREATED";
    case execution_state::scheduled: return "SCHEDULED";
    case execution_state::deploying: return "DEPLOYING";
    case execution_state::initializing: return "INITIALIZING";
    case execution_state::running: return "RUNNING";
    case execution_state::finished: return "FINISHED";
    case execution_state::canceling: return "CANCELING";
    case execution_state::canceled: return "CANCELED";
    case execution_state::failed: return "FAILED";
  }
  return "UNKNOWN";
}

inline bool is_terminal(execution_state state) {
  return state == execution_state::finished || state == execution_state::canceled ||
         state == execution_state::failed;
}

inline std::ostream& operator<<(std::ostream& os, execution_state s) { return os << to_string(s); }

}  // namespace snapflow
