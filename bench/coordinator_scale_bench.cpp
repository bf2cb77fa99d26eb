// Coordinator scale over the real protocol: checkpoint latency and ack throughput of
// one snapflow-coordinator process with 1,000 and 10,000 subtasks, on `--workers`
// snapflow-worker processes (`--executor stub`, many slots each) on loopback.
//
// The job is `sequence_source -> discard_sink` over a forward edge, each at parallelism
// subtasks / 2, so slot k runs source k and sink k and every worker runs sources: the stub
// executor acknowledges a trigger for every attempt of the job on its worker (it has no data
// plane, so that is the only way its non-source subtasks hear of a checkpoint; see
// transport/stub_task_executor.hpp). What is measured is therefore the coordinator and the
// control plane alone: the triggers to every source, an ack per subtask decoded and counted,
// durable _metadata, the store, and notifications to every subtask; the triggers, acks and
// notifications travel as one batch frame per worker (docs/protocol.md, 5.7).
//
// For each size: a fresh cluster, the job submitted over REST, submit -> RUNNING timed
// (deployment), `--warmup` checkpoints skipped, then a window of `--seconds` with no REST
// traffic at all (the REST API runs on the coordinator thread). The completed checkpoints of
// the window come from GET /jobs/<id>/checkpoints (their end-to-end durations, trigger ->
// durable completion, as the coordinator measured them), and the per-subtask details of the
// last `--details` of them from GET .../checkpoints/details/<id>, which split each checkpoint
// into the last ack (trigger -> every ack received) and finalisation (the rest).
//
//   acks/s           subtasks x checkpoints completed in the window / window
//   acks/s in a ckpt subtasks / p50: how fast one checkpoint's acks are taken in
//
// With --kill, after the window: one more worker joins (so the job has slots to come back on),
// worker 1 is killed with SIGKILL, and the recovery is timed from the kill, by polling the job
// list every 10 ms:
//   detect ms        the job leaves RUNNING (the heartbeat timeout, --heartbeat-timeout-ms)
//   recover ms       the job is RUNNING again: restart, redeploy of every subtask with the
//                    states it restores from the latest checkpoint, every subtask RUNNING
//   redeploy ms      recover - detect: the part that grows with the job
// The stub acknowledges without state, so each restored state is an empty entry per old
// subtask: what grows is how many of them each deploy descriptor lists.
//
//   coordinator_scale_bench [--subtasks 1000 10000] [--workers 10] [--kill] [--json] ...
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tests/cluster/child_process.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using snapflow::testing::child_process;
using steady = std::chrono::steady_clock;
namespace fs = std::filesystem;

// The worker binary's --slots limit.
constexpr int max_slots_per_worker = 4096;
// The job file's parallelism limit (job_graph::max_parallelism_limit).
constexpr int max_parallelism = 32768;

std::atomic<bool> interrupted{false};

void on_signal(int) {
  interrupted = true;
}

struct options {
  std::vector<int> subtasks{1000, 10000};
  int workers = 10;
  int interval_ms = 100;
  int warmup = 5;
  double seconds = 10;
  int details = 3;
  int timeout_s = 120;  // per wait
  bool kill = false;
  int heartbeat_interval_ms = 500;  // with --kill only
  int heartbeat_timeout_ms = 5000;  // with --kill only
  std::string state_parent;
  bool json_output = false;
  std::string coordinator_bin = SNAPFLOW_COORDINATOR_BIN;
  std::string worker_bin = SNAPFLOW_WORKER_BIN;
  std::string log_level = "warn";
};

// Where checkpoints go unless --state-dir says: a tmpfs when there is one, so the disk's fsync
// (~0.4 ms on the benchmark VM) stays out of a measurement of the coordinator.
std::string default_state_parent() {
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return fs::temp_directory_path(ec).string();
}

double ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Nearest rank: the smallest value with at least q of the values at or below it.
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

// Sleeps in short slices so that Ctrl-C ends the run (and reaps the children) promptly.
void sleep_for(std::chrono::milliseconds total) {
  const auto until = steady::now() + total;
  while (steady::now() < until) {
    if (interrupted) throw std::runtime_error("interrupted");
    std::this_thread::sleep_for(std::min<steady::duration>(20ms, until - steady::now()));
  }
}

// User + system CPU seconds of a process so far, from /proc (0 when unreadable).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt (fields 3-13)
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Resident memory of a process in MiB, from /proc (0 when unreadable).
double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0;
}

std::string job_toml(int parallelism, const options& o, int history) {
  std::ostringstream os;
  os << "[job]\nname = \"coordinator-scale-" << 2 * parallelism
     << "\"\nparallelism = " << parallelism << "\nmax_parallelism = " << parallelism << "\n\n"
     << "[checkpointing]\ninterval_ms = " << o.interval_ms
     << "\nmode = \"exactly_once\"\nstats_history_size = " << history << "\n\n";
  // Recovery without a backoff delay: the time measured is the job master's and the workers'.
  if (o.kill) os << "[restart]\nstrategy = \"fixed_delay\"\ndelay_ms = 0\nmax_attempts = 3\n\n";
  os << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
     << "params = { count = 1000000000000, keys = 16 }\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"discard_sink\"\ninput = \"source\"\n"
     << "partition = \"forward\"\n";
  return os.str();
}

// A folder of our own, removed with its contents when this goes (also when the cluster's
// constructor throws half way).
class temp_folder {
 public:
  explicit temp_folder(const std::string& parent) {
    std::string pattern = (fs::path(parent) / "snapflow-scale-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a state folder under " + parent);
    path_ = pattern;
  }
  ~temp_folder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// One coordinator and its workers; every child is stopped and reaped when this goes, on every
// path (child_process kills what SIGTERM did not end).
class cluster {
 public:
  cluster(const options& o, int workers, int slots) : o_(o), dir_(o.state_parent) {
    coordinator_ = std::make_unique<child_process>(coordinator_args());
    if (!coordinator_->wait_for_stdout("\n", std::chrono::seconds(o.timeout_s)))
      throw std::runtime_error("the coordinator did not start: " + coordinator_->stderr_text());
    const std::string line = coordinator_->stdout_text();
    const std::string control = snapflow::testing::listening_field(line, "control");
    const std::string rest = snapflow::testing::listening_field(line, "rest");
    if (control.empty() || rest.find(':') == std::string::npos)
      throw std::runtime_error("unexpected coordinator output: " + line);
    host_ = rest.substr(0, rest.rfind(':'));
    port_ = std::stoi(rest.substr(rest.rfind(':') + 1));
    control_ = control;
    slots_ = slots;
    for (int w = 0; w < workers; ++w) add_worker();
    wait_until([&] { return get("/overview").value("taskmanagers", 0) == workers; }, 50ms,
               "the workers did not register");
  }

  // Starts one more stub worker with as many slots as the others.
  void add_worker() {
    std::vector<std::string> args{o_.worker_bin,
                                  "--coordinator",
                                  control_,
                                  "--id",
                                  "scale-w" + std::to_string(++workers_started_),
                                  "--slots",
                                  std::to_string(slots_),
                                  "--executor",
                                  "stub",
                                  "--log-level",
                                  o_.log_level};
    if (o_.kill) {
      args.insert(args.end(), {"--heartbeat-interval-ms", std::to_string(o_.heartbeat_interval_ms),
                               "--heartbeat-timeout-ms", std::to_string(o_.heartbeat_timeout_ms)});
    }
    workers_.push_back(std::make_unique<child_process>(std::move(args)));
  }

  // SIGKILL to the first worker, reaped at once; it no longer counts as a child that must live.
  void kill_first_worker() {
    workers_.front()->send_signal(SIGKILL);
    (void)workers_.front()->wait_exit(10s);
    workers_.erase(workers_.begin());
  }

  ~cluster() {
    for (auto& w : workers_) w->send_signal(SIGTERM);
    coordinator_->send_signal(SIGTERM);
    for (auto& w : workers_) (void)w->wait_exit(10s);
    (void)coordinator_->wait_exit(10s);
  }

  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  // The body and its size in bytes; an empty object when the request failed.
  json get(const std::string& path, std::size_t* bytes = nullptr) const {
    httplib::Client client(host_, port_);
    client.set_connection_timeout(5);
    client.set_read_timeout(o_.timeout_s);
    auto r = client.Get(path.c_str());
    if (!r || r->status != 200) return json::object();
    if (bytes != nullptr) *bytes = r->body.size();
    json j = json::parse(r->body, nullptr, false);
    return j.is_object() ? j : json::object();
  }

  std::string submit(const std::string& toml) const {
    httplib::Client client(host_, port_);
    client.set_read_timeout(o_.timeout_s);
    auto r = client.Post("/jobs", toml, "application/toml");
    if (!r) throw std::runtime_error("submit: no answer from the coordinator");
    if (r->status != 202)
      throw std::runtime_error("submit: HTTP " + std::to_string(r->status) + ": " + r->body);
    const std::string id = json::parse(r->body, nullptr, false).value("jobid", "");
    if (id.empty()) throw std::runtime_error("submit: no job id in " + r->body);
    return id;
  }

  // Polls `condition` every `period` until it holds; throws after --timeout-s, or at once when
  // a child exited (its stderr tail in the message).
  template <typename Condition>
  void wait_until(Condition condition, std::chrono::milliseconds period,
                  const std::string& what) const {
    const auto deadline = steady::now() + std::chrono::seconds(o_.timeout_s);
    while (!condition()) {
      check_children(what);
      if (steady::now() > deadline)
        throw std::runtime_error(what + " within " + std::to_string(o_.timeout_s) + " s");
      sleep_for(period);
    }
  }

  void check_children(const std::string& what) const {
    auto tail = [](const std::string& s) {
      return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
    };
    if (coordinator_->exited())
      throw std::runtime_error(what +
                               ": the coordinator exited: " + tail(coordinator_->stderr_text()));
    for (const auto& w : workers_)
      if (w->exited())
        throw std::runtime_error(what + ": a worker exited: " + tail(w->stderr_text()));
  }

  pid_t coordinator_pid() const { return coordinator_->pid(); }

  std::vector<std::string> coordinator_args() const {
    std::vector<std::string> args{
        o_.coordinator_bin, "--bind", "tcp://127.0.0.1:*", "--rest-host",        "127.0.0.1",
        "--rest-port",      "0",      "--state-dir",       dir_.path().string(), "--log-level",
        o_.log_level};
    if (o_.kill) {
      args.insert(args.end(), {"--heartbeat-interval-ms", std::to_string(o_.heartbeat_interval_ms),
                               "--heartbeat-timeout-ms", std::to_string(o_.heartbeat_timeout_ms)});
    }
    return args;
  }
  std::string coordinator_log() const { return coordinator_->stderr_text(); }

 private:
  const options& o_;
  temp_folder dir_;  // declared first: it goes after every child
  std::unique_ptr<child_process> coordinator_;
  std::vector<std::unique_ptr<child_process>> workers_;
  std::string control_;
  int slots_ = 0;
  int workers_started_ = 0;
  std::string host_;
  int port_ = 0;
};

struct run_result {
  int subtasks = 0;
  int workers = 0;
  int slots = 0;
  double deploy_ms = 0;
  double window_s = 0;
  std::size_t completed = 0;
  std::int64_t failed = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double acks_per_s = 0;
  double acks_per_s_in_checkpoint = 0;
  double coordinator_cpu_percent = 0;
  double coordinator_cpu_ms_per_checkpoint = 0;
  double coordinator_rss_mib = 0;
  // From the details of the last few checkpoints.
  std::size_t details_read = 0;
  double last_ack_p50_ms = 0;
  double finalize_p50_ms = 0;
  double details_kib = 0;
  double details_fetch_ms = 0;
  // With --kill.
  double detect_ms = 0;
  double recover_ms = 0;
  double coordinator_cpu_s_recovery = 0;
};

// The job's status in the job list (small at any size), empty when the request failed.
std::string job_status_of(const cluster& c, const std::string& job) {
  for (const auto& j : c.get("/jobs").value("jobs", json::array()))
    if (j.value("id", "") == job) return j.value("status", "");
  return {};
}

void measure_recovery(cluster& c, const std::string& job, run_result& r) {
  c.add_worker();
  c.wait_until([&] { return c.get("/overview").value("taskmanagers", 0) == r.workers + 1; }, 50ms,
               "the spare worker did not register");
  const double cpu_before = cpu_seconds(c.coordinator_pid());
  const auto killed = steady::now();
  c.kill_first_worker();
  c.wait_until(
      [&] {
        const std::string s = job_status_of(c, job);
        return !s.empty() && s != "RUNNING";  // empty: the request failed, which says nothing
      },
      10ms, "the job did not notice the lost worker");
  r.detect_ms = ms_between(killed, steady::now());
  c.wait_until(
      [&] {
        const std::string s = job_status_of(c, job);
        if (s == "FAILED" || s == "CANCELED" || s == "FINISHED")
          throw std::runtime_error("the job ended " + s + " instead of recovering");
        return s == "RUNNING";
      },
      10ms, "the job was not RUNNING again");
  r.recover_ms = ms_between(killed, steady::now());
  r.coordinator_cpu_s_recovery = cpu_seconds(c.coordinator_pid()) - cpu_before;
}

run_result run_one(const options& o, int subtasks) {
  run_result r;
  r.subtasks = subtasks;
  const int parallelism = subtasks / 2;
  r.workers = std::min(o.workers, parallelism);
  r.slots = (parallelism + r.workers - 1) / r.workers;
  // Every checkpoint of the warm-up and the window stays in the history, with room to spare
  // (a checkpoint of N subtasks keeps N per-subtask records there).
  const int history = o.warmup + static_cast<int>(o.seconds * 1000 / o.interval_ms) + 50;

  cluster c(o, r.workers, r.slots);
  const auto submitted = steady::now();
  const std::string job = c.submit(job_toml(parallelism, o, history));
  // The job list is small at any size: poll it, not the job's details (one entry per subtask).
  std::string state;
  c.wait_until(
      [&] {
        for (const auto& j : c.get("/jobs").value("jobs", json::array()))
          if (j.value("id", "") == job) state = j.value("status", "");
        if (state == "FAILED" || state == "CANCELED" || state == "FINISHED")
          throw std::runtime_error("the job ended " + state + " before it ran");
        return state == "RUNNING";
      },
      10ms, "the job was not RUNNING");
  r.deploy_ms = ms_between(submitted, steady::now());

  const std::string path = "/jobs/" + job + "/checkpoints";
  json stats;
  c.wait_until(
      [&] {
        stats = c.get(path);
        return stats.contains("counts") &&
               stats["counts"].value("completed", std::int64_t{0}) >= o.warmup;
      },
      50ms, std::to_string(o.warmup) + " checkpoints did not complete");
  const auto first = stats["latest"]["completed"].value("id", std::int64_t{0});
  const std::int64_t failed_before = stats["counts"].value("failed", std::int64_t{0});

  // The window: no REST request reaches the coordinator thread during it.
  const double cpu_before = cpu_seconds(c.coordinator_pid());
  const auto window_start = steady::now();
  sleep_for(std::chrono::milliseconds(static_cast<std::int64_t>(o.seconds * 1000)));
  const double cpu_after = cpu_seconds(c.coordinator_pid());
  const auto window_end = steady::now();
  stats = c.get(path);
  c.check_children("after the window");
  r.window_s = ms_between(window_start, window_end) / 1000;
  r.coordinator_cpu_percent = 100 * (cpu_after - cpu_before) / r.window_s;
  r.coordinator_rss_mib = rss_mib(c.coordinator_pid());
  if (!stats.contains("history"))
    throw std::runtime_error("no checkpoint statistics after the window");
  r.failed = stats["counts"].value("failed", std::int64_t{0}) - failed_before;

  std::vector<double> e2e_ms;
  std::vector<std::int64_t> ids;
  bool first_seen = false;
  for (const auto& h : stats["history"]) {
    const auto id = h.value("id", std::int64_t{0});
    first_seen |= id <= first;
    if (id <= first || h.value("status", "") != "COMPLETED") continue;
    e2e_ms.push_back(h.value("end_to_end_duration_us", 0.0) / 1000);
    ids.push_back(id);
  }
  if (!first_seen)
    throw std::runtime_error("the statistics history does not reach back to the window's start");
  if (e2e_ms.empty())
    throw std::runtime_error("no checkpoint completed in the " + std::to_string(o.seconds) +
                             " s window");
  r.completed = e2e_ms.size();
  r.p50_ms = percentile(e2e_ms, 0.5);
  r.p99_ms = percentile(e2e_ms, 0.99);
  r.max_ms = *std::max_element(e2e_ms.begin(), e2e_ms.end());
  r.acks_per_s = static_cast<double>(subtasks) * static_cast<double>(r.completed) / r.window_s;
  r.acks_per_s_in_checkpoint = static_cast<double>(subtasks) / (r.p50_ms / 1000);
  // Steadier than latency on a shared machine: what one checkpoint costs the coordinator
  // (triggers, acks, metadata, notifications, and the little else it does meanwhile).
  r.coordinator_cpu_ms_per_checkpoint =
      1000 * (cpu_after - cpu_before) / static_cast<double>(r.completed);

  // History is newest first: the last few checkpoints of the window.
  std::vector<double> last_ack, finalize, kib, fetch;
  for (std::size_t i = 0; i < ids.size() && i < static_cast<std::size_t>(o.details); ++i) {
    std::size_t bytes = 0;
    const auto asked = steady::now();
    const json d = c.get(path + "/details/" + std::to_string(ids[i]), &bytes);
    fetch.push_back(ms_between(asked, steady::now()));
    const auto& subs = d.value("subtasks", json::array());
    if (static_cast<int>(subs.size()) != subtasks)
      throw std::runtime_error("checkpoint " + std::to_string(ids[i]) + " details list " +
                               std::to_string(subs.size()) + " subtasks, not " +
                               std::to_string(subtasks));
    double slowest_us = 0;
    for (const auto& s : subs)
      slowest_us = std::max(slowest_us, s.value("end_to_end_duration_us", 0.0));
    last_ack.push_back(slowest_us / 1000);
    finalize.push_back((d.value("end_to_end_duration_us", 0.0) - slowest_us) / 1000);
    kib.push_back(static_cast<double>(bytes) / 1024);
  }
  r.details_read = last_ack.size();
  r.last_ack_p50_ms = percentile(last_ack, 0.5);
  r.finalize_p50_ms = percentile(finalize, 0.5);
  r.details_kib = percentile(kib, 0.5);
  r.details_fetch_ms = percentile(fetch, 0.5);
  if (o.kill) measure_recovery(c, job, r);
  return r;
}

json to_json(const run_result& r) {
  return {{"subtasks", r.subtasks},
          {"workers", r.workers},
          {"slots_per_worker", r.slots},
          {"deploy_ms", r.deploy_ms},
          {"window_s", r.window_s},
          {"completed", r.completed},
          {"failed", r.failed},
          {"end_to_end_ms", {{"p50", r.p50_ms}, {"p99", r.p99_ms}, {"max", r.max_ms}}},
          {"acks_per_s", r.acks_per_s},
          {"acks_per_s_in_checkpoint", r.acks_per_s_in_checkpoint},
          {"coordinator_cpu_percent", r.coordinator_cpu_percent},
          {"coordinator_cpu_ms_per_checkpoint", r.coordinator_cpu_ms_per_checkpoint},
          {"coordinator_rss_mib", r.coordinator_rss_mib},
          {"details_read", r.details_read},
          {"last_ack_p50_ms", r.last_ack_p50_ms},
          {"finalize_p50_ms", r.finalize_p50_ms},
          {"details_kib", r.details_kib},
          {"details_fetch_ms", r.details_fetch_ms},
          {"detect_ms", r.detect_ms},
          {"recover_ms", r.recover_ms},
          {"redeploy_ms", r.recover_ms - r.detect_ms},
          {"coordinator_cpu_s_recovery", r.coordinator_cpu_s_recovery}};
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{
      "coordinator_scale_bench: checkpoint latency and ack throughput of a real coordinator "
      "with thousands of subtasks on stub workers"};
  app.add_option("--subtasks", o.subtasks, "job sizes to run, in subtasks (even: source + sink)")
      ->check(CLI::Range(2, 2 * max_parallelism))
      ->capture_default_str();
  app.add_option("--workers", o.workers, "worker processes (slots: subtasks / 2 / workers)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--interval-ms", o.interval_ms, "checkpoint interval")
      ->check(CLI::Range(1, 60'000))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "completed checkpoints skipped before the window")
      ->check(CLI::Range(1, 10'000))
      ->capture_default_str();
  app.add_option("--seconds", o.seconds, "measurement window per size")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  app.add_option("--details", o.details,
                 "checkpoints per size whose per-subtask details are read (last ack / finalise)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--timeout-s", o.timeout_s, "bound on every wait (start, deploy, warm-up)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--state-dir", o.state_parent,
                 "where the coordinator's state folder is made (default: /dev/shm when it "
                 "exists, else the temporary folder)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--json", o.json_output, "print one JSON object instead of the table");
  app.add_flag(
      "--kill", o.kill,
      "after the window, kill a worker and time the recovery (a spare worker joins first)");
  app.add_option("--heartbeat-interval-ms", o.heartbeat_interval_ms,
                 "with --kill: heartbeat interval of the coordinator and workers")
      ->check(CLI::Range(10, 60'000))
      ->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", o.heartbeat_timeout_ms,
                 "with --kill: how long a silent worker takes to be declared lost")
      ->check(CLI::Range(20, 600'000))
      ->capture_default_str();
  app.add_option("--log-level", o.log_level, "log level of the coordinator and workers")
      ->capture_default_str();
  app.add_option("--coordinator-bin", o.coordinator_bin, "snapflow-coordinator to run")
      ->capture_default_str();
  app.add_option("--worker-bin", o.worker_bin, "snapflow-worker to run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.state_parent.empty()) o.state_parent = default_state_parent();
  for (int n : o.subtasks) {
    if (n % 2 != 0) {
      std::cerr << "coordinator_scale_bench: --subtasks " << n
                << " is odd: the job is a source and a sink of equal parallelism\n";
      return 2;
    }
    const int slots = (n / 2 + std::min(o.workers, n / 2) - 1) / std::min(o.workers, n / 2);
    if (slots > max_slots_per_worker) {
      std::cerr << "coordinator_scale_bench: " << n << " subtasks need " << slots
                << " slots per worker (at most " << max_slots_per_worker << "): raise --workers\n";
      return 2;
    }
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  double load[3] = {0, 0, 0};
  json out{{"interval_ms", o.interval_ms},
           {"warmup_checkpoints", o.warmup},
           {"window_s", o.seconds},
           {"state_dir", o.state_parent},
           {"cores", std::thread::hardware_concurrency()},
           {"runs", json::array()}};
  if (::getloadavg(load, 3) == 3) out["load_average_at_start"] = {load[0], load[1], load[2]};
  if (!o.json_output)
    std::printf(
        "coordinator_scale_bench: interval %d ms, %d warm-up checkpoints, %.1f s window, state "
        "in %s, load average %.2f\n\n"
        "| subtasks | workers x slots | deploy ms | checkpoints | failed | p50 ms | p99 ms | "
        "max ms | acks/s | acks/s in a checkpoint | coordinator CPU | CPU ms per checkpoint | "
        "last ack p50 ms | finalize p50 ms | details KiB |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        o.interval_ms, o.warmup, o.seconds, o.state_parent.c_str(), load[0]);
  int exit_code = 0;
  for (int n : o.subtasks) {
    try {
      const run_result r = run_one(o, n);
      out["runs"].push_back(to_json(r));
      if (!o.json_output) {
        std::printf(
            "| %d | %d x %d | %.0f | %zu | %lld | %.2f | %.2f | %.2f | %.0f | %.0f | "
            "%.0f%% | %.1f | %.2f | %.2f | %.0f |\n",
            r.subtasks, r.workers, r.slots, r.deploy_ms, r.completed,
            static_cast<long long>(r.failed), r.p50_ms, r.p99_ms, r.max_ms, r.acks_per_s,
            r.acks_per_s_in_checkpoint, r.coordinator_cpu_percent,
            r.coordinator_cpu_ms_per_checkpoint, r.last_ack_p50_ms, r.finalize_p50_ms,
            r.details_kib);
        if (o.kill)
          std::printf(
              "  recovery after kill -9 of a worker: detect %.0f ms, RUNNING again %.0f ms "
              "(redeploy %.0f ms), coordinator CPU %.2f s\n",
              r.detect_ms, r.recover_ms, r.recover_ms - r.detect_ms, r.coordinator_cpu_s_recovery);
        std::fflush(stdout);
      }
    } catch (const std::exception& e) {
      out["runs"].push_back({{"subtasks", n}, {"error", e.what()}});
      std::fprintf(stderr, "coordinator_scale_bench: %d subtasks: %s\n", n, e.what());
      exit_code = 1;
      if (interrupted) break;
    }
  }
  if (::getloadavg(load, 3) == 3) out["load_average_at_end"] = {load[0], load[1], load[2]};
  if (o.json_output)
    std::cout << out.dump(1) << "\n";
  else
    std::printf("\nload average at the end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  return exit_code;
}
