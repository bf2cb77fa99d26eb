#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

namespace snapflow {

// Why a checkpoint (or a request for one) failed. Only some reasons count toward the tolerable
// number of failed checkpoints: the ones that say something about the health of the job.
enum class checkpoint_failure_reason : std::uint8_t {
  periodic_scheduler_shutdown,       // a periodic request after the trigger was stopped
  too_many_checkpoint_requests,      // the request queue overflowed
  minimum_time_between_checkpoints,  // a periodic request inside the min pause
  not_all_required_tasks_running,    // a trigger subtask is not running
  io_exception,                      // the id counter could not persist
  checkpoint_expired,                // the timeout fired before every ack arrived
  checkpoint_subsumed,               // a newer checkpoint completed first
  checkpoint_declined,               // a subtask declined
  checkpoint_declined_task_not_ready,
  checkpoint_declined_subsumed,      // a subtask saw a newer barrier while aligning
  checkpoint_declined_on_cancellation_barrier,
  checkpoint_async_exception,        // a subtask's asynchronous snapshot part failed
  finalize_checkpoint_failure,       // metadata write or store add failed
  trigger_checkpoint_failure,        // a master hook failed
  checkpoint_coordinator_shutdown,
  checkpoint_coordinator_suspend,
  task_failure,                      // a task failed while the checkpoint was pending
  job_failover,                      // the job restarts; pending checkpoints are dropped
  checkpoint_declined_task_closing,  // a subtask finished (or is finishing) before acking
};

inline constexpr std::size_t checkpoint_failure_reason_count = 19;

std::string_view to_string(checkpoint_failure_reason reason);
std::optional<checkpoint_failure_reason> parse_checkpoint_failure_reason(std::string_view text);
std::ostream& operator<<(std::ostream& os, checkpoint_failure_reason reason);

// Exactly Flink's counted reasons (CheckpointFailureManager): io_exception,
// checkpoint_async_exception, checkpoint_declined and checkpoint_expired. The rest say nothing
// about the job's health (a request that never became a checkpoint, a shutdown, a task that
// ended or failed, which fails the job over by itself, a finalize failure on the coordinator).
bool counts_toward_tolerable(checkpoint_failure_reason reason);

}  // namespace snapflow
