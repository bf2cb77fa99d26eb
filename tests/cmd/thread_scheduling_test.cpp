// --scheduling of snapflow-worker: the policy names, the policy set on every thread of this
// process (and inherited by threads started later), and real workers whose every thread runs
// under the policy asked for, whatever their parent ran under. --io-thread-scheduling of
// snapflow-coordinator: its ZeroMQ I/O thread alone under the policy asked for.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cmd/thread_scheduling.hpp"
#include "tests/cluster/child_process.hpp"
#include "tests/cluster/cluster_support.hpp"

using namespace snapflow;
using namespace snapflow::testing;

namespace {

// The policy of every thread of `pid` (nothing for one that is neither normal nor batch).
std::vector<std::optional<scheduling_policy>> thread_policies(pid_t pid) {
  std::vector<std::optional<scheduling_policy>> out;
  const auto tasks = std::filesystem::path("/proc") / std::to_string(pid) / "task";
  for (const auto& task : std::filesystem::directory_iterator(tasks))
    out.push_back(thread_scheduling_policy(std::stoi(task.path().filename().string())));
  return out;
}

// The policy of every thread of `pid` whose name (/proc's comm, which ZeroMQ sets on its own
// threads) starts with `prefix`, and of every other thread.
struct policies_by_name {
  std::vector<std::optional<scheduling_policy>> named, others;
};
policies_by_name thread_policies_by_name(pid_t pid, const std::string& prefix) {
  policies_by_name out;
  const auto tasks = std::filesystem::path("/proc") / std::to_string(pid) / "task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    const auto policy = thread_scheduling_policy(std::stoi(task.path().filename().string()));
    // A short-lived thread that ended after the listing has no policy left to read.
    if (!policy && !std::filesystem::exists(task.path())) continue;
    (comm.rfind(prefix, 0) == 0 ? out.named : out.others).push_back(policy);
  }
  return out;
}

// Puts this test process back on the default policy when a test ends, however it ends.
struct restore_normal_policy {
  ~restore_normal_policy() { (void)apply_scheduling_policy(scheduling_policy::normal); }
};

}  // namespace

TEST_CASE("scheduling policy: names parse and print, an unknown one is refused with the reason") {
  for (auto policy : {scheduling_policy::normal, scheduling_policy::batch}) {
    auto parsed = parse_scheduling_policy(to_string(policy));
    REQUIRE(parsed);
    CHECK(*parsed == policy);
  }
  auto bad = parse_scheduling_policy("fifo");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::Contains("'fifo'"));
  CHECK_THAT(bad.err().message, Catch::Contains("normal or batch"));
}

TEST_CASE("scheduling policy: set on every thread of the process, inherited by later threads") {
  restore_normal_policy restore;
  // A thread that exists before the call, parked until the checks are done.
  std::atomic<bool> release{false};
  std::atomic<pid_t> earlier_tid{0};
  std::thread earlier([&] {
    earlier_tid = ::gettid();
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (earlier_tid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  REQUIRE(apply_scheduling_policy(scheduling_policy::batch));
  CHECK(thread_scheduling_policy(0) == scheduling_policy::batch);
  CHECK(thread_scheduling_policy(earlier_tid) == scheduling_policy::batch);
  std::optional<scheduling_policy> later;
  std::thread([&] { later = thread_scheduling_policy(0); }).join();
  CHECK(later == scheduling_policy::batch);

  REQUIRE(apply_scheduling_policy(scheduling_policy::normal));
  CHECK(thread_scheduling_policy(0) == scheduling_policy::normal);
  CHECK(thread_scheduling_policy(earlier_tid) == scheduling_policy::normal);
  release = true;
  earlier.join();
}

TEST_CASE("scheduling option: every thread of a worker runs under it, whatever its parent ran") {
  restore_normal_policy restore;
  temp_dir dir;
  coordinator_process coordinator(dir.path());
  // The parent runs under the other policy, so a worker that only inherited would fail.
  REQUIRE(apply_scheduling_policy(scheduling_policy::normal));
  auto by_default = start_worker(coordinator.control(), "batch-by-default");
  REQUIRE(apply_scheduling_policy(scheduling_policy::batch));
  auto normal = start_worker(coordinator.control(), "normal", {"--scheduling", "normal"});
  REQUIRE(apply_scheduling_policy(scheduling_policy::normal));
  REQUIRE(coordinator.wait_for_workers(2));
  // Registered: both run their ZeroMQ I/O threads and the data plane's by now.
  for (const auto& [pid, policy] :
       {std::pair{by_default->pid(), scheduling_policy::batch},
        std::pair{normal->pid(), scheduling_policy::normal}}) {
    const auto policies = thread_policies(pid);
    INFO("pid " << pid << " expected " << to_string(policy));
    CHECK(policies.size() >= 3);
    for (const auto& p : policies) CHECK(p == policy);
  }
}

TEST_CASE("a bad --scheduling stops a worker with exit code 2 and the reason") {
  child_process worker(
      {SNAPFLOW_WORKER_BIN, "--coordinator", "tcp://127.0.0.1:1", "--scheduling", "fifo"});
  auto code = worker.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(worker.stderr_text(), Catch::Contains("--scheduling"));
  CHECK_THAT(worker.stderr_text(), Catch::Contains("fifo"));
}

TEST_CASE("coordinator: its ZeroMQ threads under SCHED_BATCH by default, normal when asked") {
  restore_normal_policy restore;
  REQUIRE(apply_scheduling_policy(scheduling_policy::normal));
  for (const auto policy : {scheduling_policy::batch, scheduling_policy::normal}) {
    temp_dir dir;
    std::vector<std::string> extra;
    if (policy == scheduling_policy::normal) extra = {"--io-thread-scheduling", "normal"};
    coordinator_process coordinator(dir.path(), extra);
    // Bound and answering: its I/O thread and the reaper that closes sockets exist, though
    // each names itself and takes its policy only once it runs: wait for both, boundedly.
    policies_by_name threads;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      threads = thread_policies_by_name(coordinator.process().pid(), "ZMQbg/");
      if (threads.named.size() == 2 &&
          std::all_of(threads.named.begin(), threads.named.end(),
                      [&](const auto& p) { return p == policy; }))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } while (std::chrono::steady_clock::now() < deadline);
    INFO("expected " << to_string(policy));
    REQUIRE(threads.named.size() == 2);
    for (const auto& p : threads.named) CHECK(p == policy);
    // Every other thread keeps the policy it started under.
    CHECK(threads.others.size() >= 2);
    for (const auto& p : threads.others) CHECK(p == scheduling_policy::normal);
  }
}

TEST_CASE("a bad --io-thread-scheduling stops a coordinator with exit code 2 and the reason") {
  temp_dir dir;
  child_process coordinator({SNAPFLOW_COORDINATOR_BIN, "--state-dir",
                             (dir.path() / "state").string(), "--rest-port", "0",
                             "--io-thread-scheduling", "fifo"});
  auto code = coordinator.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(coordinator.stderr_text(), Catch::Contains("--io-thread-scheduling"));
  CHECK_THAT(coordinator.stderr_text(), Catch::Contains("fifo"));
}
