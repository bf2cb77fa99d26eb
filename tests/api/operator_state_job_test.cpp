// Operator (non-keyed) list state in a typed job on the in-process local_cluster: a batching
// operator keeps the elements of its open batch in even-split list state and the ids of the
// batches it emitted in union list state. The job is killed mid-run at parallelism 2, restored at
// 4, killed again and restored at 2 (the source gated so each crash lands after checkpoints).
// Through the exactly-once file sink every element arrives exactly once, and at the end every
// subtask's union state holds every batch committed before the last restore.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "engine/api/typed_api.hpp"
#include "engine/cluster/local_cluster.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"
#include "tests/support/gated_source.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;
using namespace std::chrono_literals;
using snapflow::testing::gated_kinds;

namespace {

constexpr std::int64_t batch_size = 7;
// A batch id: the run that emitted it and its first element.
constexpr std::int64_t run_factor = 1'000'000;

struct batch {
  std::int64_t id = 0;
  std::vector<std::int64_t> elements;
  MSGPACK_DEFINE(id, elements);
};

struct line {
  std::uint64_t key = 0;
  std::int64_t seq = 0;
  std::int64_t value = 0;
  MSGPACK_DEFINE(key, seq, value);
};

// What the sink receives: key 0 for an element (seq = the element, value = its batch id), key
// 1 + subtask for one batch id in that subtask's union state at the end (seq = the id).
job_graph batching_job(const std::filesystem::path& out, std::int64_t count,
                       const operator_registry& registry, std::uint32_t parallelism,
                       std::int64_t run) {
  stream_environment env;
  env.set_job_name("operator-state").set_parallelism(2);
  env.enable_checkpointing(10ms);
  api::typed_environment typed(env);
  auto source = env.add_source("gated_source", {{"count", std::to_string(count)}});
  source.uid("source");
  auto numbers = typed.from_sequence(source, [](std::int64_t n) { return n; });
  numbers.uid("numbers");

  const auto emit = [run](api::process_context& ctx, api::collector<batch>& out) {
    auto open = ctx.get_list_state<std::int64_t>("open-batch");
    auto emitted = ctx.get_union_list_state<std::int64_t>("emitted-batches");
    auto elements = open.get();
    const std::int64_t id = run * run_factor + elements.front();
    emitted.add(id);
    open.clear();
    out.collect(batch{id, std::move(elements)});
  };
  auto batches = numbers.process<batch>(
      [emit](const std::int64_t& n, api::process_context& ctx, api::collector<batch>& out) {
        auto open = ctx.get_list_state<std::int64_t>("open-batch");
        open.add(n);
        if (static_cast<std::int64_t>(open.size()) >= batch_size) emit(ctx, out);
      },
      [emit](api::process_context& ctx, api::collector<batch>& out) {
        if (!ctx.get_list_state<std::int64_t>("open-batch").empty()) emit(ctx, out);
        // The report: every batch id this subtask's union state holds.
        std::vector<std::int64_t> ids;
        for (std::int64_t id : ctx.get_union_list_state<std::int64_t>("emitted-batches").get())
          ids.push_back(id);
        out.collect(batch{-1 - static_cast<std::int64_t>(ctx.subtask_index()), ids});
      },
      "batcher");
  batches.uid("batcher").set_parallelism(parallelism);
  auto lines = batches.flat_map<line>(
      [](const batch& b, api::collector<line>& out) {
        for (std::int64_t e : b.elements)
          out.collect(b.id >= 0 ? line{0, e, b.id}
                                : line{static_cast<std::uint64_t>(-b.id), e, 0});
      },
      "lines");
  lines.uid("lines").set_parallelism(parallelism);
  lines.to_records([](const line& l) { return record{l.key, l.seq, l.value, {}}; })
      .uid("to-records")
      .set_parallelism(parallelism)
      .add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink")
      .set_parallelism(2);
  return env.build_job_graph(registry);
}

vertex_id vertex_named(const job_graph& job, const std::string& uid) {
  for (const auto& v : job.vertices)
    if (v.uid == uid) return v.id;
  FAIL("no vertex " << uid);
  return 0;
}

// Runs `job` until `checkpoints` completed, then kills a batcher subtask.
void run_and_kill(const job_graph& job, const local_cluster_options& options,
                  std::size_t checkpoints) {
  local_cluster cluster(job, options);
  auto started = cluster.start();
  if (!started) FAIL(started.err().message);
  REQUIRE(cluster.wait_for_completed_checkpoints(checkpoints, 60s));
  cluster.kill_task({vertex_named(job, "batcher"), 1}, "killed by test");
  REQUIRE(cluster.wait(60s) == job_status::failed);
  CHECK_THAT(cluster.failure_cause().value_or(""), Catch::Contains("killed by test"));
}

}  // namespace

TEST_CASE("typed job: operator list state through kills and restores at parallelism 2, 4, 2") {
  testing::temp_folder dir("operator-state-job");
  constexpr std::int64_t count = 9'000;
  const auto out = dir.path() / "out";
  gated_kinds kinds(/*hold_after=*/1'500);  // per source subtask and run
  auto options = kinds.options(dir);

  const job_graph first = batching_job(out, count, kinds.registry, 2, 1);
  run_and_kill(first, options, 3);
  options.restore_latest = true;
  job_graph second = batching_job(out, count, kinds.registry, 4, 2);
  second.id = first.id;
  run_and_kill(second, options, 3);
  CHECK(read_committed_output(out).size() < static_cast<std::size_t>(count));

  kinds.open->store(true);
  job_graph third = batching_job(out, count, kinds.registry, 2, 3);
  third.id = first.id;
  local_cluster cluster(third, options);
  auto status = cluster.run(120s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << cluster.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(cluster.restored_checkpoint());

  std::map<std::int64_t, int> seen;             // element -> times
  std::set<std::int64_t> committed_batches;     // ids of batches whose elements were committed
  std::map<std::uint64_t, std::set<std::int64_t>> reports;  // subtask + 1 -> union state
  for (const auto& l : read_committed_output(out)) {
    if (l.key == 0) {
      ++seen[l.seq];
      committed_batches.insert(l.value);
    } else {
      reports[l.key].insert(l.seq);
    }
  }
  // Even-split state: every element exactly once, none lost in an open batch.
  CHECK(seen.size() == static_cast<std::size_t>(count));
  std::size_t twice = 0;
  for (const auto& [element, times] : seen) twice += times != 1 ? 1 : 0;
  CHECK(twice == 0);
  if (!seen.empty()) CHECK((seen.begin()->first == 0 && seen.rbegin()->first == count - 1));

  // Union state: both final subtasks report, each holding every batch the earlier runs
  // committed (whichever old subtask emitted it), and nothing that was never committed.
  REQUIRE(reports.size() == 2);
  std::set<std::int64_t> before_last_restore;
  for (std::int64_t id : committed_batches)
    if (id / run_factor < 3) before_last_restore.insert(id);
  CHECK(before_last_restore.size() > 2);
  for (const auto& [subtask, ids] : reports) {
    INFO("subtask " << subtask - 1);
    std::size_t missing = 0;
    for (std::int64_t id : before_last_restore) missing += ids.count(id) == 0 ? 1 : 0;
    CHECK(missing == 0);
    std::size_t uncommitted = 0;
    for (std::int64_t id : ids) uncommitted += committed_batches.count(id) == 0 ? 1 : 0;
    CHECK(uncommitted == 0);
  }
}
