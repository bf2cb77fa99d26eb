// --cpus of snapflow-worker and snapflow-coordinator: the CPU list grammar, the shares of
// `snapflow local --pin-workers` (run end to end in local_command_test.cpp), and real processes
// whose every thread lands where it was put.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cmd/cpu_affinity.hpp"
#include "tests/cluster/child_process.hpp"
#include "tests/cluster/cluster_support.hpp"

using namespace snapflow;
using namespace snapflow::testing;

namespace {

std::vector<int> parsed(std::string_view text) {
  auto r = parse_cpu_list(text);
  INFO(text << ": " << (r ? std::string("ok") : r.err().message));
  REQUIRE(r);
  return *r;
}

std::string refused(std::string_view text) {
  auto r = parse_cpu_list(text);
  INFO(text);
  REQUIRE_FALSE(r);
  return r.err().message;
}

// Cpus_allowed_list of every thread of `pid`, one entry per thread.
std::vector<std::string> thread_cpus(pid_t pid) {
  std::vector<std::string> out;
  const auto tasks = std::filesystem::path("/proc") / std::to_string(pid) / "task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Cpus_allowed_list:", 0) == 0)
        out.push_back(line.substr(line.find_first_not_of(" \t", 18)));
  }
  return out;
}

}  // namespace

TEST_CASE("cpu list: single CPUs, ranges, lists, merged and sorted") {
  CHECK(parsed("3") == std::vector<int>{3});
  CHECK(parsed("0-3") == std::vector<int>{0, 1, 2, 3});
  CHECK(parsed("6,0-2,4") == std::vector<int>{0, 1, 2, 4, 6});
  CHECK(parsed("1,1,0-1") == std::vector<int>{0, 1});
  CHECK(parsed("5-5") == std::vector<int>{5});
}

TEST_CASE("cpu list: malformed lists are refused with the reason") {
  CHECK_THAT(refused(""), Catch::Contains("empty"));
  CHECK_THAT(refused("a"), Catch::Contains("'a' is not a CPU number"));
  CHECK_THAT(refused("0,,1"), Catch::Contains("'' is not a CPU number"));
  CHECK_THAT(refused("1,"), Catch::Contains("'' is not a CPU number"));
  CHECK_THAT(refused("-1"), Catch::Contains("is not a CPU number"));
  CHECK_THAT(refused("3-1"), Catch::Contains("range that goes down"));
  CHECK_THAT(refused("0-"), Catch::Contains("is not a CPU number"));
  CHECK_THAT(refused("1 "), Catch::Contains("is not a CPU number"));
  CHECK_THAT(refused("99999999999999999999"), Catch::Contains("is not a CPU number"));
  CHECK_THAT(refused("100000"), Catch::Contains("beyond the largest CPU number"));
}

TEST_CASE("cpu list: formatting is the shortest list and parses back") {
  CHECK(format_cpu_list({}) == "");
  CHECK(format_cpu_list({2}) == "2");
  CHECK(format_cpu_list({0, 1, 2, 3, 6, 8, 9}) == "0-3,6,8-9");
  for (const auto* text : {"0", "0-3", "0,2,4-7", "1,3,5"})
    CHECK(format_cpu_list(parsed(text)) == text);
}

TEST_CASE("cpu shares: contiguous and even, or round robin when CPUs are fewer") {
  const std::vector<int> eight{0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(cpu_share(eight, 2, 0) == std::vector<int>{0, 1, 2, 3});
  CHECK(cpu_share(eight, 2, 1) == std::vector<int>{4, 5, 6, 7});
  CHECK(cpu_share(eight, 3, 0) == std::vector<int>{0, 1, 2});
  CHECK(cpu_share(eight, 3, 1) == std::vector<int>{3, 4, 5});
  CHECK(cpu_share(eight, 3, 2) == std::vector<int>{6, 7});
  const std::vector<int> two{4, 9};  // the CPUs a process may use need not start at 0
  CHECK(cpu_share(two, 2, 1) == std::vector<int>{9});
  CHECK(cpu_share(two, 3, 2) == std::vector<int>{4});
  CHECK(cpu_share(two, 5, 3) == std::vector<int>{9});
  CHECK(cpu_share(two, 2, 2).empty());
  CHECK(cpu_share({}, 2, 0).empty());
}

TEST_CASE("pinning to a CPU this process may not use is refused and changes nothing") {
  auto allowed = allowed_cpus();
  REQUIRE(allowed);
  REQUIRE_FALSE(allowed->empty());
  const int outside = allowed->back() + 1;
  auto r = pin_process_to({allowed->front(), outside});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("CPU " + std::to_string(outside) +
                                              " is not available to this process"));
  CHECK_THAT(r.err().message, Catch::Contains(format_cpu_list(*allowed)));
  auto after = allowed_cpus();
  REQUIRE(after);
  CHECK(*after == *allowed);
  CHECK_FALSE(pin_process_to({}));
}

TEST_CASE("cpus option: every thread of a coordinator and a worker placed, and they still work") {
  auto allowed = allowed_cpus();
  REQUIRE(allowed);
  const std::string coordinator_cpu = std::to_string(allowed->front());
  const std::string worker_cpu = std::to_string(allowed->back());
  temp_dir dir;
  coordinator_process coordinator(dir.path(), {"--cpus", coordinator_cpu});
  auto worker = start_worker(coordinator.control(), "pinned", {"--cpus", worker_cpu});
  REQUIRE(coordinator.wait_for_workers(1));
  // Registered: both run their ZeroMQ I/O threads, the worker its data plane too.
  for (const auto& [pid, cpu] : {std::pair{coordinator.process().pid(), coordinator_cpu},
                                 std::pair{worker->pid(), worker_cpu}}) {
    const auto threads = thread_cpus(pid);
    INFO("pid " << pid);
    CHECK(threads.size() >= 3);
    for (const auto& list : threads) CHECK(list == cpu);
  }  // On one CPU, with its ZeroMQ I/O thread under SCHED_BATCH (the default), the coordinator
  // gives the CPU up after a flush of frames, and says so.
  CHECK(coordinator.process().wait_for_stderr(
      "one CPU: the coordinator thread yields to the ZeroMQ I/O thread after sends",
      std::chrono::seconds(10)));
}

TEST_CASE("a coordinator on more CPUs, or with a normal I/O thread, does not yield after sends") {
  auto allowed = allowed_cpus();
  REQUIRE(allowed);
  const std::string one = std::to_string(allowed->front());
  std::vector<std::vector<std::string>> cases{{"--cpus", one, "--io-thread-scheduling", "normal"}};
  if (allowed->size() >= 2) cases.push_back({"--cpus", format_cpu_list(*allowed)});
  for (const auto& args : cases) {
    temp_dir dir;
    coordinator_process coordinator(dir.path(), args);
    // Started and listening: the decision is logged before the socket is bound.
    INFO(args[1] << (args.size() > 2 ? " " + args[3] : std::string()));
    CHECK(coordinator.process().wait_for_stderr("coordinator started", std::chrono::seconds(10)));
    CHECK(coordinator.process().stderr_text().find("yields to the ZeroMQ I/O thread") ==
          std::string::npos);
  }
}

TEST_CASE("a bad --cpus stops a worker and a coordinator with exit code 2 and the reason") {
  auto allowed = allowed_cpus();
  REQUIRE(allowed);
  const std::string outside = std::to_string(allowed->back() + 1);
  temp_dir dir;
  for (const std::string& list : {outside, std::string("2-1"), std::string("")}) {
    child_process worker({SNAPFLOW_WORKER_BIN, "--coordinator", "tcp://127.0.0.1:1", "--cpus",
                          list});
    auto code = worker.wait_exit(std::chrono::seconds(30));
    REQUIRE(code);
    CHECK(*code == 2);
    CHECK_THAT(worker.stderr_text(), Catch::Contains("snapflow-worker: --cpus: "));
    child_process coordinator({SNAPFLOW_COORDINATOR_BIN, "--state-dir",
                               (dir.path() / "state").string(), "--rest-port", "0", "--cpus",
                               list});
    code = coordinator.wait_exit(std::chrono::seconds(30));
    REQUIRE(code);
    CHECK(*code == 2);
    CHECK_THAT(coordinator.stderr_text(), Catch::Contains("snapflow-coordinator: --cpus: "));
  }
}
