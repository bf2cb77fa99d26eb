// Unaligned checkpoints on whole jobs in one process: a sink side throttled well below the
// source rate keeps every channel full, checkpoints complete anyway with channel state, and a
// task killed mid-run restores from one: every record committed exactly once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/cluster/local_cluster.hpp"
#include "engine/runtime/state_file.hpp"
#include "graph/stream_environment.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t keys = 16;

// sequence_source (2) -hash-> keyed_sum (2) -`edge`-> map_identity, throttled (2)
// -forward-> two_phase_commit_file_sink (2).
job_graph backpressured_job(const std::filesystem::path& out, std::int64_t count,
                            partitioning edge, std::chrono::milliseconds aligned_timeout,
                            std::uint32_t source_parallelism = 2, std::uint32_t parallelism = 2) {
  stream_environment env;
  env.set_job_name("unaligned");
  env.enable_checkpointing(20ms);
  env.enable_unaligned_checkpoints();
  env.set_aligned_checkpoint_timeout(aligned_timeout);
  env.set_checkpoint_timeout(30s);
  env.set_inline_state_max_bytes(0);  // channel state in files, where the test reads it
  auto source =
      env.add_source("sequence_source", {{"count", std::to_string(count)},
                                         {"keys", std::to_string(keys)}});
  source.uid("source").set_parallelism(source_parallelism);
  auto sums = source.key_by().sum();
  sums.uid("sum").set_parallelism(parallelism);
  auto next = edge == partitioning::rebalance ? sums.rebalance() : sums.forward();
  auto slow = next.map("map_identity", {{"delay_us_per_record", "60"}});
  slow.uid("slow").set_parallelism(parallelism);
  slow.forward()
      .add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink")
      .set_parallelism(parallelism);
  return env.build_job_graph();
}

void check_exactly_once(const std::filesystem::path& out, std::int64_t count) {
  const auto lines = read_committed_output(out);
  CHECK(lines.size() == static_cast<std::size_t>(count));
  std::vector<int> seen(static_cast<std::size_t>(count), 0);
  std::map<std::int64_t, output_line> by_seq;
  for (const auto& l : lines) {
    if (l.seq < 0 || l.seq >= count) continue;
    ++seen[static_cast<std::size_t>(l.seq)];
    by_seq.emplace(l.seq, l);
  }
  CHECK(std::count(seen.begin(), seen.end(), 0) == 0);                               // lost
  CHECK(std::count_if(seen.begin(), seen.end(), [](int n) { return n > 1; }) == 0);  // duplicated
  // The running sum per key matches the records before it: keyed state and the channel state
  // restored together.
  std::map<std::uint64_t, std::int64_t> running;
  std::size_t wrong = 0;
  for (const auto& [seq, line] : by_seq)
    if (line.value != (running[line.key] += seq)) ++wrong;
  CHECK(wrong == 0);
}

// Records persisted as channel state in the checkpoint folder's state files.
std::size_t persisted_records(const std::filesystem::path& checkpoint_folder) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(checkpoint_folder)) {
    if (!e.is_regular_file() || e.path().filename() == "_metadata") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    auto s = state_file::decode(bytes.str());
    if (!s) continue;  // not a state file
    for (const auto& c : s->channels) n += c.records.size();
  }
  return n;
}

}  // namespace

TEST_CASE("unaligned cluster: a backpressured job killed mid-run restores its channel state "
          "and commits every record exactly once") {
  const partitioning edge = GENERATE(partitioning::rebalance, partitioning::forward);
  const auto aligned_timeout = GENERATE(0ms, 2ms);
  INFO("edge " << static_cast<int>(edge) << ", aligned timeout " << aligned_timeout.count());
  temp_folder dir;
  constexpr std::int64_t count = 60'000;
  const auto out = dir.path() / "out";
  const job_graph job = backpressured_job(out, count, edge, aligned_timeout);
  local_cluster_options options;
  options.state_dir = dir.path() / "state";
  options.batch_size = 64;
  checkpoint_id restored_from = 0;
  {
    local_cluster first(job, options);
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(3, 60s));
    first.kill_task({job.vertices[2].id, 1}, "killed by test");  // a throttled subtask
    REQUIRE(first.wait(60s) == job_status::failed);
    restored_from = first.latest_completed_checkpoint();
    REQUIRE(restored_from >= 3);
  }
  // The checkpoint restored from was taken with full channels: it holds in-flight records.
  const auto folder = dir.path() / "state" / job.id / ("chk-" + std::to_string(restored_from));
  REQUIRE(std::filesystem::exists(folder));
  CHECK(persisted_records(folder) > 0);
  options.restore_latest = true;
  local_cluster second(job, options);
  auto status = second.run(120s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint() == restored_from);
  check_exactly_once(out, count);
}

TEST_CASE("unaligned cluster: restored at twice and at half the parallelism from an unaligned "
          "checkpoint, channel state reassigned by edge, exactly once") {
  // Every vertex rescales: the source's splits, keyed_sum's key groups (its input channel state
  // filtered by key group), the throttled map over a rebalance edge and the sink over forward.
  const std::uint32_t before = GENERATE(2u, 4u);
  const std::uint32_t after = before == 2 ? 4 : 2;
  INFO("parallelism " << before << " -> " << after);
  temp_folder dir;
  constexpr std::int64_t count = 60'000;
  const auto out = dir.path() / "out";
  const job_graph job =
      backpressured_job(out, count, partitioning::rebalance, 0ms, before, before);
  local_cluster_options options;
  options.state_dir = dir.path() / "state";
  options.batch_size = 64;
  checkpoint_id restored_from = 0;
  {
    local_cluster first(job, options);
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(3, 60s));
    first.kill_task({job.vertices[1].id, 0}, "killed by test");  // a keyed_sum subtask
    REQUIRE(first.wait(60s) == job_status::failed);
    restored_from = first.latest_completed_checkpoint();
  }
  const auto folder = dir.path() / "state" / job.id / ("chk-" + std::to_string(restored_from));
  CHECK(persisted_records(folder) > 0);
  job_graph rescaled =
      backpressured_job(out, count, partitioning::rebalance, 0ms, after, after);
  rescaled.id = job.id;
  options.restore_latest = true;
  local_cluster second(rescaled, options);
  auto status = second.run(120s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint() == restored_from);
  check_exactly_once(out, count);
}
