// Whole jobs in one process: the real execution graph and checkpoint coordinator, one thread
// per subtask, local channels, real files in a temporary folder. The committed output of the
// exactly-once sink is checked record by record.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>

#include "engine/runtime/local_cluster.hpp"
#include "graph/stream_environment.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t keys = 16;

// sequence_source (2) -> key_by -> keyed_sum (4) -> two_phase_commit_file_sink (4).
job_graph exactly_once_job(const std::filesystem::path& out, std::int64_t count,
                           std::chrono::milliseconds interval,
                           checkpointing_mode mode = checkpointing_mode::exactly_once,
                           std::int32_t tolerable_failures = 0,
                           std::chrono::milliseconds timeout = 10s) {
  stream_environment env;
  env.set_job_name("exactly-once-sum");
  env.enable_checkpointing(interval, mode);
  env.set_tolerable_checkpoint_failures(tolerable_failures);
  env.set_checkpoint_timeout(timeout);
  auto source = env.add_source("sequence_source",
                               {{"count", std::to_string(count)}, {"keys", std::to_string(keys)}});
  source.uid("source").set_parallelism(2);
  auto sums = source.key_by().sum();
  sums.uid("sum").set_parallelism(4);
  sums.add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink")
      .set_parallelism(4);
  return env.build_job_graph();
}

// Every seq in [0, count) exactly once, and for every key the sum after seq s is the sum of
// the values (value = seq) of every record of that key with seq <= s.
void check_exactly_once(const std::filesystem::path& out, std::int64_t count) {
  const auto lines = read_committed_output(out);
  CHECK(lines.size() == static_cast<std::size_t>(count));
  // Problems are counted, not asserted one by one: a quarter of a million lines.
  std::vector<int> seen(static_cast<std::size_t>(count), 0);
  std::map<std::int64_t, const output_line*> by_seq;
  std::size_t out_of_range = 0;
  std::size_t wrong_key = 0;
  for (const auto& l : lines) {
    if (l.seq < 0 || l.seq >= count) {
      ++out_of_range;
      continue;
    }
    ++seen[static_cast<std::size_t>(l.seq)];
    if (l.key != static_cast<std::uint64_t>(l.seq % keys)) ++wrong_key;
    by_seq.emplace(l.seq, &l);
  }
  CHECK(out_of_range == 0);
  CHECK(wrong_key == 0);
  CHECK(std::count(seen.begin(), seen.end(), 0) == 0);                               // lost
  CHECK(std::count_if(seen.begin(), seen.end(), [](int n) { return n > 1; }) == 0);  // duplicated
  std::map<std::uint64_t, std::int64_t> running;
  std::size_t wrong_sums = 0;
  std::string first_wrong;
  for (const auto& [seq, line] : by_seq) {
    const std::int64_t expected = running[line->key] += seq;
    if (line->value != expected && wrong_sums++ == 0)
      first_wrong = "key " + std::to_string(line->key) + " seq " + std::to_string(seq) + ": sum " +
                    std::to_string(line->value) + ", expected " + std::to_string(expected);
  }
  INFO(first_wrong);
  CHECK(wrong_sums == 0);
}

local_cluster_options options_for(const temp_folder& dir) {
  local_cluster_options o;
  o.state_dir = dir.path() / "state";
  return o;
}

}  // namespace

TEST_CASE("local cluster: the exactly-once job commits every record once with consistent sums") {
  temp_folder dir;
  constexpr std::int64_t count = 200'000;
  const auto out = dir.path() / "out";
  local_cluster cluster(exactly_once_job(out, count, 10ms), options_for(dir));
  auto status = cluster.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << cluster.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  CHECK(cluster.completed_checkpoints() >= 1);
  check_exactly_once(out, count);
  // Staging is empty: every transaction was committed before FINISHED.
  for (const auto& e : std::filesystem::recursive_directory_iterator(out / ".staging"))
    CHECK_FALSE(e.is_regular_file());
}

TEST_CASE(
    "local cluster: a task killed mid-run, restarted from the latest checkpoint, exactly once") {
  temp_folder dir;
  constexpr std::int64_t count = 200'000;
  const auto out = dir.path() / "out";
  const job_graph job = exactly_once_job(out, count, 10ms);
  checkpoint_id killed_at = 0;
  {
    auto options = options_for(dir);
    // Kill sink subtask 1 as the third checkpoint's completion reaches it: its commit never
    // happens, its open transaction is left behind.
    options.faults = [&killed_at](const control_event& e) {
      fault_decision d;
      if (e.what == control_event::kind::notify_complete && e.id >= 3 && killed_at == 0 &&
          e.attempt.subtask == subtask_id{2, 1}) {
        killed_at = e.id;
        d.kill_subtask = true;
      }
      return d;
    };
    local_cluster first(job, options);
    auto status = first.run(60s);
    if (!status) FAIL(status.err().message);
    REQUIRE(*status == job_status::failed);
    REQUIRE(killed_at >= 3);
    CHECK_THAT(first.failure_cause().value_or(""), Catch::Contains("killed"));
    CHECK(first.latest_completed_checkpoint() == killed_at);
  }
  // Killed mid-run: part of the output is committed, the rest comes after the restart.
  CHECK(read_committed_output(out).size() < static_cast<std::size_t>(count));
  auto options = options_for(dir);
  options.restore_latest = true;
  local_cluster second(job, options);
  auto status = second.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  CHECK(*second.restored_checkpoint() == killed_at);
  // Ids go on after the restored one: never reused across the restart.
  CHECK(second.latest_completed_checkpoint() > killed_at);
  check_exactly_once(out, count);
}

TEST_CASE("local cluster: exactly once under dropped, delayed and duplicated control messages") {
  temp_folder dir;
  constexpr std::int64_t count = 60'000;
  const auto out = dir.path() / "out";
  std::atomic<int> n{0};
  auto options = options_for(dir);
  options.faults = [&n](const control_event& e) {
    fault_decision d;
    const int i = n.fetch_add(1);
    switch (e.what) {
      case control_event::kind::trigger:
        if (e.id % 5 == 2) d.what = fault_decision::action::drop;  // that checkpoint expires
        if (e.id % 5 == 3) {
          d.what = fault_decision::action::delay;
          d.delay = 5ms;
        }
        if (e.id % 5 == 4) d.what = fault_decision::action::duplicate;
        break;
      case control_event::kind::acknowledge:
        if (i % 3 == 0) d.what = fault_decision::action::duplicate;
        if (i % 7 == 0) {
          d.what = fault_decision::action::delay;
          d.delay = 3ms;
        }
        break;
      case control_event::kind::notify_complete:
        if (i % 4 == 0) d.what = fault_decision::action::drop;  // a later one makes up for it
        break;
      default:
        break;
    }
    return d;
  };
  local_cluster cluster(exactly_once_job(out, count, 10ms, checkpointing_mode::exactly_once,
                                         /*tolerable_failures=*/1000, /*timeout=*/100ms),
                        options);
  auto status = cluster.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << cluster.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  check_exactly_once(out, count);
}

TEST_CASE("local cluster: at-least-once mode runs to the end and never blocks an input") {
  temp_folder dir;
  constexpr std::int64_t count = 60'000;
  const auto out = dir.path() / "out";
  local_cluster cluster(exactly_once_job(out, count, 10ms, checkpointing_mode::at_least_once),
                        options_for(dir));
  auto status = cluster.run(60s);
  if (!status) FAIL(status.err().message);
  REQUIRE(*status == job_status::finished);
  CHECK(cluster.completed_checkpoints() >= 1);
  // Without failures nothing is replayed: every record is there (at least once, here once).
  const auto lines = read_committed_output(out);
  std::vector<int> seen(static_cast<std::size_t>(count), 0);
  for (const auto& l : lines) ++seen.at(static_cast<std::size_t>(l.seq));
  CHECK(std::count(seen.begin(), seen.end(), 0) == 0);
}

TEST_CASE("local cluster: a job without checkpointing runs transforms to a file sink") {
  temp_folder dir;
  stream_environment env;
  auto source = env.add_source("sequence_source", {{"count", "1000"}, {"keys", "5"}});
  source.set_parallelism(2);
  auto filtered = source.map("map_add", {{"value", "1"}})
                      .filter("filter_modulo", {{"modulus", "2"}})
                      .rebalance();
  filtered.add_sink("file_sink", {{"path", (dir.path() / "out").string()}}).set_parallelism(3);
  local_cluster cluster(env.build_job_graph(), {});
  auto status = cluster.run(30s);
  if (!status) FAIL(status.err().message);
  REQUIRE(*status == job_status::finished);
  const auto lines = read_committed_output(dir.path() / "out");
  REQUIRE(lines.size() == 500);
  for (const auto& l : lines) {
    CHECK(l.seq % 2 == 0);
    CHECK(l.value == l.seq + 1);
  }
}

TEST_CASE("local cluster: an invalid job or a missing state folder is refused at start") {
  temp_folder dir;
  job_graph bad = exactly_once_job(dir.path() / "out", 10, 10ms);
  bad.vertices[1].kind = "no_such_kind";
  local_cluster a(bad, options_for(dir));
  auto started = a.start();
  REQUIRE_FALSE(started);
  CHECK_THAT(started.err().message, Catch::Contains("no_such_kind"));

  local_cluster b(exactly_once_job(dir.path() / "out", 10, 10ms), {});
  auto no_dir = b.start();
  REQUIRE_FALSE(no_dir);
  CHECK_THAT(no_dir.err().message, Catch::Contains("state_dir"));
}
