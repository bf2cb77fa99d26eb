// The built-in operators and the operator factory, driven directly (no task, no threads).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "engine/runtime/keyed_operators.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/source_operators.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

struct harness {
  job_vertex vertex;
  std::unique_ptr<stream_operator> op;
  std::unique_ptr<keyed_state_backend> keyed;
  collecting_output out;

  explicit harness(job_vertex v, std::uint32_t index = 0,
                   std::vector<restored_operator_state> restored = {},
                   checkpoint_id restored_id = 0)
      : vertex(std::move(v)) {
    auto made = operator_factory::builtin().create(vertex);
    REQUIRE(made);
    op = std::move(made).value();
    keyed = std::make_unique<heap_keyed_state_backend>(
        vertex.max_parallelism,
        key_groups::range_for_subtask(index, vertex.parallelism, vertex.max_parallelism));
    operator_context c;
    c.vertex = &vertex;
    c.subtask_index = index;
    c.parallelism = vertex.parallelism;
    c.keyed_state = keyed.get();
    c.restored_checkpoint = restored_id;
    auto opened = op->open(c, restored);
    REQUIRE(opened);
  }

  source_operator& source() { return dynamic_cast<source_operator&>(*op); }

  // Emits until exhausted (bounded).
  void drain_source() {
    for (int i = 0; i < 100'000; ++i) {
      auto r = source().emit(out, 7);
      REQUIRE(r);
      if (r->state == source_operator::emit_result::status::exhausted) return;
    }
    FAIL("source never ended");
  }

  void process(record r) {
    keyed->set_current_key(r.key);
    REQUIRE(op->process(r, out));
  }
};

}  // namespace

TEST_CASE("sequence source: subtask i of p emits i, i+p, ... with key = seq % keys, value = seq") {
  auto v = make_vertex("sequence_source", {{"count", "10"}, {"keys", "3"}}, 3);
  harness h(v, 1);
  h.drain_source();
  REQUIRE(h.out.records.size() == 3);
  CHECK(h.out.records[0] == record{1, 1, 1, {}});
  CHECK(h.out.records[1] == record{1, 4, 4, {}});
  CHECK(h.out.records[2] == record{1, 7, 7, {}});
  // All subtasks together: every seq exactly once.
  std::multiset<std::int64_t> all;
  for (std::uint32_t i = 0; i < 3; ++i) {
    harness s(v, i);
    s.drain_source();
    for (const auto& r : s.out.records) all.insert(r.seq);
  }
  CHECK(all == std::multiset<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("sequence source: a restored source resumes exactly after the checkpointed offset") {
  auto v = make_vertex("sequence_source", {{"count", "20"}, {"start", "100"}}, 2);
  harness first(v, 1);
  REQUIRE(first.source().emit(first.out, 4));  // 101, 103, 105, 107
  auto snap = first.op->snapshot(1);
  REQUIRE(snap);
  REQUIRE(first.source().emit(first.out, 2));  // 109, 111: after the checkpoint, lost on crash
  // Restoring hands every old subtask's splits to everyone (union_all); subtask 0 emitted none.
  auto untouched = harness(v, 0).op->snapshot(1);
  REQUIRE(untouched);
  harness restored(v, 1, {{1, 2, snap->state}, {0, 2, untouched->state}}, 1);
  restored.drain_source();
  REQUIRE_FALSE(restored.out.records.empty());
  CHECK(restored.out.records.front().seq == 109);
  CHECK(restored.out.records.back().seq == 119);
  CHECK(restored.out.records.size() == 6);
}

TEST_CASE("sequence source: refuses restoring offsets from before splits at another parallelism") {
  auto v = make_vertex("sequence_source", {{"count", "20"}}, 3);
  auto made = operator_factory::builtin().create(v);
  REQUIRE(made);
  operator_context c;
  c.vertex = &v;
  c.parallelism = 3;
  auto r = (*made)->open(c, {{0, 2, {{"offset", "4"}}}});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("parallelism"));
}

TEST_CASE("line source: splits lines over subtasks and resumes from its offset") {
  temp_folder dir;
  const auto file = dir.path() / "in.txt";
  {
    std::ofstream out(file);
    for (int i = 0; i < 7; ++i) out << "line " << i << "\n";
  }
  auto v = make_vertex("line_source", {{"path", file.string()}}, 2);
  harness h(v, 0);
  REQUIRE(h.source().emit(h.out, 2));
  auto snap = h.op->snapshot(1);
  REQUIRE(snap);
  REQUIRE(h.out.records.size() == 2);
  CHECK(h.out.records[1].payload == "line 2");
  CHECK(h.out.records[1].seq == 2);
  CHECK(h.out.records[1].key == fnv1a_64("line 2"));
  auto other = harness(v, 1).op->snapshot(1);
  REQUIRE(other);
  harness restored(v, 0, {{0, 2, snap->state}, {1, 2, other->state}}, 1);
  restored.drain_source();
  std::vector<std::string> rest;
  for (const auto& r : restored.out.records) rest.push_back(r.payload);
  CHECK(rest == std::vector<std::string>{"line 4", "line 6"});
}

TEST_CASE("transforms: map_add, map_scale, filter_modulo, split words, repeat") {
  {
    harness h(make_vertex("map_add", {{"value", "5"}}));
    h.process(record{1, 2, 3, {}});
    CHECK(h.out.records.at(0).value == 8);
  }
  {
    harness h(make_vertex("map_scale", {{"factor", "-2"}}));
    h.process(record{1, 2, 3, {}});
    CHECK(h.out.records.at(0).value == -6);
  }
  {
    harness h(make_vertex("filter_modulo", {{"modulus", "3"}, {"remainder", "1"}}));
    for (std::int64_t s = 0; s < 9; ++s) h.process(record{0, s, 0, {}});
    REQUIRE(h.out.records.size() == 3);
    CHECK(h.out.records[2].seq == 7);
  }
  {
    harness h(make_vertex("flat_map_split_words"));
    h.process(record{0, 4, 0, "  to be\tor not  "});
    REQUIRE(h.out.records.size() == 4);
    CHECK(h.out.records[3] == record{fnv1a_64("not"), 4, 1, "not"});
  }
  {
    harness h(make_vertex("flat_map_repeat", {{"times", "3"}}));
    h.process(record{1, 1, 1, {}});
    CHECK(h.out.records.size() == 3);
  }
}

TEST_CASE("keyed sum and count keep a running total per key in keyed state") {
  harness sum(make_vertex("keyed_sum"));
  harness count(make_vertex("keyed_count"));
  for (std::int64_t s = 0; s < 6; ++s) {
    sum.process(record{static_cast<std::uint64_t>(s % 2), s, s, {}});
    count.process(record{static_cast<std::uint64_t>(s % 2), s, s, {}});
  }
  // key 0: 0, 2, 4 -> sums 0, 2, 6; key 1: 1, 3, 5 -> 1, 4, 9.
  std::vector<std::int64_t> sums;
  for (const auto& r : sum.out.records) sums.push_back(r.value);
  CHECK(sums == std::vector<std::int64_t>{0, 1, 2, 4, 6, 9});
  CHECK(count.out.records.back().value == 3);
  sum.keyed->set_current_key(1);
  CHECK(sum.keyed->value("sum") == 9);
}

TEST_CASE("user kinds run the vertex's callable; a missing or mistyped callable is refused") {
  auto v = make_vertex("user_map");
  v.function = std::make_shared<const user_function>(map_function([](const record& r) {
    return record{r.key, r.seq, r.value * 100, "u"};
  }));
  harness h(v);
  h.process(record{1, 1, 2, {}});
  CHECK(h.out.records.at(0) == record{1, 1, 200, "u"});

  auto p = make_vertex("user_process");
  p.function = std::make_shared<const user_function>(
      process_function([](const record& r, keyed_context& state, std::vector<record>& out) {
        const auto seen = state.value("seen").value_or(0) + 1;
        state.set_value("seen", seen);
        if (seen == 2) out.push_back(r);
      }));
  harness hp(p);
  for (int i = 0; i < 3; ++i) hp.process(record{9, i, 0, {}});
  REQUIRE(hp.out.records.size() == 1);
  CHECK(hp.out.records[0].seq == 1);

  auto missing = operator_factory::builtin().create(make_vertex("user_filter"));
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.err().message, Catch::Contains("carries none"));
  auto wrong = make_vertex("user_filter");
  wrong.function = v.function;
  CHECK_FALSE(operator_factory::builtin().create(wrong));
}

TEST_CASE("operator factory: unknown kinds and bad params are errors; custom kinds can be added") {
  auto unknown = operator_factory::builtin().create(make_vertex("no_such_kind"));
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.err().message, Catch::Contains("no_such_kind"));
  auto bad = operator_factory::builtin().create(make_vertex("map_add", {{"value", "x"}}));
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::Contains("must be an integer"));

  operator_factory custom = operator_factory::builtin();
  custom.add("negate", [](const job_vertex&) -> result<std::unique_ptr<stream_operator>> {
    struct negate : stream_operator {
      result<void> process(const record& r, record_output& out) override {
        out.emit(record{r.key, r.seq, -r.value, r.payload});
        return success();
      }
    };
    return std::unique_ptr<stream_operator>(std::make_unique<negate>());
  });
  CHECK(custom.contains("negate"));
  CHECK_THROWS_AS(custom.add("negate", nullptr), std::invalid_argument);
  auto made = custom.create(make_vertex("negate"));
  REQUIRE(made);
  collecting_output out;
  REQUIRE((*made)->process(record{0, 0, 4, {}}, out));
  CHECK(out.records.at(0).value == -4);
  for (const auto& kind : operator_registry::builtin().names())
    CHECK(operator_factory::builtin().contains(kind));
}

TEST_CASE(
    "delay_us_per_record: map_identity, discard_sink and file_sink take it in 0..1 s; out of "
    "range or malformed is an error naming it") {
  {
    harness h(make_vertex("map_identity", {{"delay_us_per_record", "1"}}));
    h.process(record{1, 2, 3, {}});
    CHECK(h.out.records.at(0) == record{1, 2, 3, {}});
  }
  for (const std::string bad : {"-1", "1000001", "slow"}) {
    auto made = operator_factory::builtin().create(
        make_vertex("map_identity", {{"delay_us_per_record", bad}}));
    REQUIRE_FALSE(made);
    CHECK_THAT(made.err().message, Catch::Contains("delay_us_per_record"));
  }
  // discard_sink takes it the same way: a throttled sink still drops every record.
  {
    harness h(make_vertex("discard_sink", {{"delay_us_per_record", "1"}}));
    h.process(record{1, 2, 3, {}});
    CHECK(h.out.records.empty());
  }
  {
    harness h(make_vertex("discard_sink", {}));  // no delay: the default
    h.process(record{1, 2, 3, {}});
    CHECK(h.out.records.empty());
  }
  for (const std::string bad : {"-1", "1000001", "slow"}) {
    auto made = operator_factory::builtin().create(
        make_vertex("discard_sink", {{"delay_us_per_record", bad}}));
    REQUIRE_FALSE(made);
    CHECK_THAT(made.err().message, Catch::Contains("delay_us_per_record"));
  }
  // file_sink reads its parameters when it opens.
  const auto folder =
      std::filesystem::temp_directory_path() / ("snapflow-delay-" + std::to_string(::getpid()));
  auto v = make_vertex("file_sink", {{"path", folder.string()}, {"delay_us_per_record", "-5"}});
  auto made = operator_factory::builtin().create(v);
  REQUIRE(made);
  operator_context c;
  c.vertex = &v;
  auto opened = (*made)->open(c, {});
  REQUIRE_FALSE(opened);
  CHECK_THAT(opened.err().message, Catch::Contains("delay_us_per_record"));
  std::filesystem::remove_all(folder);
}
