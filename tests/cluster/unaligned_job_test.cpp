// Unaligned checkpoints on real processes: a job whose sink side is throttled far below its
// source rate (every channel full), checkpointing every 100 ms, through kill -9 of workers.
// Checkpoints complete with in-flight records persisted, and the committed output is exactly
// once. Randomness (victims, kill moments) is seeded: SNAPFLOW_CHAOS_SEED=<seed> replays it.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"

using namespace snapflow::testing;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t records = 120'000;
constexpr std::int64_t keys = 16;

std::unique_ptr<child_process> worker(const std::string& control, const std::string& id) {
  return std::make_unique<child_process>(std::vector<std::string>{
      SNAPFLOW_WORKER_BIN, "--coordinator", control, "--id", id, "--slots", "3", "--executor",
      "runtime", "--heartbeat-interval-ms", std::to_string(heartbeat_interval_ms),
      "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms), "--data-root",
      test_data_root()});
}

// sequence_source (2, unthrottled) -hash-> keyed_sum (2) -rebalance-> map_identity sleeping per
// record (2) -forward-> two_phase_commit_file_sink (2): backpressured from the map up.
std::string backpressured_job(const fs::path& out, const std::string& checkpointing) {
  std::ostringstream os;
  os << "[job]\nname = \"unaligned\"\nparallelism = 2\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 100\nmode = \"exactly_once\"\ntimeout_ms = 20000\n"
     << "inline_state_max_bytes = 0\n"
     << checkpointing << "\n"
     << "[restart]\nstrategy = \"fixed_delay\"\ndelay_ms = 100\nmax_attempts = -1\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
     << "params = { count = " << records << ", keys = " << keys << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\n\n"
     << "[[operator]]\nuid = \"slow\"\nkind = \"map_identity\"\ninput = \"sum\"\n"
     << "partition = \"rebalance\"\nparams = { delay_us_per_record = 40 }\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"slow\"\n"
     << "params = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

std::uint64_t seed_for(const char* test) {
  std::uint64_t seed = std::random_device{}();
  if (const char* text = std::getenv("SNAPFLOW_CHAOS_SEED"))
    seed = std::strtoull(text, nullptr, 10);
  std::cout << test << ": seed " << seed << " (replay with SNAPFLOW_CHAOS_SEED=" << seed << ")"
            << std::endl;
  return seed;
}

void run_backpressured(const char* name, const std::string& checkpointing) {
  std::mt19937_64 rng(seed_for(name));
  temp_dir dir;
  const fs::path out = dir.path() / "out";
  coordinator_process coordinator(dir.path() / "state");
  std::map<std::string, std::unique_ptr<child_process>> workers;
  for (const char* id : {"w1", "w2", "w3"}) workers[id] = worker(coordinator.control(), id);
  REQUIRE(coordinator.wait_for_workers(3));
  const std::string job = coordinator.submit(backpressured_job(out, checkpointing));

  std::int64_t newest = 0;
  std::int64_t restarts = 0;
  bool saw_persisted = false;
  for (int round = 0; round < 3; ++round) {
    json details;
    const bool progressed = eventually(
        [&] {
          details = coordinator.job(job);
          if (!details.is_object()) return false;
          return details.value("state", "") == "RUNNING" &&
                 details.value("restarts", 0) >= restarts &&
                 details.value("last-completed-checkpoint", std::int64_t{0}) > newest + 1;
        },
        60s);
    INFO("round " << round << ": " << details.dump());
    REQUIRE(progressed);
    newest = details.value("last-completed-checkpoint", std::int64_t{0});
    restarts = details.value("restarts", 0) + 1;
    // A checkpoint of a full pipeline went unaligned and persisted in-flight records.
    const json cps = coordinator.checkpoints(job);
    for (const auto& c : cps.value("history", json::array()))
      if (c.value("status", "") == "COMPLETED" && c.value("persisted_data", 0) > 0 &&
          c.value("unaligned_checkpoint", false))
        saw_persisted = true;
    if (round == 2) break;
    std::vector<std::string> busy;
    for (const auto& vertex : details["vertices"])
      for (const auto& subtask : vertex["subtasks"]) {
        const std::string w = subtask.value("worker", "");
        if (!w.empty() && std::find(busy.begin(), busy.end(), w) == busy.end()) busy.push_back(w);
      }
    std::sort(busy.begin(), busy.end());
    REQUIRE_FALSE(busy.empty());
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 200)(rng)));
    const std::string victim =
        busy[std::uniform_int_distribution<std::size_t>(0, busy.size() - 1)(rng)];
    std::cout << name << " round " << round << ": kill -9 " << victim << " after checkpoint "
              << newest << std::endl;
    workers[victim]->send_signal(SIGKILL);
    REQUIRE(workers[victim]->wait_exit(patience).has_value());
    workers[victim] = worker(coordinator.control(), victim);
  }
  CHECK(saw_persisted);
  const bool finished =
      eventually([&] { return coordinator.job(job).value("state", "") == "FINISHED"; }, 240s);
  INFO("job: " << coordinator.job(job).dump());
  REQUIRE(finished);
  const committed_output o = read_committed_output(out, records, keys);
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.wrong_sums == 0);
  CHECK(o.lines == static_cast<std::size_t>(records));
  for (auto& [id, w] : workers) w->send_signal(SIGTERM);
  coordinator.process().send_signal(SIGTERM);
  for (auto& [id, w] : workers) CHECK(w->wait_exit(patience) == 0);
  CHECK(coordinator.process().wait_exit(patience) == 0);
}

}  // namespace

TEST_CASE("unaligned: a backpressured job through kill -9 of workers, exactly once") {
  run_backpressured("unaligned", "unaligned = true\n");
}

TEST_CASE("unaligned: the same with an aligned checkpoint timeout of 5 ms") {
  run_backpressured("aligned-timeout", "unaligned = true\naligned_checkpoint_timeout_ms = 5\n");
}
