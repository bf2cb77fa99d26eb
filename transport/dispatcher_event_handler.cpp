#include "transport/dispatcher_event_handler.hpp"

#include <cassert>
#include <utility>

#include "engine/clock.hpp"

namespace snapflow::transport {

dispatcher_event_handler::dispatcher_event_handler(std::shared_ptr<dispatcher> jobs,
                                                   std::shared_ptr<task_io_metrics> io)
    : jobs_(std::move(jobs)), io_(std::move(io)) {
  assert(jobs_);
}

void dispatcher_event_handler::task_io_reported(const task_io_counters& counters) {
  if (io_) io_->report(counters, coordinator_clock::now_us());
  if (counters.notified.empty()) return;
  // The notifications the attempt handled go to its job's checkpoint statistics (the time
  // until every subtask was notified); a job that is gone or restarted without checkpointing
  // has nowhere to put them.
  job_master* master = jobs_->find(counters.job);
  if (master == nullptr || master->coordinator() == nullptr) return;
  checkpoint_stats_tracker& stats = master->coordinator()->core().stats();
  for (const checkpoint_notified& n : counters.notified)
    stats.report_notified(n.id, counters.attempt.subtask, n.timestamp_us);
}

worker_registry& dispatcher_event_handler::workers() { return *jobs_->workers(); }

void dispatcher_event_handler::worker_registered(const worker_id& worker, bool replaced) {
  jobs_->on_worker_registered(worker, replaced);
}

void dispatcher_event_handler::worker_lost(const worker_id& worker) {
  jobs_->on_worker_lost(worker);
}

void dispatcher_event_handler::task_state_changed(const job_id& job,
                                                  const execution_attempt_id& attempt,
                                                  execution_state state,
                                                  const std::string& message) {
  jobs_->on_task_state(job, attempt, state, message);
}

std::optional<worker_id> dispatcher_event_handler::owner_of(
    const job_id& job, const execution_attempt_id& attempt) const {
  return jobs_->worker_of(job, attempt);
}

void dispatcher_event_handler::acknowledge_checkpoint(checkpoint_ack ack) {
  job_master* master = jobs_->find(ack.job);
  if (master == nullptr || master->coordinator() == nullptr) return;
  master->coordinator()->receive_ack(std::move(ack));
}

void dispatcher_event_handler::decline_checkpoint(const checkpoint_decline& decline) {
  job_master* master = jobs_->find(decline.job);
  if (master == nullptr || master->coordinator() == nullptr) return;
  master->coordinator()->receive_decline(decline);
}

void dispatcher_event_handler::source_exhausted(const job_id& job,
                                                const execution_attempt_id& attempt,
                                                checkpoint_id last_barrier) {
  jobs_->on_source_exhausted(job, attempt, last_barrier);
}

}  // namespace snapflow::transport
