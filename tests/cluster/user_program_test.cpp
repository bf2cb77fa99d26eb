// A user program (examples/user-program, built against the installed package by the
// install_user_program test) on a multi-process cluster: the coordinator, workers started as
// `running_totals worker`, the job submitted with `running_totals submit`. Its committed output
// holds every record exactly once, also with a worker killed mid-run; workers that do not carry
// the program's fingerprint get none of its tasks.
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"
#include "tests/cluster/program_support.hpp"

using namespace snapflow::testing;

namespace {

constexpr std::int64_t record_count = 60'000;
constexpr std::int64_t shop_count = 16;

const std::string program_bin = SNAPFLOW_USER_PROGRAM_BIN;

// Silence after which a worker counts as lost: long, so a loaded machine does not lose workers
// the tests do not kill (a killed one is noticed by its connection, and replaced by its id).
constexpr int loss_timeout_ms = 5'000;

// The program's settings for this test: the same for its workers and its submission, except
// what a test changes on purpose.
std::vector<std::string> program_args(const std::filesystem::path& out, int rate,
                                      std::int64_t count = record_count) {
  return {"--arg", "count=" + std::to_string(count), "--arg",
          "shops=" + std::to_string(shop_count), "--arg", "rate=" + std::to_string(rate),
          "--arg", "out=" + out.string(), "--arg", "interval_ms=30"};
}

// `running_totals worker` with two slots (the job's parallelism is 2).
std::unique_ptr<child_process> program_worker(const std::string& control, const std::string& id,
                                              const std::vector<std::string>& args) {
  return start_program_worker(program_bin, control, id, args, loss_timeout_ms);
}

std::string fingerprint_of(const std::vector<std::string>& args) {
  return program_fingerprint_of(program_bin, args);
}

void check_exactly_once(const std::filesystem::path& out) {
  const committed_output o = read_committed_output(out, record_count, shop_count);
  INFO("lines " << o.lines);
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.wrong_sums == 0);
  CHECK(o.lines == static_cast<std::size_t>(record_count));
}

void require_program_built() {
  INFO("the install_user_program test builds " << program_bin << " first");
  REQUIRE(std::filesystem::exists(program_bin));
}

}  // namespace

TEST_CASE("a user program runs its job on its own workers and survives a kill -9, exactly once") {
  require_program_built();
  temp_dir dir;
  const auto out = dir.path() / "out";
  // About 6 s of input per source: long enough to kill a worker in the middle of it, also when
  // a loaded machine takes seconds for the first checkpoint.
  const auto args = program_args(out, 5'000);
  coordinator_process coordinator(dir.path() / "state", {}, "tcp://127.0.0.1:*",
                                  loss_timeout_ms);
  auto w1 = program_worker(coordinator.control(), "w1", args);
  auto w2 = program_worker(coordinator.control(), "w2", args);
  REQUIRE(coordinator.wait_for_workers(2));

  const std::string job = submit_program(program_bin, coordinator, args);
  // One completed checkpoint is what the restore needs; a loaded machine may take seconds for it.
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 1, 60s));
  const json running = coordinator.job(job);
  INFO("job: " << running.dump());
  REQUIRE(running.value("state", "") == "RUNNING");
  REQUIRE(running["program"].value("fingerprint", "") == fingerprint_of(args));

  w2->send_signal(SIGKILL);
  REQUIRE(w2->wait_exit(patience).has_value());
  w2 = program_worker(coordinator.control(), "w2", args);
  const bool finished = eventually(
      [&] { return coordinator.job(job).value("state", "") == "FINISHED"; }, 60s);
  const json details = coordinator.job(job);
  INFO("job: " << details.dump() << "\nw1 stderr: " << w1->stderr_text()
               << "\nw2 stderr: " << w2->stderr_text());
  REQUIRE(finished);
  CHECK(details.value("restarts", 0) >= 1);
  check_exactly_once(out);
  stop_cleanly(coordinator, {w1.get(), w2.get()});
}

TEST_CASE("workers without the job's program fingerprint are refused: nothing is deployed") {
  require_program_built();
  temp_dir dir;
  const auto out = dir.path() / "out";
  // About 1.5 s of input per source: long enough to see where it runs.
  const auto args = program_args(out, 20'000);
  // The same program with another setting is another job graph, so another fingerprint.
  const auto other_args = program_args(out, 20'000, record_count + 1);
  const std::string fingerprint = fingerprint_of(args);
  const std::string other_fingerprint = fingerprint_of(other_args);
  REQUIRE(fingerprint != other_fingerprint);

  coordinator_process coordinator(dir.path() / "state", {}, "tcp://127.0.0.1:*",
                                  loss_timeout_ms);
  auto other = program_worker(coordinator.control(), "other-program", other_args);
  auto plain = start_worker(coordinator.control(), "plain", {"--executor", "runtime"});
  REQUIRE(coordinator.wait_for_workers(2));

  const std::string job = submit_program(program_bin, coordinator, args);
  // It waits, saying why: its program, and what each worker carries.
  std::string reason;
  const bool waiting = eventually([&] {
    reason = coordinator.job(job).value("waiting-reason", "");
    return !reason.empty();
  });
  const json details = coordinator.job(job);
  INFO("job: " << details.dump());
  REQUIRE(waiting);
  CHECK(details.value("state", "") == "CREATED");
  CHECK(reason.find(fingerprint) != std::string::npos);
  CHECK(reason.find("running-totals 1.0") != std::string::npos);
  CHECK(reason.find("worker 'other-program' carries 'running-totals 1.0' (fingerprint " +
                    other_fingerprint + ")") != std::string::npos);
  CHECK(reason.find("worker 'plain' carries no program") != std::string::npos);
  for (const auto& vertex : details["vertices"])
    for (const auto& subtask : vertex["subtasks"]) CHECK(subtask.value("worker", "") == "");
  CHECK_FALSE(std::filesystem::exists(out));

  // A worker of the program arrives: the job runs there and only there.
  auto own = program_worker(coordinator.control(), "own", args);
  json running;
  const bool placed = eventually([&] {
    running = coordinator.job(job);
    return running.value("state", "") == "RUNNING";
  });
  INFO("job: " << running.dump() << "\nown stderr: " << own->stderr_text());
  REQUIRE(placed);
  CHECK_FALSE(running.contains("waiting-reason"));
  for (const auto& vertex : running["vertices"])
    for (const auto& subtask : vertex["subtasks"]) CHECK(subtask.value("worker", "") == "own");
  const bool finished = eventually(
      [&] { return coordinator.job(job).value("state", "") == "FINISHED"; }, 60s);
  REQUIRE(finished);
  check_exactly_once(out);
  stop_cleanly(coordinator, {other.get(), plain.get(), own.get()});
}
