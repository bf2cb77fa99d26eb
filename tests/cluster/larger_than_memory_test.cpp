// Keyed state larger than memory: with the rocksdb backend and incremental checkpoints a job
// whose keyed state is several times its worker's resident memory runs, checkpoints and
// finishes. The state lives in RocksDB's files under the worker's --local-state-dir; a
// checkpoint's synchronous part hard-links them and its asynchronous part copies the new ones
// with a fixed buffer, so nothing holds the state in memory. A savepoint of such a state, a full
// snapshot in the neutral format, is streamed to its state files one key group at a time, so it
// is taken within the same memory; the job restored from it on a fresh worker, which streams the
// state files back a key group at a time, goes on exactly once within the same memory too.
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"

using namespace snapflow::testing;

namespace {

// 32,768 keys of 32 KiB: 1 GiB of keyed state, every key written once.
constexpr std::int64_t keys = 32'768;
constexpr std::int64_t value_bytes = 32 * 1024;
constexpr std::int64_t state_bytes = keys * value_bytes;

std::string large_state_job() {
  std::ostringstream os;
  os << "[job]\nname = \"larger-than-memory\"\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 200\nstate_backend = \"rocksdb\"\nincremental = true\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 1\n"
     << "params = { count = " << keys << ", keys = " << keys << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 2\nparams = { value_bytes = " << value_bytes
     << " }\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"discard_sink\"\ninput = \"sum\"\n"
     << "parallelism = 2\n";
  return os.str();
}

// The peak resident set of process `pid` (VmHWM), in bytes; 0 when unreadable.
std::int64_t peak_resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return 0;
}

// Sets an environment variable for the processes started while it lives (children inherit the
// environment), and puts the old value back.
class scoped_env {
 public:
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A runtime worker whose resident memory is what it holds: 8 MiB of block cache per rocksdb
// instance (the memory bound the state outgrows) and, under AddressSanitizer, a 4 MiB
// quarantine instead of 256 MiB for freed memory before it is reused.
std::unique_ptr<child_process> memory_bounded_worker(const coordinator_process& coordinator,
                                                     const std::string& id, int slots,
                                                     const std::filesystem::path& local_state,
                                                     int heartbeat_timeout) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  scoped_env small_quarantine("ASAN_OPTIONS",
                              std::string(asan ? asan : "") + ":quarantine_size_mb=4");
  return std::make_unique<child_process>(std::vector<std::string>{
      SNAPFLOW_WORKER_BIN, "--coordinator", coordinator.control(), "--id", id, "--slots",
      std::to_string(slots), "--executor", "runtime", "--heartbeat-interval-ms",
      std::to_string(heartbeat_interval_ms), "--heartbeat-timeout-ms",
      std::to_string(heartbeat_timeout), "--data-root", test_data_root(), "--local-state-dir",
      local_state.string(), "--rocksdb-block-cache-mb", "8"});
}

}  // namespace

TEST_CASE("rocksdb with incremental checkpoints: keyed state four times the worker's resident "
          "memory runs, checkpoints and finishes") {
  temp_dir dir;
  // Writing and syncing gigabytes can stall a loaded test machine for longer than the test
  // heartbeat timeout: this test is about memory, not loss detection.
  constexpr int heartbeat_timeout = 10'000;
  coordinator_process coordinator(dir.path() / "state", {}, "tcp://127.0.0.1:*",
                                  heartbeat_timeout);
  std::unique_ptr<child_process> worker =
      memory_bounded_worker(coordinator, "w1", 2, dir.path() / "local", heartbeat_timeout);
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(large_state_job());
  const bool finished = eventually(
      [&] {
        const std::string state = coordinator.job(job).value("state", "");
        return state == "FINISHED" || state == "FAILED" || state == "CANCELED";
      },
      300s);
  const json checkpoints = coordinator.checkpoints(job);
  INFO("job: " << coordinator.job(job).dump() << "\ncheckpoints: " << checkpoints.dump()
               << "\nworker stderr: " << worker->stderr_text());
  REQUIRE(finished);
  REQUIRE(coordinator.job(job).value("state", "") == "FINISHED");
  CHECK(coordinator.job(job).value("restarts", -1) == 0);

  // The newest checkpoint holds the whole state (the final one, after the last record); what
  // checkpoints wrote stayed far below writing the whole state each time.
  const json& latest = checkpoints["latest"]["completed"];
  REQUIRE(latest.is_object());
  const std::int64_t held = latest.value("state_size", std::int64_t{0});
  CHECK(held >= state_bytes);
  CHECK(checkpoints["counts"].value("completed", 0) >= 2);

  const std::int64_t resident = peak_resident_bytes(worker->pid());
  INFO("state " << held << " bytes, worker peak resident " << resident << " bytes");
  REQUIRE(resident > 0);
  CHECK(held >= 4 * resident);

  stop_cleanly(coordinator, {worker.get()});
}

namespace {

// 16,384 keys of 32 KiB (512 MiB), three records per key at 1,000 records per second: every key
// holds its bytes after about 16 s, and the job runs for about 33 s more, time for a savepoint
// of the whole state even on a loaded machine (taken once the job could finish, it fails).
constexpr std::int64_t savepoint_keys = 16'384;
constexpr std::int64_t savepoint_records = 3 * savepoint_keys;
constexpr std::int64_t savepoint_state_bytes = savepoint_keys * value_bytes;

std::string savepoint_job(const std::filesystem::path& out) {
  std::ostringstream os;
  os << "[job]\nname = \"larger-than-memory-savepoint\"\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 200\nmode = \"exactly_once\"\n"
     << "state_backend = \"rocksdb\"\nincremental = true\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 1\n"
     << "params = { count = " << savepoint_records << ", keys = " << savepoint_keys
     << ", rate = 1000 }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 2\nparams = { value_bytes = " << value_bytes
     << " }\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\n"
     << "input = \"sum\"\nparallelism = 2\nparams = { path = " << json(out.string()).dump()
     << " }\n";
  return os.str();
}

// The bytes of the state files (*.state) in `folder`.
std::int64_t state_file_bytes(const std::filesystem::path& folder) {
  std::int64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder))
    if (e.path().extension() == ".state") n += static_cast<std::int64_t>(e.file_size());
  return n;
}

}  // namespace

TEST_CASE("rocksdb: a savepoint of keyed state larger than the worker's resident memory is "
          "streamed to its state files, and the job restored from it goes on exactly once") {
  temp_dir dir;
  constexpr int heartbeat_timeout = 10'000;
  coordinator_process coordinator(dir.path() / "state", {}, "tcp://127.0.0.1:*",
                                  heartbeat_timeout);
  const auto start_worker = [&](const std::string& id) {
    return memory_bounded_worker(coordinator, id, 3, dir.path() / ("local-" + id),
                                 heartbeat_timeout);
  };
  std::unique_ptr<child_process> worker = start_worker("w1");
  REQUIRE(coordinator.wait_for_workers(1));
  const auto out = dir.path() / "out";
  const std::string job = coordinator.submit(savepoint_job(out));

  // Every key holds its bytes once the source emitted a record for each (the savepoint's
  // barrier follows them), and the job still runs.
  const bool filled = eventually(
      [&] {
        return coordinator.job(job).value("source-records", std::int64_t{0}) >= savepoint_keys;
      },
      240s);
  INFO("job: " << coordinator.job(job).dump() << "\nworker stderr: " << worker->stderr_text());
  REQUIRE(filled);
  REQUIRE(coordinator.job(job).value("state", "") == "RUNNING");

  const std::string savepoint = coordinator.savepoint_and_cancel(
      job, "big", 240s, [&] { return "\nworker stderr: " + worker->stderr_text(); });

  // The savepoint holds the whole state in its own state files, several times what the
  // worker ever held in memory (materialised and encoded whole, it would have held it twice).
  const std::int64_t saved = state_file_bytes(savepoint);
  const std::int64_t resident = peak_resident_bytes(worker->pid());
  INFO("savepoint " << saved << " bytes, worker peak resident " << resident << " bytes");
  CHECK(saved >= savepoint_state_bytes);
  REQUIRE(resident > 0);
  CHECK(saved >= 2 * resident);

  // Restored from it on a fresh worker (its peak resident memory is the restore's and the rest
  // of the run's alone), the job finishes, and every record's running sum is the exactly-once
  // one. The restore streams each state file a key group at a time into SST files, so the
  // fresh worker too holds a small part of the state: the state files are at least twice its
  // peak resident memory (read whole, each subtask's file would have been held at once).
  worker->send_signal(SIGTERM);
  REQUIRE(worker->wait_exit(patience) == 0);
  REQUIRE(coordinator.wait_for_workers(0));
  std::unique_ptr<child_process> restorer = start_worker("w2");
  REQUIRE(coordinator.wait_for_workers(1));
  const http_result restored =
      coordinator.rest().post("/jobs?fromSavepoint=" + savepoint, savepoint_job(out));
  INFO("restore: " << restored.status << " " << restored.body.dump());
  REQUIRE(restored.status == 202);
  const std::string second = restored.body["jobid"].get<std::string>();
  const bool finished = eventually(
      [&] {
        const std::string state = coordinator.job(second).value("state", "");
        return state == "FINISHED" || state == "FAILED" || state == "CANCELED";
      },
      240s);
  INFO("restored job: " << coordinator.job(second).dump()
                        << "\nrestoring worker stderr: " << restorer->stderr_text());
  REQUIRE(finished);
  REQUIRE(coordinator.job(second).value("state", "") == "FINISHED");
  const std::int64_t restore_resident = peak_resident_bytes(restorer->pid());
  INFO("restoring worker peak resident " << restore_resident << " bytes");
  REQUIRE(restore_resident > 0);
  CHECK(saved >= 2 * restore_resident);
  const committed_output o = read_committed_output(out, savepoint_records, savepoint_keys);
  CHECK(o.lines == static_cast<std::size_t>(savepoint_records));
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.bad_lines == 0);
  CHECK(o.wrong_sums == 0);

  stop_cleanly(coordinator, {restorer.get()});
}

TEST_CASE("a worker refuses a --rocksdb-block-cache-mb of 0, beyond 1 TiB or not a number with "
          "exit code 2 and the reason") {
  for (const char* bad : {"0", "1048577", "lots"}) {
    INFO(bad);
    child_process worker({SNAPFLOW_WORKER_BIN, "--coordinator", "tcp://127.0.0.1:1",
                          "--rocksdb-block-cache-mb", bad});
    const auto code = worker.wait_exit(patience);
    REQUIRE(code);
    CHECK(*code == 2);
    CHECK_THAT(worker.stderr_text(), Catch::Contains("--rocksdb-block-cache-mb"));
  }
}
