#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "engine/checkpoint/completed_checkpoint.hpp"
#include "graph/ids.hpp"

namespace snapflow {

using worker_id = std::string;

// Everything a worker needs to run one subtask attempt (Flink's TaskDeploymentDescriptor).
struct task_deployment_descriptor {
  job_id job;
  execution_attempt_id attempt;
  // The whole job graph, msgpack-encoded (graph/job_graph_codec.hpp): a task needs its
  // neighbours' parallelism and partitioning, and encoding once serves every subtask.
  std::string job_graph_bytes;
  // Where this subtask and the subtasks it exchanges records with run (the data endpoint of
  // their workers), so the task can connect its channels. Not every subtask of the job: that
  // made deployment quadratic in the job's size.
  std::map<subtask_id, std::string> subtask_endpoints;
  // With CURVE on the data plane: the public key (Z85) of the worker behind each entry of
  // subtask_endpoints, the key it registered with. The worker connects to a consumer only if
  // the consumer's server proves this key, and lets a producer's key in only while a channel
  // from that producer is deployed. Empty without CURVE.
  std::map<subtask_id, std::string> subtask_public_keys;
  // Set when the job resumes from a checkpoint: the states of the old subtasks of this vertex
  // that this subtask needs, keyed by old subtask index (engine/jobmaster/state_assignment.hpp:
  // the old subtasks whose key groups overlap its own, and those its kind's operator state
  // redistribution assigns it; every old subtask for kinds that declare none). Not every old
  // state to every subtask: that made a restore quadratic in the job's size.
  std::optional<checkpoint_id> restore_checkpoint_id;
  std::map<std::uint32_t, subtask_state> restore_states;
  // Where the task writes state files for the checkpoints it takes (<state-dir>/<job-id>).
  std::string checkpoint_dir;

  bool operator==(const task_deployment_descriptor&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const task_deployment_descriptor& d) {
  os << "task_deployment{job=" << d.job << ", attempt=" << d.attempt << ", restore=";
  if (d.restore_checkpoint_id)
    os << *d.restore_checkpoint_id;
  else
    os << "none";
  return os << "}";
}

// How the job master reaches workers. The transport implements it; tests record the calls.
// Calls are made on the job master's executor and must not block it.
class task_deployment_gateway {
 public:
  virtual ~task_deployment_gateway() = default;
  virtual void deploy(const worker_id& worker, const task_deployment_descriptor& descriptor) = 0;
  virtual void cancel(const worker_id& worker, const job_id& job,
                      const execution_attempt_id& attempt) = 0;
  // The final-checkpoint rule's last step: an exhausted source emits end-of-input and ends.
  // A gateway that never deploys bounded sources may leave it empty.
  virtual void finish(const worker_id& /*worker*/, const job_id& /*job*/,
                      const execution_attempt_id& /*attempt*/) {}
};

}  // namespace snapflow
