#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/jobmaster/dispatcher.hpp"
#include "engine/paths/confined_folder.hpp"
#include "engine/deployment/task_io_metrics.hpp"

namespace snapflow::rest {

struct rest_request {
  std::string method;  // GET, POST, PATCH
  std::string path;    // without the query string
  std::map<std::string, std::string> query;
  std::string body;
};

struct rest_response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// The coordinator's REST API, with Flink's paths and field names so existing tools and habits
// carry over (times in milliseconds; snapflow adds `_us` fields where sub-millisecond precision
// matters). Every member runs on the coordinator's executor, where the dispatcher lives; the
// HTTP server (rest_server) only moves requests onto that executor and answers back.
//
//   GET   /jobs                                       jobs and their status
//   POST  /jobs[?fromSavepoint=PATH]                  submit a TOML job file (the body);
//                                                     answers once the job is known
//   GET   /jobs/:id                                   one job: status, vertices (with record
//                                                     counters), edges, restarts
//   PATCH /jobs/:id[?mode=cancel]                     cancel
//   GET   /jobs/:id/checkpoints                       counts, summary, latest, history
//   GET   /jobs/:id/checkpoints/config                the checkpoint configuration
//   PATCH /jobs/:id/checkpoints/config                {"interval": ms}: change the interval
//   GET   /jobs/:id/checkpoints/details/:cid          one checkpoint with per-subtask stats
//   POST  /jobs/:id/checkpoints                       trigger a checkpoint: {"request-id"}
//   GET   /jobs/:id/checkpoints/:request-id           its outcome
//   POST  /jobs/:id/savepoints                        {"target-directory", "cancel-job"}:
//                                                     the target is relative to the
//                                                     savepoint root (set_savepoint_targets)
//   GET   /jobs/:id/savepoints/:request-id            its outcome
//   GET   /overview                                   workers, slots, jobs by status
//   GET   /metrics                                    Prometheus text format
// Errors are JSON {"errors": [message]} with the right status code.
class coordinator_rest_api {
 public:
  // `io`: the record counters workers report, shown as vertex and subtask metrics when given.
  explicit coordinator_rest_api(std::shared_ptr<dispatcher> jobs,
                                std::shared_ptr<const task_io_metrics> io = nullptr);

  // Answers `request` through `answer`, on the coordinator's executor: at once for every call
  // but POST /jobs, which answers once the dispatcher knows the job (202 with its id; a GET
  // /jobs/:id right after finds it) or refused it (409 a taken id, 422 a job or savepoint
  // that cannot run, with the reason; 500 a storage failure).
  using responder = std::function<void(rest_response)>;
  void serve(const rest_request& request, responder answer);

  // Prometheus exposition of every job's checkpoint metrics (Flink's names) and the
  // coordinator's own counters. A job's series stay for ended_job_metrics_retention after it
  // ended (FINISHED, CANCELED, FAILED), so a scrape still sees its last values, and then
  // leave; jobs that had ended before this coordinator started have none.
  std::string metrics_text() const;
  static constexpr std::chrono::minutes ended_job_metrics_retention{5};

  // Counters the transport reports, shown by /overview and /metrics.
  struct transport_counters {
    std::uint64_t frames_received = 0;
    std::uint64_t bad_frames = 0;
    std::uint64_t refused_messages = 0;
    std::size_t workers = 0;
  };
  void set_transport_counters(transport_counters counters) { counters_ = counters; }

  // Where savepoints may be written and restored from (every refusal is a 400 naming the
  // folders, and nothing is read or written):
  // - a "target-directory" of a savepoint or checkpoint request, and a submitted job's
  //   savepoint_dir (the target of a request without one): a path relative to `root`, or, for
  //   savepoint_dir, an absolute one inside it; absolute paths elsewhere, `..` out, NUL and
  //   symlinks out are refused;
  // - POST /jobs?fromSavepoint=PATH: relative to `root`, or absolute inside `root` or
  //   `state_dir` (where retained checkpoints are).
  // With `anywhere`, absolute paths are taken as they are. Without a root, every named path is
  // refused.
  struct savepoint_targets {
    std::optional<confined_folder> root;
    bool anywhere = false;
    std::optional<confined_folder> state_dir;
  };
  void set_savepoint_targets(savepoint_targets targets) { targets_ = std::move(targets); }

 private:
  struct operation {
    job_id job;
    bool savepoint = false;
    bool done = false;
    bool cancel_job = false;
    request_finished outcome;
  };

  // Every call answered at once (all but POST /jobs).
  rest_response handle(const rest_request& request);
  rest_response jobs_list() const;
  void submit(const rest_request& request, responder answer);
  rest_response job_details(const job_id& id) const;
  // "ok", "stalled" (with why) or "not running": see docs/rest.md.
  nlohmann::json job_health(const job_master& m, const job_id& id) const;
  // Workers send counters with every heartbeat (1 s by default): five missed is stale.
  static constexpr std::int64_t stale_counters_ms = 5'000;
  static constexpr std::int64_t stale_checkpoint_ms = 10'000;
  // 404 for a job this coordinator cannot answer about: unknown, or ended before it started.
  rest_response missing_job(const job_id& id) const;
  rest_response cancel(const job_id& id);
  rest_response checkpoints(const job_id& id) const;
  rest_response checkpoint_config(const job_id& id) const;
  rest_response set_checkpoint_config(const job_id& id, const std::string& body);
  rest_response checkpoint_details(const job_id& id, const std::string& cid,
                                   const std::map<std::string, std::string>& query) const;
  rest_response trigger(const job_id& id, bool savepoint, const std::string& body);
  rest_response operation_status(const job_id& id, const std::string& request_id) const;
  rest_response overview() const;
  // The folder a request's target names, or the 400 that refuses it.
  result<std::string> savepoint_target(const std::string& requested) const;
  // The folder a submission restores from, or why it may not.
  // With `claim`, the source must lie under the root or the state folder even with
  // --allow-savepoint-anywhere: a claimed snapshot is moved, and the coordinator moves only
  // what lies in its own folders.
  result<std::filesystem::path> restore_source(const std::string& requested,
                                               bool claim = false) const;
  // Rewrites a job's savepoint_dir to the folder it names under the root, or says why not.
  result<void> confine_savepoint_dir(job_graph& graph) const;

  std::shared_ptr<dispatcher> jobs_;
  std::shared_ptr<const task_io_metrics> io_;
  std::map<std::string, std::shared_ptr<operation>> operations_;
  std::uint64_t next_operation_ = 1;
  transport_counters counters_;
  savepoint_targets targets_;
};

rest_response json_response(int status, const nlohmann::json& body);
// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF).
bool is_valid_utf8(std::string_view text);
rest_response error_response(int status, const std::string& message);

}  // namespace snapflow::rest
