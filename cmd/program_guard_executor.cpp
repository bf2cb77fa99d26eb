#include "cmd/program_guard_executor.hpp"

#include <spdlog/spdlog.h>

#include "graph/job_graph_codec.hpp"

namespace snapflow {

program_guard_executor::program_guard_executor(std::shared_ptr<task_executor> inner,
                                               std::shared_ptr<task_executor_listener> listener,
                                               std::map<std::string, std::string> programs)
    : inner_(std::move(inner)), listener_(std::move(listener)), programs_(std::move(programs)) {}

std::optional<std::string> program_guard_executor::refusal(
    const task_deployment_descriptor& d) const {
  // The runtime executor decodes the graph again; undecodable bytes are its to report.
  auto graph = decode_job_graph(d.job_graph_bytes);
  if (!graph || !graph->program) return std::nullopt;
  const job_program& wanted = *graph->program;
  if (programs_.contains(wanted.fingerprint)) return std::nullopt;
  std::string held;
  for (const auto& [fingerprint, name] : programs_)
    held += (held.empty() ? "" : ", ") + ("'" + name + "' (fingerprint " + fingerprint + ")");
  return "refused: job " + d.job + " needs program '" + wanted.name + "' (fingerprint " +
         wanted.fingerprint + "), this worker holds " +
         (held.empty() ? std::string("no program") : held);
}

void program_guard_executor::deploy(const task_deployment_descriptor& d) {
  if (auto why = refusal(d)) {
    spdlog::error("job {}: {}", d.job, *why);
    listener_->task_state_changed(d.job, d.attempt, execution_state::failed, *why);
    return;
  }
  inner_->deploy(d);
}

void program_guard_executor::cancel(const job_id& job, const execution_attempt_id& attempt) {
  inner_->cancel(job, attempt);
}

void program_guard_executor::trigger_checkpoint(const job_id& job,
                                                const execution_attempt_id& attempt,
                                                checkpoint_id id, std::int64_t timestamp_us,
                                                const checkpoint_options& options) {
  inner_->trigger_checkpoint(job, attempt, id, timestamp_us, options);
}

void program_guard_executor::notify_checkpoint_complete(const job_id& job,
                                                        const execution_attempt_id& attempt,
                                                        checkpoint_id id) {
  inner_->notify_checkpoint_complete(job, attempt, id);
}

void program_guard_executor::notify_checkpoint_aborted(const job_id& job,
                                                       const execution_attempt_id& attempt,
                                                       checkpoint_id id,
                                                       checkpoint_id latest_completed) {
  inner_->notify_checkpoint_aborted(job, attempt, id, latest_completed);
}

void program_guard_executor::finish(const job_id& job, const execution_attempt_id& attempt) {
  inner_->finish(job, attempt);
}

void program_guard_executor::cancel_all() { inner_->cancel_all(); }

std::string program_guard_executor::data_endpoint() const { return inner_->data_endpoint(); }

std::vector<task_io_counters> program_guard_executor::take_io_counters() {
  return inner_->take_io_counters();
}

}  // namespace snapflow
