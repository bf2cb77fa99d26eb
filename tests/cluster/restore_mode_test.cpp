// Restore modes on real processes: a keyed job with rocksdb incremental checkpoints retained
// on cancellation, then jobs started from its checkpoints with NO_CLAIM (the snapshot stays
// as it was, the new job's checkpoints name none of its files) and with CLAIM (the job takes
// it over and deletes it once newer checkpoints subsume it).
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/paths/confined_folder.hpp"
#include "tests/cluster/cluster_support.hpp"

using namespace snapflow::testing;
namespace fs = std::filesystem;
using snapflow::checkpoint_storage;
using snapflow::completed_checkpoint;
using snapflow::confined_folder;

namespace {

std::string incremental_job() {
  std::ostringstream os;
  os << "[job]\nname = \"restore-modes\"\nparallelism = 1\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 50\nstate_backend = \"rocksdb\"\nincremental = true\n"
     << "retained = 2\nretention = \"retain_on_cancellation\"\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
     << "params = { count = 1000000, keys = 64, rate = 2000 }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"discard_sink\"\ninput = \"sum\"\n";
  return os.str();
}

std::unique_ptr<child_process> worker(const std::string& control) {
  return std::make_unique<child_process>(std::vector<std::string>{
      SNAPFLOW_WORKER_BIN, "--coordinator", control, "--id", "w1", "--slots", "4", "--executor",
      "runtime", "--heartbeat-interval-ms", std::to_string(heartbeat_interval_ms),
      "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms), "--data-root",
      test_data_root()});
}

std::string submit_from(const coordinator_process& c, const std::string& toml,
                        const fs::path& snapshot, const std::string& mode) {
  const http_result r = c.rest().post(
      "/jobs?fromSavepoint=" + snapshot.string() + "&claimMode=" + mode, toml);
  INFO(r.body.dump());
  REQUIRE(r.status == 202);
  return r.body["jobid"].get<std::string>();
}

// Cancels the job and waits until it ended and sealed its retained checkpoints.
void cancel(const coordinator_process& c, const fs::path& state, const std::string& job) {
  REQUIRE(c.rest().patch("/jobs/" + job + "?mode=cancel").status == 202);
  REQUIRE(eventually([&] { return c.job(job)["state"] == "CANCELED"; }));
  REQUIRE(eventually([&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state / job, ec))
      if (e.path().filename().string().starts_with("_checkpoints-")) return false;
    return true;
  }));
}

std::vector<completed_checkpoint> retained(const fs::path& job_dir) {
  return checkpoint_storage(job_dir).recover().checkpoints;
}

bool names_shared(const completed_checkpoint& c) {
  for (const auto& h : c.all_handles())
    if (h.is_shared()) return true;
  return false;
}

// Every file of the snapshot in `folder` (its own and the shared ones it names): bytes and
// modification time.
std::map<fs::path, std::pair<std::string, fs::file_time_type>> fingerprint(const fs::path& folder) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(folder))
    if (e.is_regular_file()) files.push_back(e.path());
  for (const auto& h : checkpoint_storage::read_metadata(folder)->all_handles())
    if (h.is_shared()) files.emplace_back(h.path);
  std::map<fs::path, std::pair<std::string, fs::file_time_type>> out;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::error_code ec;
    out[file] = {text.str(), fs::last_write_time(file, ec)};
  }
  return out;
}

}  // namespace

TEST_CASE("restore modes with rocksdb incremental checkpoints: NO_CLAIM leaves the snapshot "
          "unchanged and checkpoints in full, CLAIM takes it over and deletes it once subsumed") {
  temp_dir dir;
  const fs::path state = dir.path() / "state";
  coordinator_process coordinator(state);
  auto w1 = worker(coordinator.control());
  REQUIRE(coordinator.wait_for_workers(1));

  const std::string old = coordinator.submit(incremental_job());
  REQUIRE(coordinator.wait_for_completed_checkpoints(old, 4));
  cancel(coordinator, state, old);
  auto kept = retained(state / old);
  REQUIRE(kept.size() == 2);
  for (const auto& c : kept) REQUIRE(names_shared(c));
  const fs::path newer = kept[1].location, older = kept[0].location;
  // Only the snapshot's files: the cancelled job's tasks may still write a state file of a
  // checkpoint aborted at the cancellation (its folder is swept later).
  const auto before = fingerprint(newer);
  REQUIRE(before.size() >= 4);

  SECTION("NO_CLAIM") {
    const std::string b = submit_from(coordinator, incremental_job(), newer,
                                      "NO_CLAIM");
    CHECK(coordinator.job(b)["restored-from"]["claim-mode"] == "NO_CLAIM");
    const bool completed = coordinator.wait_for_completed_checkpoints(b, 3);
    INFO(coordinator.job(b).dump() << coordinator.checkpoints(b).dump());
    REQUIRE(completed);
    cancel(coordinator, state, b);
    // The new job's checkpoints name files in its own folder only.
    const confined_folder own(state / b);
    for (const auto& c : retained(state / b))
      for (const auto& h : c.all_handles())
        if (!h.is_inline()) CHECK(own.lexically_contains(fs::path(h.path)));
    const auto after = fingerprint(newer);
    for (const auto& [path, file] : after) {
      INFO(path);
      CHECK(before.contains(path));
    }
    CHECK(after == before);
  }

  SECTION("CLAIM") {
    const std::string c = submit_from(coordinator, incremental_job(), older,
                                      "CLAIM");
    CHECK(coordinator.job(c)["restored-from"]["claim-mode"] == "CLAIM");
    CHECK_FALSE(fs::exists(older));
    // The old job's other checkpoint is whole.
    for (const auto& h : checkpoint_storage::read_metadata(newer)->all_handles())
      if (!h.is_inline()) CHECK(checkpoint_storage::verify_state(h));
    const fs::path adopted = checkpoint_storage::checkpoint_dir(state / c, kept[0].id);
    std::set<std::string> adopted_shared;
    for (const auto& h : checkpoint_storage::read_metadata(adopted)->all_handles())
      if (h.is_shared()) adopted_shared.insert(h.path);
    REQUIRE(coordinator.wait_for_completed_checkpoints(c, 3));
    cancel(coordinator, state, c);
    CHECK_FALSE(fs::exists(adopted));
    std::set<std::string> still_named;
    for (const auto& k : retained(state / c))
      for (const auto& h : k.all_handles())
        if (h.is_shared()) still_named.insert(h.path);
    for (const auto& path : adopted_shared) {
      INFO(path);
      CHECK(fs::exists(path) == still_named.contains(path));
    }
  }

  stop_cleanly(coordinator, {w1.get()});
}
