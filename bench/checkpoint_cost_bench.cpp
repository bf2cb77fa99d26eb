// What periodic checkpoints cost a running job's throughput, measured inside one job: the same
// deployment alternates between checkpointing every --interval ms and not checkpointing (the
// interval set to an hour over REST), in segments of a few seconds, and compares the records/s
// of adjacent segments.
//
// Why not whole runs (throughput_bench): each run is a new deployment, and on a small shared
// machine where a deployment's threads land moves its throughput by several percent from run to
// run, more than the cost being measured; drift over minutes adds to it. Here both sides of a
// pair share the threads, the sockets and the warm caches, a pair spans seconds, and the order
// inside a pair alternates (off-on, on-off, ...), so a steady drift cancels over the pairs.
//
// With --unaligned --beside-aligned each round has three segments, off, aligned and unaligned
// (the job is submitted unaligned, and the REST API switches its checkpoints between the two
// modes), in the six orders in turn: both modes against off, and unaligned against aligned, in
// the same conditions.
//
// What it does not measure: deploy and the final checkpoint of a bounded job (throughput_bench
// includes them), and what having checkpointing enabled at all costs when no checkpoint runs
// (the "off" segments have it enabled; throughput_bench --intervals 0 3600000 measures that).
//
// Rates come from the sources' record counters, which workers send with every heartbeat
// (--heartbeat-ms): per source subtask, the counters and the coordinator's receive time of the
// first and the last heartbeat seen in a segment's window, so polling times do not enter.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
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

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/support/machine_cpu.hpp"
#include "bench/support/median_interval.hpp"
#include "bench/support/process_cluster.hpp"
#include "tests/support/temp_folder.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using snapflow::bench::interval_of_median;
using snapflow::bench::machine_cpu;
using snapflow::bench::median;
using snapflow::bench::process_cluster;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

// "Off": checkpointing stays enabled (a job submitted without it cannot get it later) with an
// interval no segment reaches.
constexpr std::int64_t off_interval_ms = 3'600'000;

struct options {
  int interval_ms = 100;
  int pairs = 12;
  double segment_seconds = 4;
  int settle_ms = 500;
  double warmup_seconds = 3;
  int workers = 2;
  std::int64_t keys = 128;
  int heartbeat_ms = 50;
  int poll_ms = 25;  // readings carry their own times: polling only needs to see each
  std::string mode = "exactly_once";
  bool unaligned = false;
  bool beside_aligned = false;  // with unaligned: rounds of off, aligned and unaligned
  bool pin_workers = false;
  std::string coordinator_bin = SNAPFLOW_COORDINATOR_BIN;
  std::string worker_bin = SNAPFLOW_WORKER_BIN;
  std::string log_level = "warn";
  std::string state_dir;  // empty: a temporary folder
  std::string json_out;
};

std::string job_toml(const options& o) {
  std::ostringstream os;
  os << "[job]\nname = \"checkpoint-cost\"\nparallelism = 2\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = " << off_interval_ms << "\nmode = \"" << o.mode
     << "\"\n" << (o.unaligned ? "unaligned = true\n" : "") << "\n"
     // Unbounded for any run this benchmark makes; the job is cancelled at the end.
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = " << (std::int64_t{1} << 50) << ", keys = " << o.keys << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 2\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"discard_sink\"\ninput = \"sum\"\n"
     << "partition = \"forward\"\nparallelism = 2\n";
  return os.str();
}

// One heartbeat's counters of one source subtask, as the coordinator received them.
struct reading {
  std::int64_t timestamp_us = 0;  // coordinator clock
  std::uint64_t records = 0;
};

// What a segment measured, over its window (the segment minus its settling time).
// What a segment runs: no checkpoints, or checkpoints every --interval ms of the job's mode,
// or (--beside-aligned) of the mode switched to for the segment.
enum class side { off, on, aligned, unaligned };

const char* side_name(side s) {
  switch (s) {
    case side::off: return "off";
    case side::on: return "on";
    case side::aligned: return "aligned";
    case side::unaligned: return "unaligned";
  }
  return "?";
}

struct segment {
  side runs = side::off;
  std::map<int, std::vector<reading>> readings;  // per source subtask index, new ones only
  double wall_seconds = 0;
  double cpu_seconds = 0;  // coordinator and workers
  machine_cpu machine;
  std::int64_t checkpoints = 0;  // completed in the window

  // records/s summed over the source subtasks; nothing when a subtask had under two readings.
  std::optional<double> rate() const {
    if (readings.empty()) return std::nullopt;
    double sum = 0;
    for (const auto& [_, r] : readings) {
      if (r.size() < 2 || r.back().timestamp_us <= r.front().timestamp_us) return std::nullopt;
      sum += static_cast<double>(r.back().records - r.front().records) * 1e6 /
             static_cast<double>(r.back().timestamp_us - r.front().timestamp_us);
    }
    return sum;
  }
};

struct in_flight_summary {
  std::size_t checkpoints = 0;
  std::size_t unaligned = 0;
  double median_bytes = 0;
  double max_bytes = 0;
};

class job_session {
 public:
  job_session(const process_cluster& cluster, std::string job)
      : cluster_(cluster), job_(std::move(job)) {}

  // Polls the job's source counters; returns the readings newer than any seen before.
  std::map<int, std::vector<reading>> poll_new() {
    std::map<int, std::vector<reading>> out;
    const json d = cluster_.get("/jobs/" + job_);
    if (!d.is_object()) {
      // A dead or stuck coordinator ends the run with that said, not with too few readings.
      state_ = "(no answer from the coordinator)";
      return out;
    }
    state_ = d.value("state", "");
    for (const auto& v : d.value("vertices", json::array())) {
      if (!v.value("is_source", false)) continue;
      for (const auto& s : v.value("subtasks", json::array())) {
        const int index = s.value("subtask", -1);
        const json m = s.value("metrics", json::object());
        const reading r{m.value("records-timestamp-us", std::int64_t{0}),
                        m.value("write-records", std::uint64_t{0})};
        if (r.timestamp_us == 0) continue;
        auto& last = last_seen_[index];
        if (r.timestamp_us > last) {
          last = r.timestamp_us;
          out[index].push_back(r);
        }
      }
    }
    return out;
  }

  // What the latest completed checkpoints in the coordinator's history persisted as channel
  // state: with unaligned checkpoints, the in-flight records they overtook.
  std::optional<in_flight_summary> recent_in_flight() const {
    const json c = cluster_.get("/jobs/" + job_ + "/checkpoints");
    if (!c.is_object() || !c.contains("history")) return std::nullopt;
    in_flight_summary s;
    std::vector<double> bytes;
    for (const auto& h : c["history"]) {
      if (h.value("status", "") != "COMPLETED") continue;
      ++s.checkpoints;
      if (h.value("unaligned_checkpoint", false)) ++s.unaligned;
      bytes.push_back(static_cast<double>(h.value("persisted_data", std::uint64_t{0})));
    }
    if (bytes.empty()) return std::nullopt;
    s.median_bytes = median(bytes);
    s.max_bytes = *std::max_element(bytes.begin(), bytes.end());
    return s;
  }

  std::int64_t completed_checkpoints() const {
    const json c = cluster_.get("/jobs/" + job_ + "/checkpoints");
    if (!c.is_object() || !c.contains("counts")) return 0;
    return c["counts"].value("completed", std::int64_t{0});
  }

  // The interval, and with `unaligned` the mode, of the checkpoints triggered from now on.
  void set_checkpointing(std::int64_t interval_ms, std::optional<bool> unaligned) const {
    json body{{"interval", interval_ms}};
    if (unaligned) body["unaligned"] = *unaligned;
    const auto r = cluster_.patch("/jobs/" + job_ + "/checkpoints/config", body.dump());
    if (r.status != 200)
      throw std::runtime_error("setting the checkpoints to " + body.dump() + " failed: " +
                               std::to_string(r.status) + " " + r.body);
  }

  const std::string& state() const { return state_; }
  const std::string& id() const { return job_; }

 private:
  const process_cluster& cluster_;
  std::string job_;
  std::string state_;
  std::map<int, std::int64_t> last_seen_;
};

// Runs one segment: switch, settle, then collect readings until the segment's time is up.
segment run_segment(const options& o, const process_cluster& cluster, job_session& job,
                    side runs) {
  segment s;
  s.runs = runs;
  const auto start = clock_type::now();
  std::optional<bool> unaligned;
  if (runs == side::aligned || runs == side::unaligned) unaligned = runs == side::unaligned;
  job.set_checkpointing(runs == side::off ? off_interval_ms : o.interval_ms, unaligned);
  const auto window_start = start + std::chrono::milliseconds(o.settle_ms);
  const auto end = start + std::chrono::duration_cast<clock_type::duration>(
                               std::chrono::duration<double>(o.segment_seconds));
  while (clock_type::now() < window_start) {
    (void)job.poll_new();  // readings of the switch's aftermath count nowhere
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
  const double cpu_before = cluster.cpu_seconds();
  const machine_cpu machine_before = machine_cpu::now();
  const std::int64_t checkpoints_before = job.completed_checkpoints();
  const auto measured_from = clock_type::now();
  while (clock_type::now() < end) {
    for (auto& [index, r] : job.poll_new())
      s.readings[index].insert(s.readings[index].end(), r.begin(), r.end());
    if (job.state() != "RUNNING")
      throw std::runtime_error("the job left RUNNING: " + job.state());
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
  s.wall_seconds = std::chrono::duration<double>(clock_type::now() - measured_from).count();
  s.cpu_seconds = cluster.cpu_seconds() - cpu_before;
  s.machine = machine_cpu::now() - machine_before;
  s.checkpoints = job.completed_checkpoints() - checkpoints_before;
  return s;
}

struct pair_result {
  double off_rate = 0, on_rate = 0;
  double loss = 0;          // 1 - on / off
  double cpu_increase = 0;  // CPU per record, on / off - 1 (coordinator and workers)
  double machine_increase = 0;
  double on_checkpoints_per_s = 0;
};

// A segment with its rate and CPU per record.
struct measured {
  segment seg;
  double rate = 0;
  double cpu_ns = 0;      // coordinator and workers, per record
  double machine_ns = 0;  // the whole machine, per record
};

measured measure(segment s) {
  const auto rate = s.rate();
  if (!rate) throw std::runtime_error("a segment saw under two heartbeats of a source subtask");
  measured m;
  m.rate = *rate;
  m.cpu_ns = s.cpu_seconds * 1e9 / (*rate * s.wall_seconds);
  m.machine_ns = s.machine.busy * 1e9 / (*rate * s.wall_seconds);
  m.seg = std::move(s);
  return m;
}

pair_result compare(const measured& off, const measured& on) {
  pair_result r;
  r.off_rate = off.rate;
  r.on_rate = on.rate;
  r.loss = 1.0 - on.rate / off.rate;
  r.cpu_increase = on.cpu_ns / off.cpu_ns - 1.0;
  r.machine_increase = on.machine_ns / off.machine_ns - 1.0;
  r.on_checkpoints_per_s = static_cast<double>(on.seg.checkpoints) / on.seg.wall_seconds;
  return r;
}

// The segments of round `p`: off and on, in turn on-first and off-first; with
// --beside-aligned off, aligned and unaligned in the six orders in turn. Either way a steady
// drift favours no side over the rounds.
std::vector<side> round_sides(const options& o, int p) {
  if (!o.beside_aligned)
    return p % 2 == 1 ? std::vector{side::on, side::off} : std::vector{side::off, side::on};
  static constexpr side orders[6][3] = {
      {side::off, side::aligned, side::unaligned}, {side::unaligned, side::aligned, side::off},
      {side::aligned, side::unaligned, side::off}, {side::off, side::unaligned, side::aligned},
      {side::unaligned, side::off, side::aligned}, {side::aligned, side::off, side::unaligned}};
  const auto& order = orders[p % 6];
  return {order[0], order[1], order[2]};
}

void print_interval_line(const char* what, const std::vector<double>& v) {
  const auto ci = interval_of_median(v);
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  std::printf("%-22s median %6.2f%%   95%% interval %6.2f%% .. %6.2f%% (coverage %.1f%%)   "
              "mean %6.2f%%\n",
              what, 100 * median(v), 100 * ci.low, 100 * ci.high, 100 * ci.coverage, 100 * mean);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"checkpoint_cost_bench: throughput lost to periodic checkpoints, measured inside "
               "one running job that alternates between checkpointing and not"};
  app.add_option("--interval", o.interval_ms,
                 "checkpoint interval of the checkpointing segments, ms")
      ->check(CLI::Range(1, 600'000))
      ->capture_default_str();
  app.add_option("--pairs", o.pairs,
                 "rounds of segments: one with checkpoints and one without (with "
                 "--beside-aligned: off, aligned and unaligned)")
      ->check(CLI::Range(1, 200))
      ->capture_default_str();
  app.add_option("--segment-seconds", o.segment_seconds, "length of a segment")
      ->check(CLI::Range(0.5, 600.0))
      ->capture_default_str();
  app.add_option("--settle-ms", o.settle_ms,
                 "time after each switch that no rate is taken from")
      ->check(CLI::Range(0, 60'000))
      ->capture_default_str();
  app.add_option("--warmup-seconds", o.warmup_seconds, "running time before the first segment")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--workers", o.workers, "worker processes")
      ->check(CLI::Range(1, 6))
      ->capture_default_str();
  app.add_option("--keys", o.keys, "distinct keys")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--heartbeat-ms", o.heartbeat_ms,
                 "the workers' heartbeat interval, which carries the record counters")
      ->check(CLI::Range(10, 10'000))
      ->capture_default_str();
  app.add_option("--mode", o.mode, "checkpointing mode")
      ->check(CLI::IsMember({"exactly_once", "at_least_once"}))
      ->capture_default_str();
  app.add_flag("--unaligned", o.unaligned,
               "unaligned checkpoints (exactly_once only): what they cost with no backpressure");
  app.add_flag("--beside-aligned", o.beside_aligned,
               "with --unaligned: rounds of three segments, off, aligned and unaligned (switched "
               "over REST), so that both modes are measured against off in the same conditions")
      ->needs("--unaligned");
  app.add_flag("--pin-workers", o.pin_workers,
               "worker w on CPU w mod the machine's CPUs (snapflow-worker --cpus)");
  app.add_option("--coordinator-bin", o.coordinator_bin, "snapflow-coordinator to run")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  app.add_option("--worker-bin", o.worker_bin, "snapflow-worker to run")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  app.add_option("--state-dir", o.state_dir,
                 "the coordinator's state folder (checkpoints go below it); default: a new "
                 "temporary folder");
  app.add_option("--log-level", o.log_level, "log level of the processes")->capture_default_str();
  app.add_option("--json", o.json_out, "also write the results to this JSON file");
  CLI11_PARSE(app, argc, argv);
  if (o.unaligned && o.mode != "exactly_once") {
    std::cerr << "checkpoint_cost_bench: --unaligned needs --mode exactly_once\n";
    return 2;
  }
  if (o.settle_ms >= o.segment_seconds * 1000) {
    std::cerr << "checkpoint_cost_bench: --settle-ms must be shorter than a segment\n";
    return 2;
  }
  if (o.heartbeat_ms * 4 > (o.segment_seconds * 1000 - o.settle_ms)) {
    std::cerr << "checkpoint_cost_bench: a segment's window must hold at least four heartbeats "
                 "(lower --heartbeat-ms or lengthen --segment-seconds)\n";
    return 2;
  }

  snapflow::testing::temp_folder tmp("snapflow-checkpoint-cost");
  const fs::path state_dir = o.state_dir.empty() ? tmp.path() / "state" : fs::path(o.state_dir);
  std::printf("checkpoint_cost_bench: interval %d ms against none, %d pairs of %.1f s segments "
              "(first %d ms of each not measured), %d worker(s)%s, %lld keys, %s%s\n",
              o.interval_ms, o.pairs, o.segment_seconds, o.settle_ms, o.workers,
              o.pin_workers ? " pinned" : "", static_cast<long long>(o.keys), o.mode.c_str(),
              o.unaligned ? (o.beside_aligned ? ", unaligned beside aligned" : ", unaligned")
                          : "");
  std::printf("sequence_source(2) -> hash -> keyed_sum(2) -> discard_sink(2); state folder %s\n",
              o.state_dir.empty() ? "(temporary)" : state_dir.c_str());
  std::fflush(stdout);

  // Per side that checkpoints (on; or aligned and unaligned), each round's comparison with the
  // round's off segment; and with --beside-aligned, unaligned against aligned per round.
  std::map<side, std::vector<pair_result>> against_off;
  std::vector<double> unaligned_vs_aligned;
  json segments_json = json::array();
  std::optional<in_flight_summary> in_flight;
  try {
    snapflow::bench::process_cluster_options co;
    co.coordinator_bin = o.coordinator_bin;
    co.worker_bin = o.worker_bin;
    co.workers = o.workers;
    co.slots = (6 + o.workers - 1) / o.workers;
    co.state_dir = state_dir;
    co.log_level = o.log_level;
    co.pin_workers = o.pin_workers;
    // The coordinator names the heartbeat interval its workers use.
    co.coordinator_args = {"--heartbeat-interval-ms", std::to_string(o.heartbeat_ms)};
    process_cluster cluster(co);

    const auto submitted = cluster.post("/jobs", job_toml(o), "application/toml");
    if (submitted.status != 202)
      throw std::runtime_error("submit failed: " + std::to_string(submitted.status) + " " +
                               submitted.body);
    job_session job(cluster, submitted.json().value("jobid", ""));
    struct cancel_at_exit {
      const process_cluster& c;
      std::string id;
      ~cancel_at_exit() { (void)c.patch("/jobs/" + id + "?mode=cancel", ""); }
    } cancel{cluster, job.id()};

    const auto deadline = clock_type::now() + 30s;
    while (job.state() != "RUNNING") {
      (void)job.poll_new();
      if (job.state() == "FAILED" || job.state() == "CANCELED")
        throw std::runtime_error("the job ended " + job.state() + " before it ran");
      if (clock_type::now() > deadline) throw std::runtime_error("the job did not start");
      std::this_thread::sleep_for(20ms);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup_seconds));

    std::printf("\n%5s %-9s %14s %12s %12s %12s\n", "round", "side", "records/s", "CPU ns/rec",
                "machine ns", "checkpoints");
    for (int p = 0; p < o.pairs; ++p) {
      std::map<side, measured> round;
      for (side runs : round_sides(o, p)) {
        const measured m = measure(run_segment(o, cluster, job, runs));
        std::printf("%5d %-9s %14.0f %12.1f %12.1f %12lld\n", p + 1, side_name(runs), m.rate,
                    m.cpu_ns, m.machine_ns, static_cast<long long>(m.seg.checkpoints));
        segments_json.push_back({{"pair", p + 1},
                                 {"side", side_name(runs)},
                                 {"checkpointing", runs != side::off},
                                 {"records_per_s", m.rate},
                                 {"cpu_ns_per_record", m.cpu_ns},
                                 {"machine_ns_per_record", m.machine_ns},
                                 {"idle_share", m.seg.machine.idle_share()},
                                 {"checkpoints", m.seg.checkpoints},
                                 {"seconds", m.seg.wall_seconds}});
        round.emplace(runs, m);
      }
      std::fflush(stdout);
      for (const auto& [runs, m] : round)
        if (runs != side::off) against_off[runs].push_back(compare(round.at(side::off), m));
      if (o.beside_aligned)
        unaligned_vs_aligned.push_back(
            compare(round.at(side::aligned), round.at(side::unaligned)).loss);
    }
    in_flight = job.recent_in_flight();
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_cost_bench: " << e.what() << "\n";
    return 1;
  }

  struct summary {
    std::vector<double> losses, cpu, machine, per_s;
  };
  std::map<side, summary> summaries;
  for (const auto& [runs, results] : against_off) {
    summary& sum = summaries[runs];
    for (const auto& r : results) {
      sum.losses.push_back(r.loss);
      sum.cpu.push_back(r.cpu_increase);
      sum.machine.push_back(r.machine_increase);
      sum.per_s.push_back(r.on_checkpoints_per_s);
    }
    std::printf("\n%s against off (1 - checkpointing / not), %zu rounds, %.1f checkpoints/s "
                "while on:\n",
                side_name(runs), results.size(), median(sum.per_s));
    print_interval_line("throughput lost", sum.losses);
    print_interval_line("CPU per record +", sum.cpu);
    print_interval_line("machine CPU/record +", sum.machine);
  }
  if (!unaligned_vs_aligned.empty()) {
    std::printf("\nunaligned against aligned (1 - unaligned / aligned), %zu rounds:\n",
                unaligned_vs_aligned.size());
    print_interval_line("throughput lost", unaligned_vs_aligned);
  }
  // What the JSON's top-level figures describe: unaligned beside aligned, else the one side.
  const side primary = o.beside_aligned ? side::unaligned : side::on;
  const std::vector<double>& losses = summaries[primary].losses;
  const std::vector<double>& cpu = summaries[primary].cpu;
  const std::vector<double>& machine = summaries[primary].machine;
  const std::vector<double>& per_s = summaries[primary].per_s;
  if (in_flight)
    std::printf("last %zu checkpoints: %zu unaligned, persisted in-flight bytes median %.0f, "
                "max %.0f\n",
                in_flight->checkpoints, in_flight->unaligned, in_flight->median_bytes,
                in_flight->max_bytes);

  if (!o.json_out.empty()) {
    const auto loss_ci = interval_of_median(losses);
    json j{{"interval_ms", o.interval_ms},
           {"unaligned", o.unaligned},
           {"pairs", losses.size()},
           {"beside_aligned", o.beside_aligned},
           {"segment_seconds", o.segment_seconds},
           {"settle_ms", o.settle_ms},
           {"workers", o.workers},
           {"keys", o.keys},
           {"mode", o.mode},
           {"pin_workers", o.pin_workers},
           {"checkpoints_per_s", median(per_s)},
           {"loss_median", median(losses)},
           {"loss_low", loss_ci.low},
           {"loss_high", loss_ci.high},
           {"loss_coverage", loss_ci.coverage},
           {"cpu_increase_median", median(cpu)},
           {"machine_increase_median", median(machine)},
           {"persisted_bytes_median", in_flight ? in_flight->median_bytes : 0.0},
           {"segments", segments_json}};
    if (o.beside_aligned) {
      const auto& aligned = summaries[side::aligned].losses;
      const auto aligned_ci = interval_of_median(aligned);
      j["aligned_loss_median"] = median(aligned);
      j["aligned_loss_low"] = aligned_ci.low;
      j["aligned_loss_high"] = aligned_ci.high;
      j["unaligned_vs_aligned_loss_median"] = median(unaligned_vs_aligned);
    }
    std::ofstream out(o.json_out);
    out << j.dump(2) << "\n";
    if (!out) {
      std::cerr << "checkpoint_cost_bench: could not write " << o.json_out << "\n";
      return 1;
    }
  }
  return 0;
}
