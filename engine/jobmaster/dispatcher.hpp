#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "engine/jobmaster/job_master.hpp"
#include "graph/recovery_claim_mode.hpp"

namespace snapflow {

// A one-line view of a job, for `list` and `status`.
struct job_summary {
  job_id id;
  std::string name;
  job_status status = job_status::created;
  std::int64_t start_time_ms = 0;  // when it was submitted, ms since the epoch (0: unknown)
  std::int64_t end_time_ms = 0;    // when it ended for good (0: it has not, or unknown)
  std::int32_t restarts = 0;
  std::size_t subtasks = 0;
  bool waiting_for_slots = false;
  std::string waiting_reason;  // why it waits beyond too few slots (job_master::waiting_reason)
  std::string failure_cause;
};

// The coordinator's jobs (Flink's Dispatcher): accepts submissions, persists each submitted job
// in the state folder so a restarted coordinator resumes every unfinished one, and routes
// worker and task events to the right job master. Lives on the coordinator's executor.
//
// On disk: <state_dir>/jobs/<job-id>/job (the msgpack job graph, written durably before the
// submission is acknowledged), <...>/progress (`start-time-ms=N`, `restarts=N` and, once it
// ended, `end-time-ms=N`, one per line; written at submission, after each restart and at the
// end) and, once the job ended for good, <...>/terminal holding its final status (and, on the
// lines after it, the failure cause). A restarted coordinator resumes every job without
// `terminal` with its start time and restart count, and lists the others as summaries.
class dispatcher : public std::enable_shared_from_this<dispatcher> {
 public:
  struct options {
    std::filesystem::path state_dir;
    asio::any_io_executor io_executor;
    restart_strategy_config restart;
    // How long a job waits for enough free slots before it fails (job_master::options).
    std::chrono::milliseconds slot_wait_timeout{std::chrono::minutes(5)};
    // When set, each job gets its own checkpoint gateway from here instead of the shared one:
    // checkpoint_task_gateway calls carry no job id, and a transport serving several jobs
    // needs it to address the trigger (e.g. transport's coordinator_endpoint).
    std::function<std::shared_ptr<checkpoint_task_gateway>(const job_id&)> checkpoint_gateway_for;
  };
  // Why a submission did not start: `conflict`, the job id is taken; `refused`, the job or what
  // it restores from cannot run (an invalid graph, a path outside the data roots, a savepoint
  // that cannot be read or was taken at another max parallelism); `storage`, the coordinator
  // could not persist it. `none` with a job id.
  enum class submit_failure : std::uint8_t { none, conflict, refused, storage };
  using submit_callback = std::function<void(result<job_id>, submit_failure)>;

  dispatcher(asio::any_io_executor executor, std::shared_ptr<worker_registry> workers,
             std::shared_ptr<task_deployment_gateway> deployer,
             std::shared_ptr<checkpoint_task_gateway> checkpoint_gateway, options opts);

  // Validates, persists (on the I/O executor), then starts the job; `done` runs on the
  // coordinator executor, once the job is known (find() finds it) or refused. With
  // `savepoint` (a savepoint or a retained checkpoint's folder), the job starts from that
  // snapshot's state, checked before anything is persisted. `claim` says who owns the snapshot
  // afterwards (recovery_claim_mode.hpp): with CLAIM it is adopted into the job's folder
  // (snapshot_adoption.hpp) before the job is persisted and removed from its place after; a
  // job without checkpointing, a snapshot in the folder of a job that has not ended, or one
  // of the state folder's own files is refused.
  void submit(job_graph graph, std::optional<std::filesystem::path> savepoint,
              submit_callback done,
              recovery_claim_mode claim = recovery_claim_mode::no_claim);
  // Why `source` may not be claimed by the new job `new_job`: it lies in the folder of a job
  // that has not ended (or is being submitted), in the new job's own folder, or in the jobs'
  // records. Nothing when it may (it is elsewhere, or an ended job's retained checkpoint).
  std::optional<std::string> claim_refusal(const std::filesystem::path& source,
                                           const job_id& new_job) const;
  // Why `graph` may not run here: a file parameter (param_spec::is_path) outside the data
  // roots of a registered worker (any of them may be given the subtask). Workers that sent no
  // roots are not checked here (they check at deployment). Nothing when every path is inside.
  // submit() refuses such a job.
  std::optional<std::string> path_refusal(const job_graph& graph) const;
  // Resumes every persisted job that has not ended, and keeps the ended ones as summaries
  // (id, name, final status, start and end time, restarts, failure cause; never run). Blocking
  // disk reads: call once at start, before serving. Returns the ids resumed.
  std::vector<job_id> recover();

  // The job master of a job this coordinator runs or ran; nullptr for an unknown job and for
  // one that had ended before this coordinator started (summary() has it).
  job_master* find(const job_id& id) const;
  std::vector<job_summary> list() const;
  std::optional<job_summary> summary(const job_id& id) const;
  result<void> cancel(const job_id& id);

  // Events from workers.
  void on_worker_registered(const worker_id& worker, bool replaced_earlier_incarnation);
  void on_worker_lost(const worker_id& worker);
  void on_task_state(const job_id& job, const execution_attempt_id& attempt,
                     execution_state state, const std::string& message);
  void on_source_exhausted(const job_id& job, const execution_attempt_id& attempt,
                           checkpoint_id last_barrier);
  // The worker currently running `attempt` of `job`, if any.
  std::optional<worker_id> worker_of(const job_id& job, const execution_attempt_id& attempt) const;

  const std::shared_ptr<worker_registry>& workers() const { return workers_; }
  std::filesystem::path job_folder(const job_id& id) const;

 private:
  result<std::shared_ptr<job_master>> start_job(
      job_graph graph, std::optional<completed_checkpoint> restore,
      std::optional<job_master::durable_state> state = std::nullopt,
      std::int64_t start_time_ms = 0, std::int32_t restarts = 0,
      job_master::restore_origin origin = {});
  // For a job restored from a snapshot: <job folder>/restore, what it was restored from
  // (`claim-mode=...`, `path=...`), so a restarted coordinator resumes a NO_CLAIM job that had
  // no checkpoint of its own yet from the snapshot again.
  static result<void> persist_restore_origin(const std::filesystem::path& folder,
                                             const job_master::restore_origin& origin);
  // What recover() resumes such a job from: the snapshot again (NO_CLAIM), nothing (CLAIM: it
  // is the job's own checkpoint), or, when it cannot be read any more, the reason in `origin`.
  static std::optional<completed_checkpoint> read_restore_origin(
      const std::filesystem::path& folder, job_master::restore_origin& origin);
  // After a CLAIM: the adopted snapshot's folder removed, and the shared files only it used
  // removed from the old job's folder when it was another job's retained checkpoint.
  void release_claimed(const std::filesystem::path& source, const job_id& job);
  // Keeps the job that ended in `folder` (it has `terminal`) as a summary.
  void load_ended(const std::filesystem::path& folder);
  // Cleans up after a crash between an ended job's end and its coordinator's cleanup.
  void sweep_ended(const job_id& id);
  void persist_terminal(const job_id& id, job_status status, std::string cause);
  // <job folder>/progress, written durably on the I/O executor.
  void persist_progress(const job_id& id, const job_summary& s);
  // Replaces `path` durably with `text` on the io executor, in the order of the calls.
  void write_in_order(std::filesystem::path path, std::string text, std::string what);

  asio::any_io_executor executor_;
  std::shared_ptr<worker_registry> workers_;
  std::shared_ptr<task_deployment_gateway> deployer_;
  std::shared_ptr<checkpoint_task_gateway> checkpoint_gateway_;
  options options_;
  std::map<job_id, std::shared_ptr<job_master>> jobs_;
  // Jobs that had ended before this coordinator started (recover()).
  std::map<job_id, job_summary> ended_;
  // Writes of one file may run on different pool threads: each carries its number, and one
  // older than what was written already is dropped, so a file never goes back.
  struct ordered_writes {
    std::mutex mutex;
    std::uint64_t next = 0;  // coordinator thread only
    std::map<std::filesystem::path, std::uint64_t> written;
  };
  std::shared_ptr<ordered_writes> ordered_writes_ = std::make_shared<ordered_writes>();
  // Ids of submissions between submit() and their answer: a second submission under one of
  // them is a conflict, not a second writer of the same job folder.
  std::set<job_id> submitting_;
};

}  // namespace snapflow
