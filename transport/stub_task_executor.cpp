#include "transport/stub_task_executor.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

#include "engine/clock.hpp"

namespace snapflow::transport {

namespace {
constexpr std::size_t remembered_checkpoints = 64;
}

stub_task_executor::stub_task_executor(std::shared_ptr<task_executor_listener> listener,
                                       std::string data_endpoint)
    : listener_(std::move(listener)), data_endpoint_(std::move(data_endpoint)) {
  assert(listener_);
}

void stub_task_executor::deploy(const task_deployment_descriptor& d) {
  jobs_[d.job].attempts.insert(d.attempt);
  listener_->task_state_changed(d.job, d.attempt, execution_state::running, {});
}

void stub_task_executor::cancel(const job_id& job, const execution_attempt_id& attempt) {
  // Answered whether or not the attempt runs here: cancelling is idempotent (protocol 5.2).
  if (auto it = jobs_.find(job); it != jobs_.end()) {
    it->second.attempts.erase(attempt);
    it->second.last_notified.erase(attempt);
    if (it->second.attempts.empty()) jobs_.erase(it);
  }
  listener_->task_state_changed(job, attempt, execution_state::canceled, {});
}

void stub_task_executor::trigger_checkpoint(const job_id& job,
                                            const execution_attempt_id& attempt,
                                            checkpoint_id id, std::int64_t,
                                            const checkpoint_options&) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.attempts.contains(attempt)) {
    listener_->decline_checkpoint({job, attempt, id,
                                   checkpoint_failure_reason::checkpoint_declined_task_not_ready,
                                   "the attempt does not run on this worker"});
    return;
  }
  job_tasks& tasks = it->second;
  std::vector<checkpoint_id>& seen = tasks.acknowledged;
  if (seen.capacity() == 0) seen.reserve(2 * remembered_checkpoints);
  const auto at = std::lower_bound(seen.begin(), seen.end(), id);
  if (at != seen.end() && *at == id) return;
  seen.insert(at, id);  // ids come in increasing: at the end, as a rule
  // The oldest go in one move once twice as many are kept, not one move per trigger.
  if (seen.size() == 2 * remembered_checkpoints)
    seen.erase(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(remembered_checkpoints));
  // One acknowledgement kept and refilled: its job id keeps its room, so an acknowledgement
  // costs no allocation here (the listener copies what it keeps).
  ack_.job.assign(job);
  ack_.id = id;
  for (const auto& a : tasks.attempts) {
    ack_.attempt = a;
    listener_->acknowledge_checkpoint(ack_);
  }
}

void stub_task_executor::notify_checkpoint_complete(const job_id& job,
                                                    const execution_attempt_id& attempt,
                                                    checkpoint_id id) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.attempts.contains(attempt)) return;
  checkpoint_id& last = it->second.last_notified[attempt];
  if (id <= last) return;
  last = id;
  auto& pending = notified_[{job, attempt}];
  if (pending.size() >= max_notified_per_report) pending.erase(pending.begin());
  pending.push_back({id, coordinator_clock::now_us()});
}

std::vector<task_io_counters> stub_task_executor::take_io_counters() {
  std::vector<task_io_counters> out;
  out.reserve(notified_.size());
  for (auto& [key, pending] : notified_)
    out.push_back({key.first, key.second, 0, 0, std::move(pending)});
  notified_.clear();
  return out;
}

void stub_task_executor::notify_checkpoint_aborted(const job_id&, const execution_attempt_id&,
                                                   checkpoint_id, checkpoint_id) {}

void stub_task_executor::cancel_all() {
  for (const auto& [job, tasks] : jobs_)
    for (const auto& a : tasks.attempts)
      listener_->task_state_changed(job, a, execution_state::canceled, {});
  jobs_.clear();
}

std::size_t stub_task_executor::deployed() const {
  std::size_t n = 0;
  for (const auto& [_, tasks] : jobs_) n += tasks.attempts.size();
  return n;
}

}  // namespace snapflow::transport
