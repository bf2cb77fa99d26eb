// One Nexmark query (examples/nexmark) as a typed job on the in-process local_cluster, for
// bench/nexmark-comparison: events/s over a fixed number of generated events, and how long its
// checkpoints took. This is the in-process MiniCluster-style deployment, the one Flink's side of
// the comparison uses; the same queries run on a coordinator and workers as the user program
// examples/nexmark/nexmark_program.
//
//   nexmark_bench --query q1 --events 2000000 --parallelism 2 --interval-ms 100
//
// Prints one JSON line. Time is start() until the job is FINISHED (deployment and the final
// checkpoint included). A checkpoint's duration is from the coordinator's first trigger message
// for it to its first notify-complete message, seen through local_cluster's control-message
// hook. Rows go into discard_sink without being decoded (Flink's DiscardingSink does likewise).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/cluster/local_cluster.hpp"
#include "examples/nexmark/nexmark_queries.hpp"
#include "tests/support/temp_folder.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct options {
  std::string query = "q0";
  std::int64_t events = 2'000'000;
  std::uint32_t parallelism = 2;
  std::int64_t interval_ms = 0;  // 0: checkpointing off
  std::string backend = "hashmap";
  int timeout_s = 1800;
  bool key_fusion = true;  // key selectors folded into their inputs (graph/key_selector_fusion)
};

// Trigger and completion times per checkpoint id, from the coordinator's control messages.
class checkpoint_watch {
 public:
  snapflow::fault_decision see(const snapflow::control_event& e) {
    const auto now = clock_type::now();
    std::lock_guard lock(mutex_);
    if (e.what == snapflow::control_event::kind::trigger) triggered_.try_emplace(e.id, now);
    if (e.what == snapflow::control_event::kind::notify_complete) completed_.try_emplace(e.id, now);
    return {};
  }

  // Milliseconds from trigger to completion of every completed checkpoint, sorted.
  std::vector<double> durations_ms() const {
    std::lock_guard lock(mutex_);
    std::vector<double> out;
    for (const auto& [id, done] : completed_)
      if (auto t = triggered_.find(id); t != triggered_.end())
        out.push_back(std::chrono::duration<double, std::milli>(done - t->second).count());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::map<snapflow::checkpoint_id, clock_type::time_point> triggered_;
  std::map<snapflow::checkpoint_id, clock_type::time_point> completed_;
};

std::optional<double> percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::nullopt;
  const auto at = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(at, sorted.size() - 1)];
}

snapflow::job_graph build_job(const options& o) {
  snapflow::stream_environment env;
  env.set_job_name("nexmark-" + o.query).set_parallelism(o.parallelism);
  if (o.interval_ms > 0) env.enable_checkpointing(std::chrono::milliseconds(o.interval_ms));
  env.set_state_backend(o.backend);
  env.set_key_selector_fusion(o.key_fusion);
  snapflow::api::typed_environment typed(env);
  snapflow::nexmark::source_options source;
  source.events = o.events;
  auto input = snapflow::nexmark::nexmark_source(typed, source);
  namespace nx = snapflow::nexmark;
  snapflow::data_stream rows = [&] {
    if (o.query == "q0") return nx::q0_job(input).raw();
    if (o.query == "q1") return nx::q1_job(input).raw();
    if (o.query == "q2") return nx::q2_job(input).raw();
    if (o.query == "q3") return nx::q3_job(input).raw();
    if (o.query == "q5") return nx::q5_job(input).raw();
    if (o.query == "q7") return nx::q7_job(input).raw();
    if (o.query == "q8") return nx::q8_job(input).raw();
    return nx::q4_job(input).raw();
  }();
  rows.add_sink("discard_sink");
  return env.build_job_graph();
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"nexmark_bench: one Nexmark query on the in-process local_cluster"};
  app.add_option("--query", o.query, "q0, q1, q2, q3, q4, q5, q7 or q8")
      ->check(CLI::IsMember({"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8"}));
  app.add_option("--events", o.events, "events generated")->check(CLI::Range(1LL, 1LL << 40));
  app.add_option("--parallelism", o.parallelism)->check(CLI::Range(1, 64));
  app.add_option("--interval-ms", o.interval_ms, "checkpoint interval, 0 = off")
      ->check(CLI::Range(0, 3'600'000));
  app.add_option("--backend", o.backend)->check(CLI::IsMember({"hashmap", "rocksdb"}));
  app.add_flag("!--no-key-fusion", o.key_fusion,
               "run each key selector in a task of its own (to compare with folding it into its "
               "input)");
  app.add_option("--timeout-s", o.timeout_s)->check(CLI::Range(1, 86'400));
  CLI11_PARSE(app, argc, argv);

  snapflow::testing::temp_folder dir("nexmark-bench");
  auto watch = std::make_shared<checkpoint_watch>();
  snapflow::local_cluster_options lo;
  lo.state_dir = dir.path() / "state";
  lo.faults = [watch](const snapflow::control_event& e) { return watch->see(e); };
  snapflow::local_cluster cluster(build_job(o), lo);
  const auto start = clock_type::now();
  auto status = cluster.run(std::chrono::seconds(o.timeout_s));
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (!status) {
    std::cerr << "nexmark_bench: " << status.err().message << "\n";
    return 1;
  }
  if (*status != snapflow::job_status::finished) {
    std::cerr << "nexmark_bench: job ended " << snapflow::to_string(*status) << ": "
              << cluster.failure_cause().value_or("no cause") << "\n";
    return 1;
  }
  const auto durations = watch->durations_ms();
  nlohmann::json out = {{"system", "snapflow"},
                        {"query", o.query},
                        {"events", o.events},
                        {"parallelism", o.parallelism},
                        {"interval_ms", o.interval_ms},
                        {"backend", o.backend},
                        {"key_fusion", o.key_fusion},
                        {"seconds", seconds},
                        {"events_per_s", static_cast<double>(o.events) / seconds},
                        {"checkpoints", durations.size()}};
  if (auto p = percentile(durations, 0.5)) out["checkpoint_p50_ms"] = *p;
  if (auto p = percentile(durations, 0.99)) out["checkpoint_p99_ms"] = *p;
  std::cout << out.dump() << std::endl;
  return 0;
}
