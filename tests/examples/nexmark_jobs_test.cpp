// Nexmark's queries as typed jobs (examples/nexmark) on the in-process local_cluster at
// parallelism 2 with a checkpoint every 100 ms: each query's committed output through the
// exactly-once file sink equals the reference computation over the same generated events, on a
// plain run and across a task killed mid-run and a restore from the latest checkpoint.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <set>

#include "engine/cluster/local_cluster.hpp"
#include "engine/runtime/source_operators.hpp"
#include "examples/nexmark/nexmark_output.hpp"
#include "examples/nexmark/nexmark_queries.hpp"
#include "tests/support/gated_source.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using namespace snapflow::nexmark;
using namespace std::chrono_literals;
using snapflow::testing::gated_kinds;

namespace {

constexpr std::int64_t event_count = 20'000;

// 1,000 events per second of event time: the 20,000 events span 20 s, so the 10 s windows of q5,
// q7 and q8 split them (at the default rate they would all share one window).
generator_config test_config() {
  generator_config c;
  c.events_per_second = 1'000;
  return c;
}

std::vector<event> generated_events() {
  const generator g(test_config());
  std::vector<event> events;
  events.reserve(event_count);
  for (std::int64_t n = 0; n < event_count; ++n)
    events.push_back(g.at(static_cast<std::uint64_t>(n)));
  return events;
}

const std::vector<event>& events() {
  static const std::vector<event> all = generated_events();
  return all;
}

// The query's rows into the exactly-once file sink at `out`.
template <typename Row>
void sink_rows(api::data_stream<Row> rows, const std::filesystem::path& out) {
  rows.to_records([](const Row& r) { return row_record(r); })
      .uid("to-records")
      .add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink");
}

job_graph query_job(const std::string& query, const std::filesystem::path& out,
                    const operator_registry& registry, std::uint32_t parallelism = 2) {
  stream_environment env;
  env.set_job_name("nexmark-" + query).set_parallelism(parallelism);
  env.enable_checkpointing(100ms);
  api::typed_environment typed(env);
  source_options source;
  source.config = test_config();
  source.events = event_count;
  source.kind = "gated_source";
  auto input = nexmark_source(typed, source);
  if (query == "q0") sink_rows(q0_job(input), out);
  else if (query == "q1") sink_rows(q1_job(input), out);
  else if (query == "q2") sink_rows(q2_job(input), out);
  else if (query == "q3") sink_rows(q3_job(input), out);
  else if (query == "q5") sink_rows(q5_job(input), out);
  else if (query == "q7") sink_rows(q7_job(input), out);
  else if (query == "q8") sink_rows(q8_job(input), out);
  else sink_rows(q4_job(input), out);
  return env.build_job_graph(registry);
}

// The subtask the restore test kills: the query's keyed state when it has some.
std::string stateful_uid(const std::string& query) {
  if (query == "q3") return "q3-join";
  if (query == "q4") return "q4-average";
  if (query == "q5") return "q5-count";
  if (query == "q7") return "q7-max";
  if (query == "q8") return "q8-join";
  return "to-records";
}

vertex_id vertex_named(const job_graph& job, const std::string& uid) {
  for (const auto& v : job.vertices)
    if (v.uid == uid) return v.id;
  FAIL("no vertex " << uid);
  return 0;
}

template <typename Row>
std::vector<std::string> sorted_payloads(const std::vector<Row>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(row_record(r).payload);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> expected_payloads(const std::string& query) {
  if (query == "q0") return sorted_payloads(q0(events()));
  if (query == "q1") return sorted_payloads(q1(events()));
  if (query == "q2") return sorted_payloads(q2(events()));
  if (query == "q3") return sorted_payloads(q3(events()));
  if (query == "q5") return sorted_payloads(q5(events()));
  if (query == "q7") return sorted_payloads(q7(events()));
  return sorted_payloads(q8(events()));
}

// q4: per category, versions 1..N each exactly once (no update lost or repeated), and the
// latest one's average is the reference's.
void check_q4(const std::vector<std::string>& payloads) {
  auto rows = decode_rows<q4_update>(payloads);
  if (!rows) FAIL(rows.err().message);
  std::map<std::int64_t, std::vector<q4_update>> by_category;
  for (const auto& u : *rows) by_category[u.category].push_back(u);
  std::vector<q4_row> latest;
  for (auto& [category, updates] : by_category) {
    std::sort(updates.begin(), updates.end(),
              [](const q4_update& a, const q4_update& b) { return a.version < b.version; });
    for (std::size_t i = 0; i < updates.size(); ++i) {
      INFO("category " << category << ", update " << i);
      REQUIRE(updates[i].version == static_cast<std::int64_t>(i) + 1);
    }
    latest.push_back({category, updates.back().average_price});
  }
  const auto expected = q4(events());
  REQUIRE(!expected.empty());
  CHECK(latest == expected);
}

// How many windows the reference's rows of a windowed query span.
std::size_t window_count(const std::string& query) {
  std::set<std::int64_t> windows;
  const auto add = [&windows](const auto& rows) {
    for (const auto& r : rows) windows.insert(r.window_start);
  };
  if (query == "q5") add(q5(events()));
  else if (query == "q7") add(q7(events()));
  else add(q8(events()));
  return windows.size();
}

void check_output(const std::string& query, const std::filesystem::path& out) {
  auto payloads = read_output_payloads(out);
  if (!payloads) FAIL(payloads.err().message);
  if (query == "q4") return check_q4(*payloads);
  if (query == "q5" || query == "q7" || query == "q8") CHECK(window_count(query) >= 2);
  std::sort(payloads->begin(), payloads->end());
  const auto expected = expected_payloads(query);
  REQUIRE(!expected.empty());
  CHECK(payloads->size() == expected.size());
  CHECK(*payloads == expected);
}

// One run to the end of the input; the output equals the reference's.
void plain_run(const std::string& query) {
  testing::temp_folder dir("nexmark-job");
  gated_kinds kinds(event_count);
  kinds.open->store(true);
  const auto out = dir.path() / "out";
  local_cluster cluster(query_job(query, out, kinds.registry), kinds.options(dir));
  auto status = cluster.run(120s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << cluster.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  check_output(query, out);
}

// The query's stateful subtask (its sink's for stateless queries) killed after three
// checkpoints, half the events in; a new cluster restores the latest checkpoint, at
// `restored_parallelism` (source splits and keyed state move between subtasks), and runs to the
// end. The committed output equals the reference's: nothing lost, nothing twice.
void killed_and_restored(const std::string& query, std::uint32_t restored_parallelism) {
  testing::temp_folder dir("nexmark-restore");
  const auto out = dir.path() / "out";
  gated_kinds kinds(/*hold_after=*/event_count / 4);  // per source subtask
  const job_graph job = query_job(query, out, kinds.registry);
  {
    local_cluster first(job, kinds.options(dir));
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(3, 60s));
    first.kill_task({vertex_named(job, stateful_uid(query)), 1}, "killed by test");
    REQUIRE(first.wait(60s) == job_status::failed);
    CHECK_THAT(first.failure_cause().value_or(""), Catch::Contains("killed by test"));
  }
  kinds.open->store(true);
  auto options = kinds.options(dir);
  options.restore_latest = true;
  job_graph restored = query_job(query, out, kinds.registry, restored_parallelism);
  restored.id = job.id;
  local_cluster second(restored, options);
  auto status = second.run(120s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  check_output(query, out);
}

}  // namespace

// One test case per query and scenario: each runs its own job (a few seconds under ASan).
TEST_CASE("nexmark q0 job: output equals the reference") { plain_run("q0"); }
TEST_CASE("nexmark q1 job: output equals the reference") { plain_run("q1"); }
TEST_CASE("nexmark q2 job: output equals the reference") { plain_run("q2"); }
TEST_CASE("nexmark q3 job: output equals the reference") { plain_run("q3"); }
TEST_CASE("nexmark q4 job: final averages equal the reference") { plain_run("q4"); }
TEST_CASE("nexmark q5 job: output equals the reference") { plain_run("q5"); }
TEST_CASE("nexmark q7 job: output equals the reference") { plain_run("q7"); }
TEST_CASE("nexmark q8 job: output equals the reference") { plain_run("q8"); }

TEST_CASE("nexmark q0 job: killed and restored at parallelism 3, exactly once") {
  killed_and_restored("q0", 3);
}
TEST_CASE("nexmark q1 job: killed and restored, exactly once") { killed_and_restored("q1", 2); }
TEST_CASE("nexmark q2 job: killed and restored, exactly once") { killed_and_restored("q2", 2); }
TEST_CASE("nexmark q3 job: killed and restored, exactly once") { killed_and_restored("q3", 2); }
TEST_CASE("nexmark q4 job: killed and restored at parallelism 3, exactly once") {
  killed_and_restored("q4", 3);
}
TEST_CASE("nexmark q5 job: killed and restored at parallelism 3, exactly once") {
  killed_and_restored("q5", 3);
}
TEST_CASE("nexmark q7 job: killed and restored, exactly once") { killed_and_restored("q7", 2); }
TEST_CASE("nexmark q8 job: killed and restored, exactly once") { killed_and_restored("q8", 2); }

TEST_CASE("nexmark source: a negative count or rate, or a config the generator refuses") {
  stream_environment env;
  api::typed_environment typed(env);
  source_options bad;
  bad.events = -1;
  CHECK_THROWS_AS(nexmark_source(typed, bad), std::invalid_argument);
  bad = {};
  bad.rate_per_subtask = -5;
  CHECK_THROWS_AS(nexmark_source(typed, bad), std::invalid_argument);
  bad = {};
  bad.config.events_per_second = 0;
  CHECK_THROWS_AS(nexmark_source(typed, bad), std::invalid_argument);
}

TEST_CASE("nexmark output: hex round trip and lines that are not rows") {
  const std::string bytes("\x00\x7f\xff\x10", 4);
  CHECK(to_hex(bytes) == "007fff10");
  CHECK(*from_hex("007fff10") == bytes);
  CHECK(!from_hex("abc"));
  CHECK(!from_hex("zz"));
  auto row = decode_rows<q2_row>({row_record(q2_row{246, 7}).payload});
  REQUIRE(row);
  CHECK(row->at(0) == q2_row{246, 7});
  CHECK(!decode_rows<q2_row>({"00"}));
  CHECK(!decode_rows<q2_row>({"0g"}));
  testing::temp_folder dir("nexmark-output");
  { std::ofstream(dir.path() / "part") << "1,2\n"; }
  CHECK(!read_output_payloads(dir.path()));
}

TEST_CASE("nexmark source: a sequence source of the numbers, its rate, the generator beside it") {
  stream_environment env;
  env.set_parallelism(2);
  api::typed_environment typed(env);
  source_options options;
  options.events = 1234;
  options.rate_per_subtask = 500;
  q0_job(nexmark_source(typed, options)).sink([](const bid&) {});
  const job_graph job = env.build_job_graph();
  const auto with_uid = [&job](const std::string& uid) {
    const auto it = std::find_if(job.vertices.begin(), job.vertices.end(),
                                 [&uid](const job_vertex& v) { return v.uid == uid; });
    REQUIRE(it != job.vertices.end());
    return *it;
  };
  const job_vertex source = with_uid("nexmark-source");
  CHECK(source.kind == "sequence_source");
  CHECK(source.params.at("count") == "1234");
  CHECK(source.params.at("rate") == "500");
  const job_vertex generate = with_uid("nexmark-source-generate");
  CHECK(generate.parallelism == source.parallelism);
}
