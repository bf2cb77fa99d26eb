#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cmd/cli/rest_client.hpp"

namespace snapflow::cli {

struct common_options {
  std::string coordinator = "127.0.0.1:8081";  // REST address of a running coordinator
  bool json = false;
  std::string log_level;  // empty: SPDLOG_LEVEL, else warn
  std::string token_file;  // --rest-token-file: read into rest.token before a command runs
  rest_access rest;
};

struct local_options {
  int workers = 2;
  int slots = 4;
  std::string job_file = "examples/exactly-once-sum.toml";
  std::string state_dir;       // default: a fresh folder under the temp directory
  std::string executor = "runtime";
  std::string worker_binary;   // default: snapflow-worker next to this binary
  int rest_port = 0;           // 0 = any free port
  std::string log_level;        // empty: SPDLOG_LEVEL, else warn (this process and children)
  int timeout_s = 0;           // 0 = none
  bool pin_workers = false;    // each worker on a share of this process's CPUs (--cpus)
  std::string worker_scheduling;  // the workers' --scheduling; empty: their default (batch)
  bool keep_running = false;   // keep the cluster up after the job ends, until a signal
  // A user program (cmd/program.hpp) instead of a job file: its workers are `PROGRAM worker`
  // and the job is submitted with `PROGRAM submit`, both given `--arg` program_args.
  std::string program;
  std::vector<std::string> program_args;  // KEY=VALUE each
};

// `snapflow local`: a coordinator and N workers as child processes, the job submitted, live
// progress, a summary; 0 when a bounded job finishes, 1 when it fails or the coordinator
// exits, 130 after Ctrl-C. A worker that exits is started again (a bounded number of times).
int run_local(const local_options& options);

// `claim_mode`: "claim" or "no-claim" (any case), sent as claimMode=CLAIM|NO_CLAIM.
int run_submit(const common_options& c, const std::string& file,
               const std::optional<std::string>& from_savepoint,
               const std::optional<std::string>& claim_mode = std::nullopt);
int run_list(const common_options& c);
int run_status(const common_options& c, const std::string& job);
int run_checkpoints(const common_options& c, const std::string& job);
int run_checkpoint(const common_options& c, const std::string& job, bool savepoint,
                   const std::string& folder, bool cancel_after);
int run_cancel(const common_options& c, const std::string& job,
               const std::optional<std::string>& savepoint_folder);
int run_set_interval(const common_options& c, const std::string& job, long long interval_ms);
int run_keygen(const std::string& prefix);

}  // namespace snapflow::cli
