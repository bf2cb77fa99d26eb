// Typed jobs run whole on the in-process local_cluster: a user struct through map, key_by and a
// process function with value, map and list state into the exactly-once file sink, across a
// killed task and a restore from the latest checkpoint (both state backends, at the same and at
// another parallelism); union, connect and a keyed co-process; and a payload that is not what the
// stream's type says, which fails the job with a clear cause.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>

#include "engine/api/typed_api.hpp"
#include "engine/cluster/local_cluster.hpp"
#include "engine/runtime/source_operators.hpp"
#include "tests/api/test_types.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"
#include "tests/support/gated_source.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;
using namespace std::chrono_literals;
using snapflow::testing::gated_kinds;
using snapflow::api_test::event;
using snapflow::api_test::tally;

namespace {

constexpr std::int64_t users = 16;
constexpr std::int64_t recent_kept = 3;

// The output record of a tally: key = user number, seq, and value packing the state the
// process function read (count in bits 0..15, total in 16..39, list size in 40..43, how far
// back the oldest kept seq lies in 44..).
record to_output(const tally& t) {
  const auto back = t.recent.empty() ? 0 : t.seq - t.recent.front();
  const std::int64_t packed = t.count | (t.total << 16) |
                              (static_cast<std::int64_t>(t.recent.size()) << 40) | (back << 44);
  return record{static_cast<std::uint64_t>(t.seq % users), t.seq, packed, {}};
}

// Counts, sums (per seq parity in a map state) and the last few seqs of each user.
void count_events(const event& e, api::keyed_process_context<std::string>& ctx,
                  api::collector<tally>& out) {
  auto count = ctx.get_state<std::int64_t>("count");
  auto by_parity = ctx.get_map_state<std::int64_t, std::int64_t>("sum_by_parity");
  auto recent = ctx.get_list_state<std::int64_t>("recent");
  const std::int64_t n = count.value_or(0) + 1;
  count.update(n);
  by_parity.put(e.seq % 2, by_parity.get(e.seq % 2).value_or(0) + e.amount);
  std::int64_t total = 0;
  for (const auto& [parity, sum] : by_parity.entries()) total += sum;
  auto kept = recent.get();
  kept.push_back(e.seq);
  if (static_cast<std::int64_t>(kept.size()) > recent_kept) kept.erase(kept.begin());
  recent.update(kept);
  out.collect(tally{e.user, e.seq, n, total, kept});
}

std::int64_t amount_of(std::int64_t seq) { return (seq % 7) * 3; }

job_graph tally_job(const std::filesystem::path& out, std::int64_t count,
                    const std::string& backend, const operator_registry& registry,
                    std::uint32_t tally_parallelism) {
  stream_environment env;
  env.set_job_name("typed-tally").set_parallelism(2);
  env.enable_checkpointing(10ms);
  env.set_state_backend(backend);
  api::typed_environment typed(env);
  auto source = env.add_source("gated_source", {{"count", std::to_string(count)},
                                                {"keys", std::to_string(users)}});
  source.uid("source");
  auto events = typed.from_sequence(source, [](std::int64_t n) {
    return event{"user-" + std::to_string(n % users), n, n % 7};
  });
  events.uid("decode");
  auto tripled = events.map([](event e) {
    e.amount *= 3;
    return e;
  });
  tripled.uid("triple");
  auto tallies = tripled.key_by([](const event& e) { return e.user; })
                     .process<tally>(count_events, "tally");
  tallies.uid("tally").set_parallelism(tally_parallelism);
  tallies.to_records(to_output)
      .uid("to-records")
      .set_parallelism(tally_parallelism)
      .add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink")
      .set_parallelism(tally_parallelism);
  return env.build_job_graph(registry);
}

vertex_id vertex_named(const job_graph& job, const std::string& uid) {
  for (const auto& v : job.vertices)
    if (v.uid == uid) return v.id;
  FAIL("no vertex " << uid);
  return 0;
}

// Every seq once, and each line carries exactly the state the user's records before it built.
void check_tallies(const std::filesystem::path& out, std::int64_t count) {
  const auto lines = read_committed_output(out);
  CHECK(lines.size() == static_cast<std::size_t>(count));
  std::vector<int> seen(static_cast<std::size_t>(count), 0);
  std::size_t wrong = 0;
  std::string first_wrong;
  for (const auto& l : lines) {
    if (l.seq < 0 || l.seq >= count) {
      ++wrong;
      continue;
    }
    ++seen[static_cast<std::size_t>(l.seq)];
    const std::int64_t n = l.seq / users + 1;
    std::int64_t total = 0;
    for (std::int64_t s = l.seq % users; s <= l.seq; s += users) total += amount_of(s);
    const std::int64_t kept = std::min(n, recent_kept);
    const std::int64_t expected =
        n | (total << 16) | (kept << 40) | (((kept - 1) * users) << 44);
    if ((l.value != expected || l.key != static_cast<std::uint64_t>(l.seq % users)) &&
        wrong++ == 0)
      first_wrong = "seq " + std::to_string(l.seq) + ": " + std::to_string(l.value) +
                    ", expected " + std::to_string(expected);
  }
  INFO(first_wrong);
  CHECK(wrong == 0);
  CHECK(std::count(seen.begin(), seen.end(), 0) == 0);                               // lost
  CHECK(std::count_if(seen.begin(), seen.end(), [](int n) { return n > 1; }) == 0);  // twice
}

}  // namespace

TEST_CASE("typed job: keyed state through checkpoints, a killed task and a restore, exactly once") {
  const std::string backend = GENERATE("hashmap", "rocksdb");
  // The restored job's process function and sink at the same parallelism, or rescaled: the
  // typed state moves with its key groups.
  const std::uint32_t restored_parallelism = GENERATE(3u, 2u);
  INFO("state backend " << backend << ", restored at parallelism " << restored_parallelism);
  testing::temp_folder dir("api-job");
  constexpr std::int64_t count = 24'000;
  const auto out = dir.path() / "out";
  gated_kinds kinds(/*hold_after=*/5'000);  // per source subtask: 10,000 before the gate
  const job_graph job = tally_job(out, count, backend, kinds.registry, 3);
  {
    local_cluster first(job, kinds.options(dir));
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(3, 60s));
    first.kill_task({vertex_named(job, "tally"), 1}, "killed by test");
    REQUIRE(first.wait(60s) == job_status::failed);
    CHECK_THAT(first.failure_cause().value_or(""), Catch::Contains("killed by test"));
  }
  CHECK(read_committed_output(out).size() < static_cast<std::size_t>(count));
  kinds.open->store(true);
  auto options = kinds.options(dir);
  options.restore_latest = true;
  job_graph restored = tally_job(out, count, backend, kinds.registry, restored_parallelism);
  restored.id = job.id;
  local_cluster second(restored, options);
  auto status = second.run(120s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  check_tallies(out, count);
}

TEST_CASE("typed job: union, connect, filter and flat_map into a callable sink") {
  stream_environment env;
  env.set_parallelism(2);
  api::typed_environment typed(env);
  auto small = typed.from_collection(std::vector<std::int64_t>{1, 2, 3});
  auto large = typed.from_collection(std::vector<std::int64_t>{100, 200});
  auto words = typed.from_collection(std::vector<std::string>{"a b", "c"});
  auto numbers = small.union_with({large}).filter([](std::int64_t v) { return v != 2; });
  auto split = words.flat_map<std::string>([](const std::string& s,
                                              api::collector<std::string>& out) {
    std::size_t from = 0;
    for (std::size_t at = s.find(' '); at != std::string::npos; at = s.find(' ', from = at + 1))
      out.collect(s.substr(from, at - from));
    out.collect(s.substr(from));
  });
  auto labels = numbers.connect(split).map<std::string>(
      [](std::int64_t v) { return "n" + std::to_string(v); },
      [](const std::string& w) { return "w" + w; });
  auto seen = std::make_shared<std::multiset<std::string>>();
  auto mutex = std::make_shared<std::mutex>();
  labels.sink([seen, mutex](const std::string& s) {
    std::lock_guard lock(*mutex);
    seen->insert(s);
  });
  local_cluster cluster(env.build_job_graph(), {});
  auto status = cluster.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << cluster.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  CHECK(*seen == std::multiset<std::string>{"n1", "n3", "n100", "n200", "wa", "wb", "wc"});
}

TEST_CASE("typed job: a keyed co-process shares keyed state between its two inputs") {
  stream_environment env;
  env.set_parallelism(2);
  api::typed_environment typed(env);
  auto events = typed.generate(40, [](std::int64_t n) {
    return event{"user-" + std::to_string(n % 4), n, 1};
  });
  auto names = typed.from_collection(
      std::vector<std::string>{"user-0", "user-1", "user-2", "user-3", "user-0"});
  using seen_count = std::pair<std::string, std::int64_t>;
  // Events count 1 and names 100 into the same state of their key.
  const auto bump = [](api::keyed_process_context<std::string>& ctx,
                       api::collector<seen_count>& out, std::int64_t by) {
    auto seen = ctx.get_state<std::int64_t>("seen");
    seen.update(seen.value_or(0) + by);
    out.collect({ctx.key(), *seen.value()});
  };
  auto counts =
      events.connect(names)
          .key_by([](const event& e) { return e.user; }, [](const std::string& s) { return s; })
          .process<seen_count>(
              [bump](const event&, auto& ctx, auto& out) { bump(ctx, out, 1); },
              [bump](const std::string&, auto& ctx, auto& out) { bump(ctx, out, 100); });
  counts.set_parallelism(3);
  auto last = std::make_shared<std::map<std::string, std::int64_t>>();
  auto mutex = std::make_shared<std::mutex>();
  counts.sink([last, mutex](const seen_count& c) {
    std::lock_guard lock(*mutex);
    (*last)[c.first] = std::max((*last)[c.first], c.second);
  });
  local_cluster cluster(env.build_job_graph(), {});
  auto status = cluster.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << cluster.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  CHECK(*last == std::map<std::string, std::int64_t>{
                     {"user-0", 210}, {"user-1", 110}, {"user-2", 110}, {"user-3", 110}});
}

TEST_CASE("typed job: a payload that is not the stream's type fails the job with a clear cause") {
  stream_environment env;
  api::typed_environment typed(env);
  auto raw = env.add_source("sequence_source", {{"count", "10"}})
                 .map(map_function([](const record& r) {
                   return record{r.key, r.seq, r.value, std::string("\xc1\xff", 2)};
                 }));
  typed.from_records<event>(raw)
      .map([](const event& e) { return e.seq; }, "read-events")
      .sink([](std::int64_t) {});
  local_cluster cluster(env.build_job_graph(), {});
  auto status = cluster.run(60s);
  if (!status) FAIL(status.err().message);
  REQUIRE(*status == job_status::failed);
  const std::string cause = cluster.failure_cause().value_or("");
  CHECK_THAT(cause, Catch::Contains("'read-events'") && Catch::Contains("cannot decode") &&
                        Catch::Contains("malformed msgpack"));
}
