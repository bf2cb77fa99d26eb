#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cluster/child_process.hpp"
#include "tests/support/temp_folder.hpp"

// Helpers for tests that run the real binaries on loopback: a temporary folder, the
// coordinator process and its REST API, workers, and polling with a deadline.
namespace snapflow::testing {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Generous: sanitizer builds on a busy 2-core machine are slow. Only failures wait this long.
inline constexpr std::chrono::milliseconds patience = 20s;

// Test timing: heartbeats every 50 ms, a worker is lost after 500 ms of silence.
inline constexpr int heartbeat_interval_ms = 50;
inline constexpr int heartbeat_timeout_ms = 500;

using temp_dir = snapflow::testing::temp_folder;

// Checks `condition` every few milliseconds until it holds (true) or `within` passes (false).
// The pause between checks only paces the polling; the outcome never depends on it.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds within = patience);

struct http_result {
  int status = 0;  // 0 when there was no answer
  json body;
};

class rest_client {
 public:
  rest_client(std::string host, int port) : host_(std::move(host)), port_(port) {}
  http_result get(const std::string& path) const;
  http_result post(const std::string& path, const std::string& body) const;
  http_result patch(const std::string& path) const;
  // host:port, as `snapflow submit --coordinator` takes it.
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  std::string host_;
  int port_;
};

// snapflow-coordinator on `bind` (a free loopback port by default) with REST on a free port
// and test heartbeat timing; the constructor returns once it printed its listening line.
class coordinator_process {
 public:
  // `heartbeat_timeout_ms`: the test timing unless given (a test that must see a loss by
  // another path than the heartbeat timeout sets it far beyond its patience).
  explicit coordinator_process(const std::filesystem::path& state_dir,
                               std::vector<std::string> extra_args = {},
                               const std::string& bind = "tcp://127.0.0.1:*",
                               int heartbeat_timeout = heartbeat_timeout_ms);

  const std::string& control() const { return control_; }
  const rest_client& rest() const { return *rest_; }
  child_process& process() { return *process_; }
  json overview() const;
  // Waits until /overview shows `n` registered workers.
  bool wait_for_workers(std::size_t n, std::chrono::milliseconds within = patience) const;
  // Submits a TOML job file; returns its id.
  std::string submit(const std::string& toml) const;
  json checkpoints(const std::string& job) const;
  json job(const std::string& job) const;
  // Waits until the job has at least `n` completed checkpoints.
  bool wait_for_completed_checkpoints(const std::string& job, std::int64_t n,
                                      std::chrono::milliseconds within = patience) const;
  // Takes a savepoint of the running `job` into `target` that cancels it, through REST;
  // requires that it completes within `within` with a location and that the job ends
  // CANCELED, and returns the savepoint's folder. `context` goes into the failure messages
  // (workers' stderr, say).
  std::string savepoint_and_cancel(const std::string& job, const std::string& target,
                                   std::chrono::milliseconds within,
                                   const std::function<std::string()>& context = {}) const;

 private:
  std::unique_ptr<child_process> process_;
  std::string control_;
  std::unique_ptr<rest_client> rest_;
};

// The --data-root test workers get unless they ask for another: the system's temporary folder,
// where every test's own folder lies.
std::string test_data_root();

// A worker process (snapflow-worker, or `binary`) with test heartbeat timing.
std::unique_ptr<child_process> start_worker(const std::string& control, const std::string& id,
                                            std::vector<std::string> extra_args = {},
                                            const std::string& binary = SNAPFLOW_WORKER_BIN);

// Sends SIGTERM to the workers and the coordinator, and checks that each exits cleanly (0).
void stop_cleanly(coordinator_process& coordinator,
                  std::initializer_list<child_process*> workers);

// A job of `parallelism` sequence sources feeding as many print sinks, checkpointing every
// 50 ms: with one slot per worker, every worker hosts a source, so the stub executor (which
// acknowledges for every attempt of the job on a worker when a source is triggered) completes
// checkpoints without a data plane.
std::string sources_job(int parallelism);

}  // namespace snapflow::testing
