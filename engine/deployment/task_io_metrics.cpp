#include "engine/deployment/task_io_metrics.hpp"

#include <algorithm>

namespace snapflow {

void task_io_metrics::report(const task_io_counters& c, std::int64_t now_us) {
  job_entries& job = jobs_[c.job];
  auto [it, inserted] = job.subtasks.try_emplace(c.attempt.subtask);
  entry& e = it->second;
  if (!inserted && c.attempt.attempt < e.attempt) return;  // an earlier deployment's last words
  e = entry{c.attempt.attempt, c.records_in,           c.records_out,
            now_us,            c.in_flight_bytes_bound, c.buffered_in_bytes};
  job.updated_us = std::max(job.updated_us, now_us);
}

std::optional<task_io_metrics::entry> task_io_metrics::find(
    const job_id& job, const execution_attempt_id& attempt) const {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return std::nullopt;
  auto s = j->second.subtasks.find(attempt.subtask);
  if (s == j->second.subtasks.end() || s->second.attempt != attempt.attempt) return std::nullopt;
  return s->second;
}

std::int64_t task_io_metrics::last_update_us(const job_id& job) const {
  auto j = jobs_.find(job);
  return j == jobs_.end() ? 0 : j->second.updated_us;
}

}  // namespace snapflow
