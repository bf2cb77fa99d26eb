// Chaos and durability on real processes: kill -9 of workers and of the coordinator while the
// exactly-once example runs over a million records, and kill -9 of the coordinator while it
// writes checkpoints. Randomness is seeded: the seed is printed, and SNAPFLOW_CHAOS_SEED=<seed>
// replays the same choices (victims and kill moments; process timing still varies).
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "engine/checkpoint/checkpoint_id_counter.hpp"
#include "engine/checkpoint/checkpoint_storage.hpp"
#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"

using namespace snapflow::testing;
namespace fs = std::filesystem;

namespace {

std::uint64_t chaos_seed(const char* test) {
  std::uint64_t seed = std::random_device{}();
  if (const char* text = std::getenv("SNAPFLOW_CHAOS_SEED"))
    seed = std::strtoull(text, nullptr, 10);
  std::cout << test << ": chaos seed " << seed << " (replay with SNAPFLOW_CHAOS_SEED=" << seed
            << ")" << std::endl;
  return seed;
}

// A pause of a random length before a kill: it only picks the moment, what the test waits for
// is always progress seen through REST.
void random_pause(std::mt19937_64& rng, int max_ms) {
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::uniform_int_distribution<int>(0, max_ms)(rng)));
}

std::unique_ptr<child_process> runtime_worker(const std::string& control, const std::string& id) {
  return std::make_unique<child_process>(std::vector<std::string>{
      SNAPFLOW_WORKER_BIN, "--coordinator", control, "--id", id, "--slots", "2", "--executor",
      "runtime", "--heartbeat-interval-ms", std::to_string(heartbeat_interval_ms),
      "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms), "--data-root",
      test_data_root()});
}

constexpr std::int64_t chaos_records = 1'000'000;
constexpr std::int64_t chaos_keys = 16;

// The exactly-once example (2 sources, keyed_sum and the two-phase-commit sink at parallelism
// 4) at a bounded rate, so it is still running after every planned kill, and with its own
// restart strategy: a fixed short delay, without the default backoff growing over many kills.
// `state`: more [checkpointing] lines (the state backend).
std::string chaos_job(const fs::path& out, int rate_per_source, const std::string& state) {
  std::ostringstream os;
  os << "[job]\nname = \"chaos\"\nparallelism = 4\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 100\nmode = \"exactly_once\"\ntimeout_ms = 20000\n"
     << state << "\n"
     << "[restart]\nstrategy = \"fixed_delay\"\ndelay_ms = 100\nmax_attempts = -1\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = " << chaos_records << ", keys = " << chaos_keys
     << ", rate = " << rate_per_source << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 4\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"sum\"\n"
     << "parallelism = 4\nparams = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

// Every seq exactly once, each with the running sum of its key (tests/cluster/committed_output).
void check_exactly_once(const fs::path& out, std::int64_t records, std::int64_t keys) {
  const committed_output o = read_committed_output(out, records, keys);
  // On a failure, what is missing (first few runs of consecutive seqs) and what was committed.
  std::ostringstream report;
  if (o.missing > 0) {
    report << "missing seq runs:";
    int runs = 0;
    for (std::int64_t seq = 0; seq < records && runs < 10; ++seq) {
      if (o.seen[static_cast<std::size_t>(seq)] != 0) continue;
      std::int64_t end = seq;
      while (end + 1 < records && o.seen[static_cast<std::size_t>(end + 1)] == 0) ++end;
      report << " " << seq << (end > seq ? "-" + std::to_string(end) : "");
      ++runs;
      seq = end;
    }
    report << "\ncommitted files:";
    for (const auto& entry : fs::directory_iterator(out))
      report << " " << entry.path().filename().string();
  }
  INFO("committed lines " << o.lines << "\n" << report.str());
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.wrong_sums == 0);
  CHECK(o.lines == static_cast<std::size_t>(records));
}

std::string tail(const std::string& text, std::size_t n = 3000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// The chaos run: the example through kill -9 of workers and once of the coordinator, with
// `state` as the job's state backend lines.
void run_chaos(const std::string& seed_name, const std::string& state_lines) {
  std::mt19937_64 rng(chaos_seed(seed_name.c_str()));
  temp_dir dir;
  const fs::path state = dir.path() / "state";
  const fs::path out = dir.path() / "out";
  auto coordinator = std::make_unique<coordinator_process>(state);
  // A restarted coordinator binds the same address: workers find it again by themselves.
  const std::string control = coordinator->control();
  std::map<std::string, std::unique_ptr<child_process>> workers;
  for (const char* id : {"w1", "w2", "w3"}) workers[id] = runtime_worker(control, id);
  REQUIRE(coordinator->wait_for_workers(3));

  // 25,000 records per second: at least 40 s of input, far more than the kills below take.
  const std::string job = coordinator->submit(chaos_job(out, 12'500, state_lines));

  // Rounds 0..kill_rounds-1 each kill one process (the coordinator in one of them, never the
  // first or the last); the round after them only waits for progress.
  constexpr int worker_kills = 6;
  constexpr int kill_rounds = worker_kills + 1;
  const int coordinator_round = std::uniform_int_distribution<int>(1, kill_rounds - 2)(rng);
  int workers_killed = 0;
  int coordinators_killed = 0;
  std::int64_t newest_checkpoint = 0;
  std::int64_t restarts_before = 0;  // as the current coordinator counts them
  bool expect_restart = false;
  auto diagnostics = [&] {
    std::ostringstream os;
    os << "job: " << coordinator->job(job).dump()
       << "\ncoordinator stderr: " << tail(coordinator->process().stderr_text());
    for (const auto& [id, w] : workers) os << "\n" << id << " stderr: " << tail(w->stderr_text());
    return os.str();
  };
  for (int round = 0; round <= kill_rounds; ++round) {
    // Progress since the last kill: RUNNING again (after a restart, for a worker kill) and a
    // checkpoint completed after it.
    json details;
    const bool progressed = eventually(
        [&] {
          details = coordinator->job(job);
          if (!details.is_object()) return false;
          if (details.value("state", "") == "FINISHED") return true;
          return details.value("state", "") == "RUNNING" &&
                 (!expect_restart || details.value("restarts", 0) > restarts_before) &&
                 details.value("last-completed-checkpoint", std::int64_t{0}) > newest_checkpoint;
        },
        60s);
    INFO("round " << round << "\n" << diagnostics());
    REQUIRE(progressed);
    REQUIRE(details.value("state", "") != "FINISHED");  // too fast for the plan: lower the rate
    newest_checkpoint = details.value("last-completed-checkpoint", std::int64_t{0});
    restarts_before = details.value("restarts", 0);
    random_pause(rng, 400);

    if (round == coordinator_round) {
      std::cout << "chaos round " << round << ": kill -9 coordinator after checkpoint "
                << newest_checkpoint << std::endl;
      coordinator->process().send_signal(SIGKILL);
      REQUIRE(coordinator->process().wait_exit(patience).has_value());
      ++coordinators_killed;
      coordinator =
          std::make_unique<coordinator_process>(state, std::vector<std::string>{}, control);
      restarts_before = 0;
      expect_restart = false;
      continue;
    }
    if (round == kill_rounds) break;  // the last round only waits for progress
    // A worker that hosts subtasks, so every kill makes the job fail over.
    std::vector<std::string> busy;
    for (const auto& vertex : details["vertices"])
      for (const auto& subtask : vertex["subtasks"]) {
        const std::string w = subtask.value("worker", "");
        if (!w.empty() && std::find(busy.begin(), busy.end(), w) == busy.end()) busy.push_back(w);
      }
    std::sort(busy.begin(), busy.end());
    REQUIRE_FALSE(busy.empty());
    const std::string victim =
        busy[std::uniform_int_distribution<std::size_t>(0, busy.size() - 1)(rng)];
    REQUIRE(workers.contains(victim));
    std::cout << "chaos round " << round << ": kill -9 worker " << victim << " after checkpoint "
              << newest_checkpoint << std::endl;
    workers[victim]->send_signal(SIGKILL);
    REQUIRE(workers[victim]->wait_exit(patience).has_value());
    ++workers_killed;
    random_pause(rng, 200);
    workers[victim] = runtime_worker(control, victim);
    expect_restart = true;
  }

  const bool finished =
      eventually([&] { return coordinator->job(job).value("state", "") == "FINISHED"; }, 240s);
  INFO(diagnostics());
  REQUIRE(finished);
  CHECK(workers_killed == worker_kills);
  CHECK(coordinators_killed == 1);
  check_exactly_once(out, chaos_records, chaos_keys);

  for (auto& [id, w] : workers) w->send_signal(SIGTERM);
  coordinator->process().send_signal(SIGTERM);
  for (auto& [id, w] : workers) CHECK(w->wait_exit(patience) == 0);
  CHECK(coordinator->process().wait_exit(patience) == 0);
  // A finished job keeps no checkpoint, and no shared file of incremental ones.
  CHECK(eventually([&] {
    std::error_code ec;
    return fs::is_empty(state / job / "shared", ec) || ec;
  }));
}

}  // namespace

TEST_CASE("chaos: a million records exactly once through kill -9 of workers and the coordinator") {
  run_chaos("chaos", "");
}

TEST_CASE("chaos: the same with keyed state in rocksdb and incremental checkpoints") {
  run_chaos("chaos-rocksdb", "state_backend = \"rocksdb\"\nincremental = true\n");
}

namespace {

// Sources that never end, checkpointing every 5 ms, on stub workers (they acknowledge at once):
// the coordinator is writing checkpoint metadata or reserving ids much of the time.
std::string busy_checkpoints_job() {
  return "[job]\nname = \"durability\"\nparallelism = 2\n"
         "[checkpointing]\ninterval_ms = 5\ntimeout_ms = 5000\nretained = 3\n"
         "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
         "params = { count = 1000000000 }\n"
         "[[operator]]\nuid = \"sink\"\nkind = \"print_sink\"\ninput = \"source\"\n";
}

}  // namespace

TEST_CASE(
    "durability: a coordinator killed while writing checkpoints restarts from an intact "
    "latest checkpoint and never reuses an id") {
  std::mt19937_64 rng(chaos_seed("durability"));
  temp_dir dir;
  const fs::path state = dir.path() / "state";
  // What this test checks is the coordinator's state folder, not loss detection: a heartbeat
  // timeout longer than a restart lets the workers keep their connection (ZeroMQ reconnects
  // it to the new coordinator) and register again on it when told they are unknown. With the
  // test timeout (500 ms) a worker may give its connection up while the new coordinator's
  // ROUTER still holds the worker's id for it, and the next connection is then not heard.
  constexpr int heartbeat_timeout = 3000;
  auto coordinator = std::make_unique<coordinator_process>(
      state, std::vector<std::string>{}, "tcp://127.0.0.1:*", heartbeat_timeout);
  const std::string control = coordinator->control();
  auto w1 = start_worker(control, "w1");
  auto w2 = start_worker(control, "w2");
  REQUIRE(coordinator->wait_for_workers(2));
  const std::string job = coordinator->submit(busy_checkpoints_job());
  const fs::path job_dir = state / job;

  std::int64_t newest_before_kill = 0;
  constexpr int kills = 5;
  for (int kill = 0; kill < kills; ++kill) {
    // A few checkpoints completed by this incarnation, then a kill at a random moment.
    json details;
    const bool progressed = eventually([&] {
      details = coordinator->job(job);
      return details.is_object() && details.value("state", "") == "RUNNING" &&
             details.value("last-completed-checkpoint", std::int64_t{0}) >= newest_before_kill + 3;
    });
    INFO("kill " << kill << ": " << details.dump()
                 << "\ncoordinator stderr: " << tail(coordinator->process().stderr_text()));
    REQUIRE(progressed);
    random_pause(rng, 60);
    coordinator->process().send_signal(SIGKILL);
    REQUIRE(coordinator->process().wait_exit(patience).has_value());

    // What a restart will find, read straight from the state folder.
    auto found = snapflow::checkpoint_storage(job_dir).recover();
    REQUIRE_FALSE(found.checkpoints.empty());
    const snapflow::completed_checkpoint& latest = found.checkpoints.back();
    std::cout << "durability kill " << kill << ": latest intact checkpoint " << latest.id
              << ", skipped " << found.warnings.size() << std::endl;
    // Never behind what REST reported completed before the kill (that was durable then).
    CHECK(latest.id >= details.value("last-completed-checkpoint", std::int64_t{0}));
    for (const auto& handle : latest.all_handles())
      CHECK(snapflow::checkpoint_storage::verify_state(handle));
    auto counter = snapflow::file_checkpoint_id_counter::open(job_dir);
    REQUIRE(counter);
    CHECK((*counter)->peek_next() > latest.id);
    newest_before_kill = latest.id;

    coordinator = std::make_unique<coordinator_process>(state, std::vector<std::string>{}, control,
                                                        heartbeat_timeout);
    // It resumed from that checkpoint; the next completed one has a fresh, larger id.
    const bool resumed = eventually([&] {
      details = coordinator->job(job);
      return details.is_object() &&
             details.value("restored-from-checkpoint", std::int64_t{0}) == latest.id &&
             details.value("last-completed-checkpoint", std::int64_t{0}) > latest.id;
    });
    INFO("after restart: " << details.dump() << "\ncoordinator stderr: "
                           << tail(coordinator->process().stderr_text()) << "\nw1 stderr: "
                           << tail(w1->stderr_text()) << "\nw2 stderr: " << tail(w2->stderr_text()));
    CHECK(resumed);
  }
  w1->send_signal(SIGTERM);
  w2->send_signal(SIGTERM);
  coordinator->process().send_signal(SIGTERM);
  CHECK(w1->wait_exit(patience) == 0);
  CHECK(w2->wait_exit(patience) == 0);
  CHECK(coordinator->process().wait_exit(patience) == 0);
}
