// snapflow: the command line. `local` runs a whole cluster on this machine; the other
// subcommands talk to a running coordinator's REST API.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "cmd/cli/commands.hpp"
#include "cmd/process_logging.hpp"
#include "cmd/thread_scheduling.hpp"
#include "graph/recovery_claim_mode.hpp"

int main(int argc, char** argv) {
  using namespace snapflow::cli;
  CLI::App app{"snapflow: stateful streaming with fast, durable checkpoints", "snapflow"};
  app.require_subcommand(1);
  app.set_config("--config", "", "read options from a TOML/INI file");

  common_options common;
  auto add_common = [&](CLI::App* sub, bool json) {
    sub->add_option("--coordinator", common.coordinator, "REST address of the coordinator: host:port, http://host:port or https://host:port")
        ->envname("SNAPFLOW_COORDINATOR")
        ->capture_default_str();
    sub->add_option("--rest-token-file", common.token_file,
                    "file holding the coordinator's REST token, sent with every call")
        ->envname("SNAPFLOW_REST_TOKEN_FILE");
    sub->add_option("--ca-cert", common.rest.ca_cert,
                    "PEM file of the CA (or the self-signed certificate) to trust for an "
                    "https:// coordinator (default: the system's)")
        ->envname("SNAPFLOW_CA_CERT");
    if (json) sub->add_flag("--json", common.json, "print JSON");
    sub->add_option("--log-level", common.log_level,
                    "this command's log level on stderr: " + snapflow::log_level_names() +
                        " (default: SPDLOG_LEVEL, else warn)");
  };

  local_options local;
  auto* l = app.add_subcommand("local", "run a coordinator and workers here and run a job");
  auto* job_option = l->add_option("--job", local.job_file, "job file (TOML)")->capture_default_str();
  l->add_option("--workers", local.workers, "worker processes")->capture_default_str();
  l->add_option("--slots", local.slots, "slots per worker")->capture_default_str();
  l->add_option("--state-dir", local.state_dir, "state folder (default: a fresh temp folder)");
  l->add_option("--executor", local.executor, "task executor of the workers: runtime or stub")
      ->capture_default_str();
  auto* worker_option =
      l->add_option("--worker", local.worker_binary,
                    "worker binary to start (default: snapflow-worker next to snapflow), e.g. "
                    "your own built on snapflow::worker");
  l->add_option("--program", local.program,
                "a user program (built on snapflow::program) instead of a job file: the workers "
                "are started as `PROGRAM worker`, the job submitted with `PROGRAM submit`")
      ->excludes(job_option)
      ->excludes(worker_option);
  l->add_option("--arg", local.program_args,
                "KEY=VALUE passed to the program's workers and its submit as --arg (repeat for "
                "more); only with --program");
  l->add_option("--rest-port", local.rest_port, "REST/web port (0 = any free port)")
      ->capture_default_str();
  l->add_option("--log-level", local.log_level,
                "log level of this command and its child processes: " +
                    snapflow::log_level_names() + " (default: SPDLOG_LEVEL, else warn)");
  l->add_option("--timeout", local.timeout_s, "cancel after this many seconds (0 = never)");
  l->add_flag("--pin-workers", local.pin_workers,
              "give each worker a share of this machine's CPUs of its own (snapflow-worker "
              "--cpus): lower checkpoint latency when nothing else needs those CPUs");
  l->add_option("--worker-scheduling", local.worker_scheduling,
                "scheduling policy of the workers' threads (snapflow-worker --scheduling): "
                "batch, their default, or normal")
      ->check(snapflow::scheduling_policy_check, "batch or normal");
  l->add_flag("--keep-running", local.keep_running,
              "keep the coordinator (REST API, web page) and the workers running after the job "
              "ends, until Ctrl-C or SIGTERM");

  std::string job, file, folder;
  std::optional<std::string> savepoint;
  std::optional<std::string> claim_mode;
  long long interval_ms = 0;
  bool cancel_after = false;

  auto* submit = app.add_subcommand("submit", "submit a job file");
  add_common(submit, true);
  submit->add_option("file", file, "job file (TOML)")->required();
  submit->add_option("--from-savepoint", savepoint,
                     "start from this savepoint folder (or a retained checkpoint's "
                     "chk-<id> folder)");
  submit->add_option("--claim-mode", claim_mode,
                     "who owns the snapshot afterwards: no-claim (it stays yours; the job never "
                     "changes or deletes it) or claim (the job takes it over as its oldest "
                     "checkpoint and deletes it once subsumed); only with --from-savepoint")
      ->check(
          [](const std::string& text) {
            return snapflow::parse_recovery_claim_mode(text)
                       ? std::string()
                       : "'" + text + "' is not a claim mode: claim or no-claim";
          },
          "claim or no-claim")
      ->needs("--from-savepoint");
  auto* list = app.add_subcommand("list", "list jobs");
  add_common(list, true);
  auto* status = app.add_subcommand("status", "show one job");
  add_common(status, true);
  status->add_option("job", job, "job id")->required();
  auto* checkpoints = app.add_subcommand("checkpoints", "checkpoint history of a job");
  add_common(checkpoints, true);
  checkpoints->add_option("job", job, "job id")->required();
  auto* checkpoint = app.add_subcommand("checkpoint", "trigger a checkpoint now and wait for it");
  add_common(checkpoint, true);
  checkpoint->add_option("job", job, "job id")->required();
  auto* sp = app.add_subcommand("savepoint", "take a savepoint and wait for it");
  add_common(sp, true);
  sp->add_option("job", job, "job id")->required();
  sp->add_option("folder", folder, "savepoint base folder, relative to the coordinator's --savepoint-root (default: the job's savepoint_dir)");
  auto* cancel = app.add_subcommand("cancel", "cancel a job");
  add_common(cancel, true);
  cancel->add_option("job", job, "job id")->required();
  cancel->add_option("--savepoint", savepoint,
                     "take a savepoint into this folder (relative to --savepoint-root) first");
  auto* set_interval =
      app.add_subcommand("set-interval", "change the checkpoint interval of a running job");
  add_common(set_interval, true);
  set_interval->add_option("job", job, "job id")->required();
  set_interval->add_option("ms", interval_ms, "new interval in milliseconds")
      ->required()
      ->check(CLI::Range(1LL, 2592000000LL));
  std::string key_prefix;
  auto* keygen = app.add_subcommand("keygen", "generate a CURVE key pair (Z85)");
  keygen->add_option("--out", key_prefix, "write PREFIX.public and PREFIX.secret");
  keygen->add_option("--log-level", common.log_level, "log level on stderr");
  (void)cancel_after;

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (104, 105, ...) would differ per mistake; a usage error is 2 here as
    // in snapflow-coordinator and snapflow-worker. --help and --version still exit 0.
    return app.exit(e) == 0 ? 0 : 2;
  }

  // One logger for this process too (role and pid on every line, on stderr so --json output
  // stays clean); the command's own results still go to stdout as plain text.
  if (auto logging = snapflow::setup_process_logging(
          "cli", l->parsed() ? local.log_level : common.log_level, "warn");
      !logging) {
    std::cerr << "snapflow: " << logging.err().message << "\n";
    return 2;
  }

  if (l->parsed()) {
    if (!local.program_args.empty() && local.program.empty()) {
      std::cerr << "snapflow local: --arg needs --program\n";
      return 2;
    }
    return run_local(local);
  }
  if (!common.token_file.empty()) {
    auto token = read_rest_token_file(common.token_file);
    if (!token) {
      std::cerr << "snapflow: --rest-token-file: " << token.err().message << "\n";
      return 2;
    }
    common.rest.token = *token;
  }
  if (submit->parsed()) return run_submit(common, file, savepoint, claim_mode);
  if (list->parsed()) return run_list(common);
  if (status->parsed()) return run_status(common, job);
  if (checkpoints->parsed()) return run_checkpoints(common, job);
  if (checkpoint->parsed()) return run_checkpoint(common, job, false, {}, false);
  if (sp->parsed()) return run_checkpoint(common, job, true, folder, false);
  if (cancel->parsed()) return run_cancel(common, job, savepoint);
  if (set_interval->parsed()) return run_set_interval(common, job, interval_ms);
  if (keygen->parsed()) return run_keygen(key_prefix);
  return 2;
}
