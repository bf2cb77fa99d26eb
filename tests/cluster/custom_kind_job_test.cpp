// A job naming an operator kind only custom workers know (times_ten, declared with role =
// "transform") is accepted by a stock coordinator, runs on custom workers, and fails on stock
// workers with a cause that names the kind.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <vector>

#include "tests/cluster/cluster_support.hpp"

using namespace snapflow::testing;

namespace {

constexpr std::int64_t record_count = 2'000;

// sequence_source -> times_ten (custom) -> two_phase_commit_file_sink, checkpointing often so
// the sink commits through checkpoints; no restarts, so a failure ends the job.
std::string times_ten_job(const std::filesystem::path& out) {
  std::ostringstream os;
  os << "[job]\nname = \"custom-kind-test\"\n\n"
     << "[checkpointing]\ninterval_ms = 30\nmode = \"exactly_once\"\n\n"
     << "[restart]\nstrategy = \"none\"\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
     << "params = { count = " << record_count << ", keys = 4 }\n\n"
     << "[[operator]]\nuid = \"x10\"\nkind = \"times_ten\"\nrole = \"transform\"\n"
     << "input = \"source\"\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"x10\"\n"
     << "params = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

std::string job_state(const coordinator_process& coordinator, const std::string& job) {
  return coordinator.job(job).value("state", "");
}

}  // namespace

TEST_CASE("a custom kind declared with its role runs on custom workers") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "custom-1", {"--executor", "runtime"},
                             SNAPFLOW_CUSTOM_WORKER_BIN);
  REQUIRE(coordinator.wait_for_workers(1));

  const auto out = dir.path() / "out";
  const std::string job = coordinator.submit(times_ten_job(out));
  const bool finished =
      eventually([&] { return job_state(coordinator, job) == "FINISHED"; }, 40s);
  INFO("job: " << coordinator.job(job).dump() << "\nworker stderr: " << worker->stderr_text());
  REQUIRE(finished);
  CHECK(coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>() >= 1);

  // Every record once, its value (seq) multiplied by ten on the way.
  std::vector<int> seen(record_count, 0);
  std::size_t lines = 0, wrong = 0;
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name.starts_with(".")) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      ++lines;
      std::istringstream fields(line);
      std::int64_t key = 0, seq = 0, value = 0;
      char c1 = 0, c2 = 0;
      fields >> key >> c1 >> seq >> c2 >> value;
      if (!fields || seq < 0 || seq >= record_count || value != seq * 10) {
        ++wrong;
        continue;
      }
      ++seen[static_cast<std::size_t>(seq)];
    }
  }
  CHECK(wrong == 0);
  CHECK(lines == static_cast<std::size_t>(record_count));
  CHECK(std::count(seen.begin(), seen.end(), 1) == record_count);

  stop_cleanly(coordinator, {worker.get()});
}

TEST_CASE("the same job on stock workers fails with a cause naming the unknown kind") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "stock-1", {"--executor", "runtime"});
  REQUIRE(coordinator.wait_for_workers(1));

  const std::string job = coordinator.submit(times_ten_job(dir.path() / "out"));
  const bool failed = eventually([&] { return job_state(coordinator, job) == "FAILED"; });
  const json details = coordinator.job(job);
  INFO("job: " << details.dump() << "\nworker stderr: " << worker->stderr_text());
  REQUIRE(failed);
  REQUIRE(details.contains("failure-cause"));
  CHECK_THAT(details["failure-cause"].get<std::string>(),
             Catch::Contains("no implementation for operator kind 'times_ten'"));

  stop_cleanly(coordinator, {worker.get()});
}
