#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cluster/child_process.hpp"

namespace snapflow::bench {

struct process_cluster_options {
  std::string coordinator_bin;
  std::string worker_bin;
  int workers = 1;
  int slots = 1;  // per worker
  std::filesystem::path state_dir;
  std::string log_level = "warn";
  std::vector<std::string> coordinator_args;  // appended to the coordinator's command line
  std::vector<std::string> worker_args;       // appended to every worker's command line
  // Worker w on CPU w mod the CPUs of the machine (snapflow-worker --cpus), as
  // bench/run-comparison --pin-workers places them.
  bool pin_workers = false;
};

// A REST answer: status 0 when the coordinator did not answer at all.
struct rest_answer {
  int status = 0;
  std::string body;
  nlohmann::json json() const;  // discarded (is_discarded()) when the body is not JSON
};

// snapflow-coordinator and its snapflow-worker processes on loopback, as `snapflow local` runs
// them, reused for every job a benchmark submits. The constructor returns once every worker has
// registered; the destructor stops them with SIGTERM (and child_process kills what did not exit).
class process_cluster {
 public:
  explicit process_cluster(const process_cluster_options& o);
  ~process_cluster();
  process_cluster(const process_cluster&) = delete;
  process_cluster& operator=(const process_cluster&) = delete;

  // JSON of a GET; null when there was no answer or it was not JSON.
  nlohmann::json get(const std::string& path) const;
  rest_answer post(const std::string& path, const std::string& body,
                   const std::string& content_type) const;
  rest_answer patch(const std::string& path, const std::string& body) const;

  // User + system CPU seconds the coordinator and the workers used so far.
  double cpu_seconds() const;
  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<testing::child_process> coordinator_;
  std::vector<std::unique_ptr<testing::child_process>> workers_;
  std::string host_;
  int port_ = 0;
};

}  // namespace snapflow::bench
