// The exactly-once example on real worker processes with the runtime executor: records flow
// between workers over the data plane, and the committed output holds every record exactly
// once with correct running sums, with and without a worker killed mid-run.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"

using namespace snapflow::testing;

namespace {

constexpr std::int64_t record_count = 100'000;
constexpr std::int64_t key_count = 16;

// The example at reduced size: 2 sources, keyed_sum and sink of parallelism 4. `rate` (records
// per second per source, 0 = unlimited) keeps the job running long enough to kill a worker.
// `backend`: the keyed state backend ("hashmap" when empty); `incremental`: its checkpoints.
std::string exactly_once_job(const std::filesystem::path& out, int rate,
                             const std::string& backend = {}, bool incremental = false) {
  std::ostringstream os;
  os << "[job]\nname = \"exactly-once-sum-test\"\nparallelism = 4\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 30\nmode = \"exactly_once\"\n";
  if (!backend.empty()) os << "state_backend = \"" << backend << "\"\n";
  if (incremental) os << "incremental = true\n";
  os << "\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = " << record_count << ", keys = " << key_count
     << ", rate = " << rate << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 4\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"sum\"\n"
     << "parallelism = 4\nparams = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

// A runtime worker with two slots (the job needs four: its widest vertex).
// `local_state_dir`: its --local-state-dir, when not empty.
std::unique_ptr<child_process> runtime_worker(const std::string& control, const std::string& id,
                                              const std::filesystem::path& local_state_dir = {}) {
  std::vector<std::string> args{
      SNAPFLOW_WORKER_BIN, "--coordinator", control, "--id", id, "--slots", "2", "--executor",
      "runtime", "--heartbeat-interval-ms", std::to_string(heartbeat_interval_ms),
      "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms), "--data-root",
      test_data_root()};
  if (!local_state_dir.empty()) {
    args.emplace_back("--local-state-dir");
    args.push_back(local_state_dir.string());
  }
  return std::make_unique<child_process>(args);
}

// RocksDB instances (one folder per subtask attempt) of worker `id` under its --local-state-dir.
std::size_t rocksdb_instances(const std::filesystem::path& local_state_dir, const std::string& id) {
  // Its own folder: worker-<id>-<crc of the id>.
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator worker(local_state_dir, ec), end; !ec && worker != end;
       worker.increment(ec)) {
    if (!worker->path().filename().string().starts_with("worker-" + id + "-")) continue;
    std::error_code inner;
    for (std::filesystem::directory_iterator it(worker->path() / "rocksdb", inner);
         !inner && it != end; it.increment(inner))
      ++n;
  }
  return n;
}

// Checks the committed output: every seq exactly once, with the running sum of its key after it
// (tests/cluster/committed_output).
void check_exactly_once(const std::filesystem::path& out) {
  const committed_output o = read_committed_output(out, record_count, key_count);
  INFO("lines " << o.lines);
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.wrong_sums == 0);
  CHECK(o.lines == static_cast<std::size_t>(record_count));
}

bool job_finished(const coordinator_process& coordinator, const std::string& job,
                  std::chrono::milliseconds within) {
  return eventually([&] { return coordinator.job(job).value("state", "") == "FINISHED"; },
                    within);
}

// Kills worker w2 with kill -9 mid-run, starts a new w2 in its place (with `local_state_dir`,
// when given), and checks that the job finishes after a restart with every record committed
// exactly once.
void kill_worker_and_finish(coordinator_process& coordinator, const std::string& job,
                            const std::filesystem::path& out, child_process& w1,
                            std::unique_ptr<child_process>& w2,
                            const std::filesystem::path& local_state_dir = {}) {
  w2->send_signal(SIGKILL);
  REQUIRE(w2->wait_exit(patience).has_value());
  // A new process with the same id: the coordinator takes it as a new incarnation.
  w2 = runtime_worker(coordinator.control(), "w2", local_state_dir);
  const bool finished = job_finished(coordinator, job, 60s);
  const json details = coordinator.job(job);
  INFO("job: " << details.dump() << "\nw1 stderr: " << w1.stderr_text()
               << "\nw2 stderr: " << w2->stderr_text());
  REQUIRE(finished);
  CHECK(details.value("restarts", 0) >= 1);
  check_exactly_once(out);
}

}  // namespace

TEST_CASE("the exactly-once example runs on two runtime workers and commits every record once") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto w1 = runtime_worker(coordinator.control(), "w1");
  auto w2 = runtime_worker(coordinator.control(), "w2");
  REQUIRE(coordinator.wait_for_workers(2));

  const auto out = dir.path() / "out";
  const std::string job = coordinator.submit(exactly_once_job(out, 0));
  const bool finished = job_finished(coordinator, job, 40s);
  INFO("job: " << coordinator.job(job).dump() << "\nw1 stderr: " << w1->stderr_text()
               << "\nw2 stderr: " << w2->stderr_text());
  REQUIRE(finished);
  // The sink committed through checkpoints (the final one at least), not only at the end.
  CHECK(coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>() >= 1);
  check_exactly_once(out);

  stop_cleanly(coordinator, {w1.get(), w2.get()});
}

TEST_CASE("the exactly-once example survives a worker killed mid-run and stays exactly once") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto w1 = runtime_worker(coordinator.control(), "w1");
  auto w2 = runtime_worker(coordinator.control(), "w2");
  REQUIRE(coordinator.wait_for_workers(2));

  const auto out = dir.path() / "out";
  // About 2.5 s of input: long enough to kill a worker in the middle of it.
  const std::string job = coordinator.submit(exactly_once_job(out, 20'000));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 3));
  const json running = coordinator.job(job);
  REQUIRE(running.value("state", "") == "RUNNING");
  // Subtasks on both workers: records cross the network between them.
  std::set<std::string> workers;
  for (const auto& vertex : running["vertices"])
    for (const auto& subtask : vertex["subtasks"]) workers.insert(subtask["worker"]);
  CHECK(workers == std::set<std::string>{"w1", "w2"});

  kill_worker_and_finish(coordinator, job, out, *w1, w2);

  stop_cleanly(coordinator, {w1.get(), w2.get()});
}

namespace {

// Files in the job's shared/ folder (incremental checkpoints).
std::size_t shared_files(const std::filesystem::path& state, const std::string& job) {
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator it(state / job / "shared", ec), end; !ec && it != end;
       it.increment(ec))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("with the rocksdb backend, the example survives a worker killed mid-run, exactly once, "
          "its instances in the workers' --local-state-dir") {
  const bool incremental = GENERATE(false, true);
  INFO((incremental ? "incremental" : "full") << " checkpoints");
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  const auto local1 = dir.path() / "local-1";
  const auto local2 = dir.path() / "local-2";
  auto w1 = runtime_worker(coordinator.control(), "w1", local1);
  auto w2 = runtime_worker(coordinator.control(), "w2", local2);
  REQUIRE(coordinator.wait_for_workers(2));

  const auto out = dir.path() / "out";
  const std::string job =
      coordinator.submit(exactly_once_job(out, 20'000, "rocksdb", incremental));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 3));
  // Incremental checkpoints keep RocksDB's files in the job's shared folder.
  CHECK((shared_files(dir.path() / "state", job) > 0) == incremental);
  // keyed_sum's 4 subtasks keep their state in RocksDB instances on the two workers.
  CHECK(rocksdb_instances(local1, "w1") + rocksdb_instances(local2, "w2") == 4);
  // What the killed worker leaves, the next process with its id removes.
  const bool w2_had_instances = rocksdb_instances(local2, "w2") > 0;

  kill_worker_and_finish(coordinator, job, out, *w1, w2, local2);
  // A finished job keeps no checkpoint: no shared file is left either (once the coordinator's
  // discards, which run beside it, are done).
  CHECK(eventually([&] { return shared_files(dir.path() / "state", job) == 0; }));
  // Every instance is removed when its subtask ends; the killed worker's went when the new
  // process started.
  CHECK(eventually([&] {
    return rocksdb_instances(local1, "w1") == 0 && rocksdb_instances(local2, "w2") == 0;
  }));
  if (w2_had_instances)
    CHECK_THAT(w2->stderr_text(), Catch::Contains("removed the local state an earlier worker"));

  stop_cleanly(coordinator, {w1.get(), w2.get()});
}
