// Whole jobs in one process: the real execution graph and checkpoint coordinator, one thread
// per subtask, local channels, real files in a temporary folder. The committed output of the
// exactly-once sink is checked record by record.
#include <catch2/catch.hpp>

#include "engine/checkpoint/checkpoint_storage.hpp"

#include <atomic>
#include <map>

#include "engine/cluster/local_cluster.hpp"
#include "graph/stream_environment.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t keys = 16;

// sequence_source (2) -> key_by -> keyed_sum (4) -> two_phase_commit_file_sink (4), unless the
// parallelisms are given.
job_graph exactly_once_job(const std::filesystem::path& out, std::int64_t count,
                           std::chrono::milliseconds interval,
                           checkpointing_mode mode = checkpointing_mode::exactly_once,
                           std::int32_t tolerable_failures = 0,
                           std::chrono::milliseconds timeout = 10s,
                           std::uint32_t sum_parallelism = 4,
                           const std::string& source_kind = "sequence_source",
                           const operator_registry& registry = operator_registry::builtin(),
                           std::uint32_t source_parallelism = 2) {
  stream_environment env;
  env.set_job_name("exactly-once-sum");
  env.enable_checkpointing(interval, mode);
  env.set_tolerable_checkpoint_failures(tolerable_failures);
  env.set_checkpoint_timeout(timeout);
  auto source = env.add_source(source_kind,
                               {{"count", std::to_string(count)}, {"keys", std::to_string(keys)}});
  source.uid("source").set_parallelism(source_parallelism);
  auto sums = source.key_by().sum();
  sums.uid("sum").set_parallelism(sum_parallelism);
  sums.add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink")
      .set_parallelism(sum_parallelism);
  return env.build_job_graph(registry);
}

// A sequence_source that stops after `hold_after` records per subtask until the test opens the
// gate, so the job cannot end before the test has crashed it: the crash lands mid-run, after
// the checkpoints the test waited for. Added as a custom kind, to both the registry and the
// factory, the way a custom worker binary adds its own.
struct source_gate {
  std::atomic<bool> open{false};
};

class gated_sequence_source final : public source_operator {
 public:
  gated_sequence_source(std::unique_ptr<stream_operator> inner, std::shared_ptr<source_gate> gate,
                        std::int64_t hold_after)
      : inner_(std::move(inner)),
        source_(dynamic_cast<source_operator*>(inner_.get())),
        gate_(std::move(gate)),
        hold_after_(hold_after) {}

  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override {
    return inner_->open(context, restored);
  }
  result<emit_result> emit(record_output& out, std::size_t max_records) override {
    std::size_t budget = max_records;
    if (!gate_->open.load()) {
      if (emitted_ >= hold_after_)
        return emit_result{emit_result::status::wait,
                           std::chrono::steady_clock::now() + std::chrono::milliseconds(1)};
      budget = std::min<std::size_t>(budget, static_cast<std::size_t>(hold_after_ - emitted_));
    }
    counting c(out);
    auto r = source_->emit(c, budget);
    emitted_ += c.n;
    return r;
  }
  result<operator_snapshot> snapshot(checkpoint_id id) override { return inner_->snapshot(id); }

 private:
  struct counting : record_output {
    explicit counting(record_output& o) : out(o) {}
    void emit(record r) override {
      ++n;
      out.emit(std::move(r));
    }
    record_output& out;
    std::int64_t n = 0;
  };

  std::unique_ptr<stream_operator> inner_;
  source_operator* source_;
  std::shared_ptr<source_gate> gate_;
  std::int64_t hold_after_;
  std::int64_t emitted_ = 0;
};

struct custom_kinds {
  operator_registry registry = operator_registry::builtin();
  std::shared_ptr<operator_factory> factory =
      std::make_shared<operator_factory>(operator_factory::builtin());
  std::shared_ptr<source_gate> gate = std::make_shared<source_gate>();

  explicit custom_kinds(std::int64_t hold_after) {
    operator_kind kind = *registry.find("sequence_source");
    kind.name = "gated_sequence_source";
    registry.add(kind);
    factory->add(
        "gated_sequence_source",
        [gate = gate, hold_after](const job_vertex& v) -> result<std::unique_ptr<stream_operator>> {
          job_vertex inner = v;
          inner.kind = "sequence_source";
          auto made = operator_factory::builtin().create(inner);
          if (!made) return made.err();
          return std::unique_ptr<stream_operator>(
              std::make_unique<gated_sequence_source>(std::move(made).value(), gate, hold_after));
        });
  }

  local_cluster_options apply(local_cluster_options o) const {
    o.registry = &registry;
    o.operators = factory;
    return o;
  }
};

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
  custom_kinds kinds(/*hold_after=*/40'000);  // per source subtask: 80,000 before the gate
  const job_graph job = exactly_once_job(out, count, 10ms, checkpointing_mode::exactly_once, 0, 10s,
                                         4, "gated_sequence_source", kinds.registry);
  checkpoint_id latest_before_crash = 0;
  {
    local_cluster first(job, kinds.apply(options_for(dir)));
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(3, 60s));
    // Sink subtask 1 dies: its pending transactions are neither committed nor cleaned up.
    first.kill_task({2, 1}, "killed by test");
    REQUIRE(first.wait(60s) == job_status::failed);
    CHECK_THAT(first.failure_cause().value_or(""), Catch::Contains("killed by test"));
    latest_before_crash = first.latest_completed_checkpoint();
    REQUIRE(latest_before_crash >= 3);
  }
  // Part of the output is committed; the rest comes after the restart.
  CHECK(read_committed_output(out).size() < static_cast<std::size_t>(count));
  kinds.gate->open = true;
  auto options = kinds.apply(options_for(dir));
  options.restore_latest = true;
  local_cluster second(job, options);
  auto status = second.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  CHECK(*second.restored_checkpoint() == latest_before_crash);
  // Ids go on after the restored one: never reused across the restart.
  CHECK(second.latest_completed_checkpoint() > latest_before_crash);
  check_exactly_once(out, count);
}

TEST_CASE("local cluster: restored at another parallelism, keyed state and sink move along") {
  temp_folder dir;
  constexpr std::int64_t count = 100'000;
  const auto out = dir.path() / "out";
  custom_kinds kinds(/*hold_after=*/20'000);
  const job_graph job = exactly_once_job(out, count, 10ms, checkpointing_mode::exactly_once, 0, 10s,
                                         4, "gated_sequence_source", kinds.registry);
  {
    auto options = kinds.apply(options_for(dir));
    // A keyed_sum subtask this time, crashed by a fault hook as checkpoint 2's completion
    // reaches it (the gate keeps the job running until then).
    std::atomic<bool> killed{false};
    options.faults = [&killed](const control_event& e) {
      fault_decision d;
      if (e.what == control_event::kind::notify_complete && e.id >= 2 &&
          e.attempt.subtask == subtask_id{1, 0} && !killed.exchange(true))
        d.kill_subtask = true;
      return d;
    };
    local_cluster first(job, options);
    auto status = first.run(60s);
    if (!status) FAIL(status.err().message);
    REQUIRE(*status == job_status::failed);
    CHECK_THAT(first.failure_cause().value_or(""), Catch::Contains("fault hook"));
  }
  // Same job (id, uids, max parallelism), keyed_sum and sink at parallelism 3 instead of 4.
  kinds.gate->open = true;
  job_graph rescaled =
      exactly_once_job(out, count, 10ms, checkpointing_mode::exactly_once, 0, 10s,
                       /*sum_parallelism=*/3, "gated_sequence_source", kinds.registry);
  rescaled.id = job.id;
  auto options = kinds.apply(options_for(dir));
  options.restore_latest = true;
  local_cluster second(rescaled, options);
  auto status = second.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  check_exactly_once(out, count);
}

TEST_CASE("local cluster: every vertex restored at another parallelism, source included, "
          "exactly once") {
  // Source, keyed_sum and sink at 2 then 4 (twice the parallelism), or at 4 then 2 (half),
  // restored from the checkpoint the crash left, in either state backend.
  const std::string backend = GENERATE(as<std::string>{}, "hashmap", "rocksdb");
  using parallelisms = std::pair<std::uint32_t, std::uint32_t>;
  const auto [before, after] = GENERATE(parallelisms{2, 4}, parallelisms{4, 2});
  INFO(backend << ", parallelism " << before << " -> " << after);
  temp_folder dir;
  constexpr std::int64_t count = 60'000;
  const auto out = dir.path() / "out";
  custom_kinds kinds(/*hold_after=*/5'000);
  auto job_at = [&](std::uint32_t parallelism) {
    job_graph job =
        exactly_once_job(out, count, 10ms, checkpointing_mode::exactly_once, 0, 10s, parallelism,
                         "gated_sequence_source", kinds.registry, parallelism);
    job.checkpointing->config.state_backend = backend;
    return job;
  };
  const job_graph job = job_at(before);
  {
    local_cluster first(job, kinds.apply(options_for(dir)));
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(2, 60s));
    first.kill_task({0, 1}, "killed by test");  // a source subtask
    REQUIRE(first.wait(60s) == job_status::failed);
    CHECK_THAT(first.failure_cause().value_or(""), Catch::Contains("killed by test"));
  }
  // Part of the output is committed; the rest comes after the restore.
  CHECK(read_committed_output(out).size() < static_cast<std::size_t>(count));
  kinds.gate->open = true;
  job_graph rescaled = job_at(after);
  rescaled.id = job.id;
  auto options = kinds.apply(options_for(dir));
  options.restore_latest = true;
  local_cluster second(rescaled, options);
  auto status = second.run(60s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  check_exactly_once(out, count);
}

// The subtask folders under <local>/rocksdb (one per keyed_sum subtask attempt that is open).
std::size_t rocksdb_folders(const std::filesystem::path& local) {
  const auto root = local / "rocksdb";
  if (!std::filesystem::exists(root)) return 0;
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(root),
                                                std::filesystem::directory_iterator()));
}

// Files in any folder named "shared" under `root` (incremental checkpoints' shared files).
std::size_t shared_files(const std::filesystem::path& root) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().parent_path().filename() == "shared") ++n;
  return n;
}

TEST_CASE("local cluster: keyed state in rocksdb through checkpoints, a crash and a rescaled "
          "restore, exactly once") {
  // The first run's backend: rocksdb, or hashmap (its checkpoints restore into rocksdb), or
  // rocksdb with incremental checkpoints (both runs: the restore rebuilds from shared files).
  const std::string first_run = GENERATE(as<std::string>{}, "rocksdb", "hashmap",
                                         "rocksdb-incremental");
  INFO("first run with " << first_run);
  const bool incremental = first_run == "rocksdb-incremental";
  const std::string first_backend = incremental ? "rocksdb" : first_run;
  temp_folder dir;
  constexpr std::int64_t count = 100'000;
  const auto out = dir.path() / "out";
  const auto local = dir.path() / "local";
  custom_kinds kinds(/*hold_after=*/20'000);
  job_graph job = exactly_once_job(out, count, 10ms, checkpointing_mode::exactly_once, 0, 10s, 4,
                                   "gated_sequence_source", kinds.registry);
  job.checkpointing->config.state_backend = first_backend;
  job.checkpointing->config.incremental = incremental;
  checkpoint_id latest = 0;
  {
    auto options = kinds.apply(options_for(dir));
    options.local_state_dir = local;
    local_cluster first(job, options);
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(2, 60s));
    // One working folder per keyed_sum subtask while they run (none with the heap backend).
    CHECK(rocksdb_folders(local) == (first_backend == "rocksdb" ? 4u : 0u));
    first.kill_task({1, 2}, "killed by test");
    REQUIRE(first.wait(60s) == job_status::failed);
    CHECK_THAT(first.failure_cause().value_or(""), Catch::Contains("killed by test"));
    latest = first.latest_completed_checkpoint();
  }
  // Every task ended: their working folders are gone.
  CHECK(rocksdb_folders(local) == 0);
  // Incremental checkpoints kept their SST files in the job's shared folder, and the
  // checkpoint the restore starts from names them.
  CHECK((shared_files(dir.path()) > 0) == incremental);
  auto metadata = checkpoint_storage::read_metadata(dir.path() / "state" / job.id /
                                                    ("chk-" + std::to_string(latest)));
  REQUIRE(metadata);
  std::size_t shared_handles = 0;
  for (const auto& h : metadata->all_handles()) shared_handles += h.is_shared() ? 1 : 0;
  CHECK((shared_handles > 0) == incremental);

  // Same job (id, uids, max parallelism) in rocksdb, keyed_sum and sink at parallelism 3.
  kinds.gate->open = true;
  job_graph rescaled =
      exactly_once_job(out, count, 10ms, checkpointing_mode::exactly_once, 0, 10s,
                       /*sum_parallelism=*/3, "gated_sequence_source", kinds.registry);
  rescaled.id = job.id;
  rescaled.checkpointing->config.state_backend = "rocksdb";
  rescaled.checkpointing->config.incremental = incremental;
  auto options = kinds.apply(options_for(dir));
  options.restore_latest = true;
  options.local_state_dir = local;
  {
    local_cluster second(rescaled, options);
    auto status = second.run(60s);
    if (!status) FAIL(status.err().message);
    INFO("failure: " << second.failure_cause().value_or("none"));
    REQUIRE(*status == job_status::finished);
    REQUIRE(second.restored_checkpoint());
    CHECK(second.completed_checkpoints() >= 1);
  }
  check_exactly_once(out, count);
  CHECK(rocksdb_folders(local) == 0);
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
