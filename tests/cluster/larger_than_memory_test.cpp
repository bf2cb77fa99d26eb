// Keyed state larger than memory: with the rocksdb backend and incremental checkpoints a job
// whose keyed state is several times its worker's resident memory runs, checkpoints and
// finishes. The state lives in RocksDB's files under the worker's --local-state-dir; a
// checkpoint's synchronous part hard-links them and its asynchronous part copies the new ones
// with a fixed buffer, so nothing holds the state in memory.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/cluster/cluster_support.hpp"

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

}  // namespace

TEST_CASE("rocksdb with incremental checkpoints: keyed state four times the worker's resident "
          "memory runs, checkpoints and finishes") {
  temp_dir dir;
  // Writing and syncing gigabytes can stall a loaded test machine for longer than the test
  // heartbeat timeout: this test is about memory, not loss detection.
  constexpr int heartbeat_timeout = 10'000;
  coordinator_process coordinator(dir.path() / "state", {}, "tcp://127.0.0.1:*",
                                  heartbeat_timeout);
  std::unique_ptr<child_process> worker;
  {
    // Under AddressSanitizer freed memory waits in a quarantine (256 MiB by default) before it
    // is reused: kept small, the worker's resident memory is what it really holds.
    const char* asan = std::getenv("ASAN_OPTIONS");
    scoped_env small_quarantine(
        "ASAN_OPTIONS", std::string(asan ? asan : "") + ":quarantine_size_mb=4");
    worker = std::make_unique<child_process>(std::vector<std::string>{
        SNAPFLOW_WORKER_BIN, "--coordinator", coordinator.control(), "--id", "w1", "--slots",
        "2", "--executor", "runtime", "--heartbeat-interval-ms",
        std::to_string(heartbeat_interval_ms), "--heartbeat-timeout-ms",
        std::to_string(heartbeat_timeout), "--data-root", test_data_root(),
        "--local-state-dir", (dir.path() / "local").string(),
        // The memory bound the state outgrows: 8 MiB of block cache per instance.
        "--rocksdb-block-cache-mb", "8"});
  }
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
