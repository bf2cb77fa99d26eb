// Recovery time after kill -9 of a worker, on the real processes: snapflow-coordinator plus
// --workers snapflow-worker processes (runtime executor, 2 slots each) running the
// exactly-once example (2 sources -> keyed_sum -> two-phase-commit sink, parallelism 4) with
// spare slots, so the job can come back on the survivors at once. For each of --kills kills of a
// worker hosting subtasks, measured from the SIGKILL:
//   detect      the job leaves RUNNING (the coordinator noticed the loss)
//   running     the job is RUNNING again, restored from its latest completed checkpoint
//   checkpoint  the first checkpoint completed after that
// and which path noticed the loss (the heartbeat timeout, or a task failure report, e.g. a
// closed data connection). The killed worker is restarted only after the job is RUNNING again,
// so its re-registration cannot be what detects the loss.
//
// Baseline from the same run: the first deployment (submit -> RUNNING) of the same job on the
// same cluster; redeploy+restore (running - detect) is reported against it. Times come from
// polling REST every --poll-ms: they carry that much resolution.
//
// Every setting is the product's default unless given (heartbeats, the restart strategy), so
// the numbers are what a user gets.
//
//   recovery_bench [--kills N] [--heartbeat-interval-ms I] [--heartbeat-timeout-ms T] ...
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tests/cluster/child_process.hpp"
#include "tests/support/temp_folder.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using snapflow::testing::child_process;
using steady = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct options {
  int kills = 7;
  int workers = 3;
  // 0: the coordinator's defaults (what a user gets), which is what the bench reports.
  int heartbeat_interval_ms = 0;
  int heartbeat_timeout_ms = 0;
  int checkpoint_interval_ms = 100;
  int restart_delay_ms = -1;  // -1: the coordinator's default restart strategy
  int rate = 10'000;  // records per second per source
  int poll_ms = 2;
  int timeout_s = 30;  // per wait
  std::uint64_t seed = 0;
  std::string coordinator_bin = SNAPFLOW_COORDINATOR_BIN;
  std::string worker_bin = SNAPFLOW_WORKER_BIN;
  std::string log_level = "info";
};

std::string job_toml(const options& o, const fs::path& out) {
  std::ostringstream os;
  os << "[job]\nname = \"recovery-bench\"\nparallelism = 4\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = " << o.checkpoint_interval_ms
     << "\nmode = \"exactly_once\"\n\n";
  if (o.restart_delay_ms >= 0)
    os << "[restart]\nstrategy = \"fixed_delay\"\ndelay_ms = " << o.restart_delay_ms
       << "\nmax_attempts = -1\n\n";
  os << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = 1000000000, keys = 16, rate = " << o.rate << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 4\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"sum\"\n"
     << "parallelism = 4\nparams = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

double ms_since(steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

class cluster {
 public:
  explicit cluster(const options& o)
      : o_(o), folder_("snapflow-recovery-bench"), dir_(folder_.path()) {
    std::vector<std::string> argv{o.coordinator_bin, "--bind",       "tcp://127.0.0.1:*",
                                  "--rest-port",     "0",            "--state-dir",
                                  (dir_ / "state").string(),         "--log-level",
                                  o.log_level};
    add_heartbeat_flags(argv);
    coordinator_ = std::make_unique<child_process>(std::move(argv));
    if (!coordinator_->wait_for_stdout("\n", 20s))
      throw std::runtime_error("the coordinator did not start: " + coordinator_->stderr_text());
    const std::string line = coordinator_->stdout_text();
    control_ = snapflow::testing::listening_field(line, "control");
    const std::string rest = snapflow::testing::listening_field(line, "rest");
    host_ = rest.substr(0, rest.rfind(':'));
    port_ = std::stoi(rest.substr(rest.rfind(':') + 1));
    for (int w = 0; w < o.workers; ++w) workers_.push_back(start_worker(w));
    wait_until([&] { return get("/overview").value("taskmanagers", 0) == o.workers; },
               "the workers did not register");
  }

  ~cluster() {
    for (auto& w : workers_) w->send_signal(SIGTERM);
    coordinator_->send_signal(SIGTERM);
    for (auto& w : workers_) (void)w->wait_exit(10s);
    (void)coordinator_->wait_exit(10s);
  }

  std::string worker_name(int w) const { return "rb-w" + std::to_string(w + 1); }

  std::unique_ptr<child_process> start_worker(int w) {
    std::vector<std::string> argv{o_.worker_bin, "--coordinator", control_, "--id",
                                  worker_name(w), "--slots",      "2",      "--executor",
                                  "runtime",      "--log-level",  "warn"};
    add_heartbeat_flags(argv);
    return std::make_unique<child_process>(std::move(argv));
  }

  // Only the settings given: otherwise both sides run with their defaults.
  void add_heartbeat_flags(std::vector<std::string>& argv) const {
    if (o_.heartbeat_interval_ms > 0)
      argv.insert(argv.end(), {"--heartbeat-interval-ms", std::to_string(o_.heartbeat_interval_ms)});
    if (o_.heartbeat_timeout_ms > 0)
      argv.insert(argv.end(), {"--heartbeat-timeout-ms", std::to_string(o_.heartbeat_timeout_ms)});
  }

  json get(const std::string& path) const {
    httplib::Client client(host_, port_);
    client.set_connection_timeout(2);
    client.set_read_timeout(10);
    auto r = client.Get(path.c_str());
    if (!r || r->status != 200) return json::object();
    json j = json::parse(r->body, nullptr, false);
    return j.is_object() ? j : json::object();
  }

  std::string submit(const std::string& toml) {
    httplib::Client client(host_, port_);
    auto r = client.Post("/jobs", toml, "application/toml");
    if (!r || r->status != 202) throw std::runtime_error("submit failed");
    return json::parse(r->body, nullptr, false).value("jobid", "");
  }

  // Polls `condition` every poll_ms until it holds; throws after timeout_s.
  template <typename Condition>
  void wait_until(Condition condition, const std::string& what) {
    const auto deadline = steady::now() + std::chrono::seconds(o_.timeout_s);
    while (!condition()) {
      if (steady::now() > deadline) throw std::runtime_error(what);
      std::this_thread::sleep_for(std::chrono::milliseconds(o_.poll_ms));
    }
  }

  std::vector<std::unique_ptr<child_process>>& workers() { return workers_; }
  child_process& coordinator() { return *coordinator_; }
  const fs::path& dir() const { return dir_; }

 private:
  const options& o_;
  snapflow::testing::temp_folder folder_;  // declared before the processes: removed after them
  fs::path dir_;
  std::unique_ptr<child_process> coordinator_;
  std::vector<std::unique_ptr<child_process>> workers_;
  std::string control_;
  std::string host_;
  int port_ = 0;
};

struct kill_sample {
  double detect_ms = 0;
  double running_ms = 0;
  double checkpoint_ms = 0;
  std::string path;
};

// Which path made the job fail over: the first "failing:" line the coordinator logged after
// the kill names the cause.
std::string detection_path(const std::string& log_after_kill) {
  const auto at = log_after_kill.find("failing: ");
  if (at == std::string::npos) return "unknown";
  const std::string cause = log_after_kill.substr(at, log_after_kill.find('\n', at) - at);
  if (cause.find("was lost") != std::string::npos) {
    const auto lost = log_after_kill.find("is lost: ");
    if (lost != std::string::npos &&
        log_after_kill.compare(lost, 25, "is lost: nothing heard fr") == 0)
      return "heartbeat timeout";
    return "worker lost (" +
           (lost == std::string::npos
                ? std::string("?")
                : log_after_kill.substr(lost + 9, log_after_kill.find('\n', lost) - lost - 9)) +
           ")";
  }
  return "task failure report";
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{
      "recovery_bench: time from kill -9 of a worker to RUNNING again and to the next "
      "completed checkpoint"};
  app.add_option("--kills", o.kills, "workers killed, one after another")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--workers", o.workers, "worker processes (2 slots each; the job needs 4)")
      ->check(CLI::Range(3, 8))
      ->capture_default_str();
  app.add_option("--heartbeat-interval-ms", o.heartbeat_interval_ms,
                 "worker heartbeat interval (0: the default)")
      ->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", o.heartbeat_timeout_ms,
                 "worker heartbeat timeout (0: the default)")
      ->capture_default_str();
  app.add_option("--checkpoint-interval-ms", o.checkpoint_interval_ms,
                 "the job's checkpoint interval")
      ->capture_default_str();
  app.add_option("--restart-delay-ms", o.restart_delay_ms,
                 "a fixed restart delay for the job (-1: the default restart strategy)")
      ->capture_default_str();
  app.add_option("--rate", o.rate, "records per second per source")->capture_default_str();
  app.add_option("--poll-ms", o.poll_ms, "REST polling period (the measurement's resolution)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "victim choice (0 = random)")->capture_default_str();
  app.add_option("--coordinator-bin", o.coordinator_bin, "snapflow-coordinator to run")
      ->capture_default_str();
  app.add_option("--worker-bin", o.worker_bin, "snapflow-worker to run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.seed == 0) o.seed = std::random_device{}();
  std::mt19937_64 rng(o.seed);

  try {
    cluster c(o);
    std::printf(
        "recovery_bench: %d workers, heartbeat interval %d ms, timeout %d ms (0: default), "
        "checkpoint interval %d ms, restart delay %d ms (-1: default strategy), poll %d ms, "
        "seed %llu\n",
        o.workers, o.heartbeat_interval_ms, o.heartbeat_timeout_ms, o.checkpoint_interval_ms,
        o.restart_delay_ms, o.poll_ms, static_cast<unsigned long long>(o.seed));
    const auto submitted = steady::now();
    const std::string job = c.submit(job_toml(o, c.dir() / "out"));
    json details;
    c.wait_until(
        [&] {
          details = c.get("/jobs/" + job);
          return details.value("state", "") == "RUNNING";
        },
        "the job did not start");
    const double first_deploy_ms = ms_since(submitted);

    std::vector<kill_sample> samples;
    std::printf("%4s %-8s %10s %10s %12s %12s  %s\n", "kill", "worker", "detect_ms", "running_ms",
                "redeploy_ms", "checkpoint_ms", "path");
    for (int k = 0; k < o.kills; ++k) {
      // Steady state first: RUNNING with a checkpoint completed since the last recovery.
      std::int64_t newest = 0;
      c.wait_until(
          [&] {
            details = c.get("/jobs/" + job);
            return details.value("state", "") == "RUNNING" &&
                   details.value("last-completed-checkpoint", std::int64_t{0}) > 0;
          },
          "the job did not reach a checkpoint");
      newest = details.value("last-completed-checkpoint", std::int64_t{0});
      c.wait_until(
          [&] {
            details = c.get("/jobs/" + job);
            return details.value("last-completed-checkpoint", std::int64_t{0}) > newest;
          },
          "no checkpoint before the kill");
      const int restarts_before = details.value("restarts", 0);
      std::vector<std::string> busy;
      for (const auto& vertex : details["vertices"])
        for (const auto& subtask : vertex["subtasks"]) {
          const std::string w = subtask.value("worker", "");
          if (!w.empty() && std::find(busy.begin(), busy.end(), w) == busy.end()) busy.push_back(w);
        }
      std::sort(busy.begin(), busy.end());
      if (busy.empty()) throw std::runtime_error("no worker hosts a subtask");
      const std::string victim =
          busy[std::uniform_int_distribution<std::size_t>(0, busy.size() - 1)(rng)];
      int index = 0;
      while (index < o.workers && c.worker_name(index) != victim) ++index;
      if (index == o.workers) throw std::runtime_error("unknown worker " + victim);

      const std::size_t log_before = c.coordinator().stderr_text().size();
      kill_sample s;
      const auto killed = steady::now();
      c.workers()[static_cast<std::size_t>(index)]->send_signal(SIGKILL);
      c.wait_until(
          [&] {
            details = c.get("/jobs/" + job);
            const std::string state = details.value("state", "");
            if (state != "RUNNING" || details.value("restarts", 0) > restarts_before) {
              if (s.detect_ms == 0) s.detect_ms = ms_since(killed);
            }
            return state == "RUNNING" && details.value("restarts", 0) > restarts_before;
          },
          "the job did not come back");
      s.running_ms = ms_since(killed);
      const std::int64_t restored = details.value("last-completed-checkpoint", std::int64_t{0});
      c.wait_until(
          [&] {
            details = c.get("/jobs/" + job);
            return details.value("last-completed-checkpoint", std::int64_t{0}) > restored;
          },
          "no checkpoint after the recovery");
      s.checkpoint_ms = ms_since(killed);
      s.path = detection_path(c.coordinator().stderr_text().substr(log_before));
      std::printf("%4d %-8s %10.1f %10.1f %12.1f %12.1f  %s\n", k + 1, victim.c_str(), s.detect_ms,
                  s.running_ms, s.running_ms - s.detect_ms, s.checkpoint_ms, s.path.c_str());
      std::fflush(stdout);
      samples.push_back(s);
      (void)c.workers()[static_cast<std::size_t>(index)]->wait_exit(10s);
      c.workers()[static_cast<std::size_t>(index)] = c.start_worker(index);
      c.wait_until([&] { return c.get("/overview").value("taskmanagers", 0) == o.workers; },
                   "the restarted worker did not register");
    }

    std::vector<double> detect, running, redeploy, checkpoint;
    for (const auto& s : samples) {
      detect.push_back(s.detect_ms);
      running.push_back(s.running_ms);
      redeploy.push_back(s.running_ms - s.detect_ms);
      checkpoint.push_back(s.checkpoint_ms);
    }
    const int timeout_ms = o.heartbeat_timeout_ms > 0 ? o.heartbeat_timeout_ms : 10'000;
    std::printf("\nmedian over %zu kills (heartbeat timeout %d ms):\n", samples.size(),
                timeout_ms);
    std::printf("  kill -> RUNNING again          %8.1f ms  (target < 100 ms)\n", median(running));
    std::printf("    of which detection           %8.1f ms  (target < 50 ms; %.3fx the heartbeat "
                "timeout)\n",
                median(detect), median(detect) / timeout_ms);
    std::printf("    of which redeploy + restore  %8.1f ms  (%.2fx the first deployment)\n",
                median(redeploy), median(redeploy) / first_deploy_ms);
    std::printf("  kill -> next checkpoint        %8.1f ms\n", median(checkpoint));
    std::printf("  baseline: first deployment (submit -> RUNNING) %.1f ms\n", first_deploy_ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recovery_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
