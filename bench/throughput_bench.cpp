// Records per second through sequence_source -> key_by -> keyed_sum -> sink at parallelism 2,
// with checkpointing off, every 100 ms and every 10 ms, in one run: the cost of checkpointing is
// reported as a ratio against the checkpointing-off runs measured in the same run, on the same
// cluster, interleaved with them (configurations take turns, so drift on a shared machine hits
// every configuration alike). Each configuration runs --repeats times; the median counts.
//
// Deployments measured:
//   - cluster: the real processes, as `snapflow local` runs them: snapflow-coordinator plus
//     --workers snapflow-worker processes (runtime executor) on loopback, the job submitted over
//     REST. Time = submit until the job reports FINISHED (deploy and the final checkpoint
//     included: they are part of what a user waits for).
//   - local_cluster (--local-cluster): the same job in this process over local channels.
// Sinks: two_phase_commit_file_sink (the real, exactly-once one; its committed output is
// counted after each run to make sure every record arrived) and discard_sink (what the pipeline
// costs without a sink's own work).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench/support/machine_cpu.hpp"
#include "bench/support/median_interval.hpp"
#include "bench/support/process_cluster.hpp"
#include "engine/cluster/local_cluster.hpp"
#include "graph/job_file.hpp"
#include "tests/cluster/child_process.hpp"
#include "tests/support/temp_folder.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using snapflow::bench::interval_of_median;
using snapflow::bench::machine_cpu;
using snapflow::bench::median;
using snapflow::bench::median_interval;
using snapflow::bench::process_cluster;
using snapflow::testing::self_cpu_seconds;
using snapflow::testing::temp_folder;
namespace fs = std::filesystem;

struct options {
  std::int64_t records = 4'000'000;
  std::int64_t keys = 128;
  int repeats = 3;
  int workers = 1;
  int slots = 0;  // 0: enough for the job on the given workers
  std::vector<int> intervals_ms{0, 100, 10};
  std::vector<std::string> sinks{"2pc", "discard"};
  std::string mode = "exactly_once";  // checkpointing mode of the checkpointed runs
  int inline_state_max_bytes = -1;    // -1: the job file default
  bool cluster = true;
  bool local_cluster = false;
  std::string coordinator_bin = SNAPFLOW_COORDINATOR_BIN;
  std::string worker_bin = SNAPFLOW_WORKER_BIN;
  std::string log_level = "warn";
  int timeout_s = 300;
};

std::string sink_kind(const std::string& sink) {
  return sink == "2pc" ? "two_phase_commit_file_sink" : "discard_sink";
}

std::string job_toml(const options& o, int interval_ms, const std::string& sink,
                     const fs::path& out) {
  std::ostringstream os;
  os << "[job]\nname = \"throughput-" << sink << "-" << interval_ms
     << "\"\nparallelism = 2\nmax_parallelism = 128\n\n";
  if (interval_ms > 0) {
    os << "[checkpointing]\ninterval_ms = " << interval_ms << "\nmode = \"" << o.mode << "\"\n";
    if (o.inline_state_max_bytes >= 0)
      os << "inline_state_max_bytes = " << o.inline_state_max_bytes << "\n";
    os << "\n";
  }
  os << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = " << o.records << ", keys = " << o.keys << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 2\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"" << sink_kind(sink)
     << "\"\ninput = \"sum\"\npartition = \"forward\"\nparallelism = 2\n";
  if (sink == "2pc") os << "params = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

// Lines in the committed files of a 2PC sink's output folder (staging files are dot-named).
std::int64_t committed_lines(const fs::path& out) {
  std::int64_t lines = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    if (!entry.is_regular_file() || entry.path().filename().string().starts_with(".")) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> buf(1 << 16);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      lines += std::count(buf.data(), buf.data() + in.gcount(), '\n');
    }
  }
  return lines;
}

struct run_result {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system CPU of the processes that ran the job
  machine_cpu machine;     // the whole machine over the run
  std::int64_t checkpoints = 0;
  bool ok = false;
  std::string problem;
};


// One job on the cluster: submit, wait until it ends, measure.
run_result run_job(const process_cluster& cluster, const std::string& toml, int timeout_s) {
  run_result out;
  const double cpu_before = cluster.cpu_seconds();
  const machine_cpu machine_before = machine_cpu::now();
  httplib::Client client(cluster.host(), cluster.port());
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  client.set_keep_alive(true);
  const auto start = std::chrono::steady_clock::now();
  auto submitted = client.Post("/jobs", toml, "application/toml");
  if (!submitted || submitted->status != 202) {
    out.problem = "submit failed: " + (submitted ? submitted->body : std::string("no answer"));
    return out;
  }
  const std::string job = json::parse(submitted->body, nullptr, false).value("jobid", "");
  const auto deadline = start + std::chrono::seconds(timeout_s);
  std::string state;
  // Polling paces the measurement only: 2 ms in runs of seconds.
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = client.Get(("/jobs/" + job).c_str());
    if (r && r->status == 200) {
      state = json::parse(r->body, nullptr, false).value("state", "");
      if (state == "FINISHED" || state == "FAILED" || state == "CANCELED") break;
    }
    std::this_thread::sleep_for(2ms);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.cpu_seconds = cluster.cpu_seconds() - cpu_before;
  out.machine = machine_cpu::now() - machine_before;
  const json cps = cluster.get("/jobs/" + job + "/checkpoints");
  if (cps.is_object() && cps.contains("counts"))
    out.checkpoints = cps["counts"].value("completed", std::int64_t{0});
  out.ok = state == "FINISHED";
  if (!out.ok) {
    out.problem = "job ended " + (state.empty() ? std::string("(no state)") : state);
    const json details = cluster.get("/jobs/" + job);
    if (details.contains("failure-cause"))
      out.problem += ": " + details["failure-cause"].get<std::string>();
    (void)client.Patch(("/jobs/" + job + "?mode=cancel").c_str());
  }
  return out;
}

run_result run_local_cluster(const std::string& toml, const fs::path& state_dir, int timeout_s) {
  run_result out;
  auto graph = snapflow::parse_job_file(toml, "throughput.toml");
  if (!graph) {
    out.problem = graph.error().what();
    return out;
  }
  snapflow::local_cluster_options lo;
  lo.state_dir = state_dir;
  // As a worker's runtime executor and data plane do.
  lo.batch_size = 256;
  lo.channel_capacity_batches = 8;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_before = self_cpu_seconds();
  const machine_cpu machine_before = machine_cpu::now();
  std::optional<snapflow::result<snapflow::job_status>> status;
  std::int64_t checkpoints = 0;
  {
    snapflow::local_cluster cluster(std::move(graph).value(), lo);
    status.emplace(cluster.run(std::chrono::seconds(timeout_s)));
    checkpoints = static_cast<std::int64_t>(cluster.completed_checkpoints());
  }  // joined: every thread's CPU is counted
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.cpu_seconds = self_cpu_seconds() - cpu_before;
  out.machine = machine_cpu::now() - machine_before;
  out.checkpoints = checkpoints;
  out.ok = *status && **status == snapflow::job_status::finished;
  if (!out.ok) out.problem = *status ? "job did not finish" : status->err().message;
  return out;
}

struct config_key {
  std::string deployment;
  std::string sink;
  int interval_ms = 0;
  auto operator<=>(const config_key&) const = default;
};

struct samples {
  std::vector<double> rate;
  std::vector<int> repeat;  // the repeat each rate came from, to pair it with the baseline's
  std::vector<double> cpu_ns_per_record;
  std::vector<double> machine_ns_per_record;  // the machine's busy CPU time per record
  std::vector<double> idle_share;             // the machine's idle share over the run
  std::vector<double> checkpoints;
};

std::string interval_name(int ms) { return ms == 0 ? "off" : std::to_string(ms) + " ms"; }

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"throughput_bench: records/s through source -> keyed_sum -> sink at parallelism 2, "
               "checkpointing off vs on, in one run"};
  app.add_option("--records", o.records, "records per run (both sources together)")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--keys", o.keys, "distinct keys")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "runs per configuration (the median is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--workers", o.workers, "worker processes")
      ->check(CLI::Range(1, 6))
      ->capture_default_str();
  app.add_option("--slots", o.slots, "slots per worker (default: enough for the job's 6 subtasks)")
      ->check(CLI::Range(0, 64));
  app.add_option("--intervals", o.intervals_ms, "checkpoint intervals in ms; 0 = off, the baseline")
      ->delimiter(',')
      ->check(CLI::Range(0, 3'600'000))
      ->capture_default_str();
  app.add_option("--sinks", o.sinks, "2pc (two_phase_commit_file_sink) and/or discard")
      ->delimiter(',')
      ->check(CLI::IsMember({"2pc", "discard"}))
      ->capture_default_str();
  app.add_option("--mode", o.mode,
                 "checkpointing mode of the checkpointed runs: exactly_once aligns barriers, "
                 "at_least_once does not (what alignment costs)")
      ->check(CLI::IsMember({"exactly_once", "at_least_once"}))
      ->capture_default_str();
  app.add_option("--inline-state-max-bytes", o.inline_state_max_bytes,
                 "the job's inline_state_max_bytes (default: the job file's): larger keeps the "
                 "keyed sums' state in the acknowledgement, no state file per checkpoint")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--local-cluster", o.local_cluster, "also measure the in-process local_cluster");
  app.add_flag("--processes,!--no-processes", o.cluster,
               "measure the multi-process cluster (default; --no-processes skips it)");
  app.add_option("--coordinator-bin", o.coordinator_bin, "snapflow-coordinator to run")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  app.add_option("--worker-bin", o.worker_bin, "snapflow-worker to run")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  app.add_option("--log-level", o.log_level, "log level of the processes")->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "seconds one run may take")
      ->check(CLI::Range(1, 86'400))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (std::find(o.intervals_ms.begin(), o.intervals_ms.end(), 0) == o.intervals_ms.end())
    o.intervals_ms.insert(o.intervals_ms.begin(), 0);  // the baseline is always measured
  if (!o.cluster && !o.local_cluster) {
    std::cerr << "throughput_bench: nothing to measure (--no-processes without --local-cluster)\n";
    return 2;
  }

  std::cout << "throughput_bench: " << o.records << " records, " << o.keys << " keys, "
            << o.repeats << " repeats; sequence_source(2) -> hash -> keyed_sum(2) -> sink(2)\n"
            << "machine: " << std::thread::hardware_concurrency() << " hardware threads\n";
  temp_folder tmp("snapflow-throughput-bench");
  std::map<config_key, samples> results;
  int failures = 0;
  try {
    std::unique_ptr<process_cluster> cluster;
    if (o.cluster) {
      snapflow::bench::process_cluster_options co;
      co.coordinator_bin = o.coordinator_bin;
      co.worker_bin = o.worker_bin;
      co.workers = o.workers;
      co.slots = o.slots > 0 ? o.slots : (6 + o.workers - 1) / o.workers;
      co.state_dir = tmp.path() / "cluster-state";
      co.log_level = o.log_level;
      cluster = std::make_unique<process_cluster>(co);
      std::cout << "cluster: 1 coordinator + " << o.workers << " worker process(es)\n";
    }
    int run_index = 0;
    for (int r = 0; r < o.repeats; ++r) {
      for (const std::string deployment : {"processes", "local_cluster"}) {
        if (deployment == "processes" && !o.cluster) continue;
        if (deployment == "local_cluster" && !o.local_cluster) continue;
        for (const auto& sink : o.sinks) {
          for (int interval : o.intervals_ms) {
            const fs::path out = tmp.path() / ("out-" + std::to_string(run_index++));
            const std::string toml = job_toml(o, interval, sink, out);
            run_result res = deployment == "processes"
                                 ? run_job(*cluster, toml, o.timeout_s)
                                 : run_local_cluster(toml, tmp.path() / "local-state", o.timeout_s);
            if (res.ok && sink == "2pc") {
              const std::int64_t lines = committed_lines(out);
              if (lines != o.records) {
                res.ok = false;
                res.problem = "committed " + std::to_string(lines) + " lines, expected " +
                              std::to_string(o.records);
              }
            }
            std::error_code ignored;
            fs::remove_all(out, ignored);
            const double rate = res.seconds > 0 ? static_cast<double>(o.records) / res.seconds : 0;
            const double cpu_ns = res.cpu_seconds * 1e9 / static_cast<double>(o.records);
            const double machine_ns = res.machine.busy * 1e9 / static_cast<double>(o.records);
            const double idle = res.machine.idle_share();
            const double steal = res.machine.steal_share();
            std::printf("  run %d %-13s sink=%-7s checkpoints=%-6s %7.3f s %10.0f records/s "
                        "%6.0f ns CPU/record (machine %4.0f, idle %4.1f%%, steal %4.1f%%) "
                        "%5lld checkpoints%s%s\n",
                        r + 1, deployment.c_str(), sink.c_str(), interval_name(interval).c_str(),
                        res.seconds, rate, cpu_ns, machine_ns, 100 * idle, 100 * steal,
                        static_cast<long long>(res.checkpoints), res.ok ? "" : "  FAILED: ",
                        res.problem.c_str());
            std::fflush(stdout);
            if (!res.ok) {
              ++failures;
              continue;
            }
            auto& s = results[config_key{deployment, sink, interval}];
            s.rate.push_back(rate);
            s.repeat.push_back(r);
            s.cpu_ns_per_record.push_back(cpu_ns);
            s.machine_ns_per_record.push_back(machine_ns);
            s.idle_share.push_back(idle);
            s.checkpoints.push_back(static_cast<double>(res.checkpoints));
          }
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "throughput_bench: " << e.what() << "\n";
    return 1;
  }

  std::printf("\nmedian of %d runs; ratio and lost throughput against checkpointing off (same "
              "deployment and sink, this run);\nCPU = user + system time of the processes "
              "running the job per record (less sensitive to a busy machine than wall time);\n"
              "machine = busy CPU time of the whole machine per record (kernel threads and "
              "interrupts included); idle = the machine's idle share\n",
              o.repeats);
  std::printf("%-13s %-8s %-11s %12s %7s %7s %11s %9s %9s %9s %6s %11s\n", "deployment", "sink",
              "checkpoints", "records/s", "ratio", "lost", "CPU ns/rec", "CPU +%", "machine",
              "mach +%", "idle", "checkpoints");
  for (const auto& [key, s] : results) {
    if (key.interval_ms != 0) continue;
    const double base = median(s.rate);
    const double base_cpu = median(s.cpu_ns_per_record);
    const double base_machine = median(s.machine_ns_per_record);
    for (int interval : o.intervals_ms) {
      auto it = results.find(config_key{key.deployment, key.sink, interval});
      if (it == results.end()) continue;
      const double m = median(it->second.rate);
      const double cpu = median(it->second.cpu_ns_per_record);
      const double machine = median(it->second.machine_ns_per_record);
      std::printf("%-13s %-8s %-11s %12.0f %7.3f %6.1f%% %11.0f %8.1f%% %9.0f %8.1f%% %5.1f%% "
                  "%11.0f\n",
                  key.deployment.c_str(), key.sink.c_str(), interval_name(interval).c_str(), m,
                  m / base, 100.0 * (1.0 - m / base), cpu, 100.0 * (cpu / base_cpu - 1.0),
                  machine, base_machine > 0 ? 100.0 * (machine / base_machine - 1.0) : 0.0,
                  100.0 * median(it->second.idle_share), median(it->second.checkpoints));
    }
  }
  // Drift on a shared machine moves whole stretches of runs: a checkpointed run against the
  // baseline run just before it (same repeat) cancels most of it, and the interval says how
  // far the median of those losses can be trusted.
  std::printf("\nlost throughput paired per repeat (1 - checkpointed / the same repeat's "
              "baseline): median and its distribution-free confidence interval (95%%, or the "
              "whole range, which covers less, under 6 pairs)\n");
  std::printf("%-13s %-8s %-11s %6s %8s %20s %9s\n", "deployment", "sink", "checkpoints",
              "pairs", "median", "interval", "coverage");
  for (const auto& [key, base] : results) {
    if (key.interval_ms != 0) continue;
    for (int interval : o.intervals_ms) {
      if (interval == 0) continue;
      auto it = results.find(config_key{key.deployment, key.sink, interval});
      if (it == results.end()) continue;
      std::vector<double> losses;
      for (std::size_t i = 0; i < it->second.rate.size(); ++i) {
        const auto b = std::find(base.repeat.begin(), base.repeat.end(), it->second.repeat[i]);
        if (b == base.repeat.end()) continue;  // that repeat's baseline failed
        losses.push_back(1.0 - it->second.rate[i] / base.rate[b - base.repeat.begin()]);
      }
      if (losses.empty()) continue;
      const median_interval ci = interval_of_median(losses);
      std::printf("%-13s %-8s %-11s %6zu %7.1f%% %9.1f%% .. %5.1f%% %8.1f%%\n",
                  key.deployment.c_str(), key.sink.c_str(), interval_name(interval).c_str(),
                  losses.size(), 100.0 * median(losses), 100.0 * ci.low, 100.0 * ci.high,
                  100.0 * ci.coverage);
    }
  }
  if (failures > 0) {
    std::printf("\n%d run(s) failed (see above)\n", failures);
    return 1;
  }
  return 0;
}
