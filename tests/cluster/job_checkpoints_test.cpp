// A job submitted over REST runs on worker processes and its checkpoints complete end to end.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "tests/cluster/cluster_support.hpp"

using namespace snapflow::testing;

TEST_CASE("periodic checkpoints of a job on two workers complete across processes") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto w1 = start_worker(coordinator.control(), "w1");
  auto w2 = start_worker(coordinator.control(), "w2");
  REQUIRE(coordinator.wait_for_workers(2));

  const std::string job = coordinator.submit(sources_job(2));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 3));
  const json details = coordinator.job(job);
  CHECK(details["state"] == "RUNNING");
  std::set<std::string> workers;
  for (const auto& vertex : details["vertices"])
    for (const auto& subtask : vertex["subtasks"]) workers.insert(subtask["worker"]);
  CHECK(workers == std::set<std::string>{"w1", "w2"});

  // Still completing, and nothing failed along the way.
  const json first = coordinator.checkpoints(job);
  const auto completed = first["counts"]["completed"].get<std::int64_t>();
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, completed + 3));
  const json later = coordinator.checkpoints(job);
  CHECK(later["counts"]["failed"] == 0);
  const json& latest = later["latest"]["completed"];
  REQUIRE(latest.is_object());
  CHECK(latest["num_acknowledged_subtasks"] == 4);
  // Durable: a completed checkpoint's metadata is on disk (older ones are deleted as newer
  // ones complete, so look for whichever is there).
  CHECK(eventually([&] {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "state" / job, ec))
      if (entry.path().filename().string().starts_with("chk-") &&
          std::filesystem::exists(entry.path() / "_metadata", ec))
        return true;
    return false;
  }));

  // A clean shutdown of everything on SIGTERM.
  stop_cleanly(coordinator, {w1.get(), w2.get()});
}

TEST_CASE("a completed checkpoint learns when every subtask was notified from heartbeats") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto w1 = start_worker(coordinator.control(), "w1");
  auto w2 = start_worker(coordinator.control(), "w2");
  REQUIRE(coordinator.wait_for_workers(2));
  const std::string job = coordinator.submit(sources_job(2));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));

  // Workers report the notifications their subtasks handled with their next heartbeat (every
  // 50 ms here): a completed checkpoint gets its time to all notified soon after completing.
  json known;
  REQUIRE(eventually([&] {
    const json stats = coordinator.checkpoints(job);
    for (const auto& h : stats["history"])
      if (h["status"] == "COMPLETED" && h.contains("notified_duration_us")) {
        known = h;
        return true;
      }
    return false;
  }));
  CHECK(known["num_notified_subtasks"] == 4);
  CHECK(known["notified_duration_us"].get<std::int64_t>() > 0);

  const http_result details = coordinator.rest().get(
      "/jobs/" + job + "/checkpoints/details/" + std::to_string(known["id"].get<std::int64_t>()));
  REQUIRE(details.status == 200);
  REQUIRE(details.body["subtasks"].size() == 4);
  // The checkpoint's duration is its last subtask's.
  std::int64_t latest = 0;
  for (const auto& s : details.body["subtasks"]) {
    REQUIRE(s.contains("notified_duration_us"));
    CHECK(s["notified_timestamp_us"].get<std::int64_t>() > 0);
    latest = std::max(latest, s["notified_duration_us"].get<std::int64_t>());
  }
  CHECK(latest == known["notified_duration_us"].get<std::int64_t>());
  CHECK(coordinator.checkpoints(job)["summary"]["notified_duration_us"]["count"] >= 1);

  stop_cleanly(coordinator, {w1.get(), w2.get()});
}
