// keyed_sum's `state_bytes` parameter (the benchmarks' "subtask holding N MiB of state"):
// the snapshot carries exactly that much extra operator state, different per subtask, and bad
// values are refused with a clear error by both the job file and the operator factory.
// Its `value_bytes` parameter: bytes per key in either backend, new per record, restored.
#include <catch2/catch.hpp>

#include <array>

#include "engine/state/key_groups.hpp"
#include "engine/runtime/keyed_operators.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"
#include "graph/job_file.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

std::unique_ptr<stream_operator> open_sum(const job_vertex& v, keyed_state_backend& keyed,
                                          std::uint32_t index) {
  auto made = operator_factory::builtin().create(v);
  REQUIRE(made);
  auto op = std::move(made).value();
  operator_context c;
  c.vertex = &v;
  c.subtask_index = index;
  c.parallelism = v.parallelism;
  c.keyed_state = &keyed;
  REQUIRE(op->open(c, {}));
  return op;
}

std::string job_with_state_bytes(const std::string& value) {
  return "[[operator]]\nuid = \"src\"\nkind = \"sequence_source\"\nparams = { count = 10 }\n\n"
         "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"src\"\n"
         "params = { state_bytes = " + value + " }\n\n"
         "[[operator]]\nuid = \"sink\"\nkind = \"discard_sink\"\ninput = \"sum\"\n";
}

}  // namespace

TEST_CASE("keyed_sum without state_bytes snapshots no operator state") {
  auto v = make_vertex("keyed_sum", {}, 2);
  heap_keyed_state_backend keyed(v.max_parallelism, key_groups::range_for_subtask(0, 2, 128));
  auto op = open_sum(v, keyed, 0);
  auto snap = op->snapshot(1);
  REQUIRE(snap);
  CHECK(snap->state.empty());
}

TEST_CASE("keyed_sum with state_bytes snapshots that many bytes, different per subtask") {
  auto v = make_vertex("keyed_sum", {{"state_bytes", "4096"}}, 2);
  heap_keyed_state_backend keyed0(v.max_parallelism, key_groups::range_for_subtask(0, 2, 128));
  heap_keyed_state_backend keyed1(v.max_parallelism, key_groups::range_for_subtask(1, 2, 128));
  auto op0 = open_sum(v, keyed0, 0);
  auto op1 = open_sum(v, keyed1, 1);
  auto s0 = op0->snapshot(1);
  auto s1 = op1->snapshot(1);
  REQUIRE(s0);
  REQUIRE(s1);
  REQUIRE(s0->state.size() == 1);
  REQUIRE(s1->state.size() == 1);
  CHECK(s0->state[0].bytes.size() == 4096);
  CHECK(s1->state[0].bytes.size() == 4096);
  CHECK(s0->state[0].bytes != s1->state[0].bytes);
  // The sum itself is unaffected.
  collecting_output out;
  std::uint64_t key = 0;
  while (key_groups::subtask_for_key(key, 2, 128) != 0) ++key;  // a key subtask 0 owns
  keyed0.set_current_key(key);
  REQUIRE(op0->process(record{key, 0, 5, {}}, out));
  REQUIRE(op0->process(record{key, 1, 7, {}}, out));
  REQUIRE(out.records.size() == 2);
  CHECK(out.records[1].value == 12);
}

TEST_CASE("keyed_sum refuses a negative or oversized state_bytes with a clear error") {
  for (const char* bad : {"-1", "1073741825"}) {
    auto made = operator_factory::builtin().create(make_vertex("keyed_sum", {{"state_bytes", bad}}));
    REQUIRE_FALSE(made);
    CHECK_THAT(made.err().message, Catch::Contains("state_bytes") &&
                                       Catch::Contains("between 0 and 1073741824"));
  }
  auto text = operator_factory::builtin().create(make_vertex("keyed_sum", {{"state_bytes", "x"}}));
  REQUIRE_FALSE(text);
  CHECK_THAT(text.err().message, Catch::Contains("must be an integer"));
}

TEST_CASE("a job file accepts keyed_sum state_bytes and refuses a string for it") {
  auto ok = parse_job_file(job_with_state_bytes("1048576"), "bench.toml");
  REQUIRE(ok.ok());
  bool found = false;
  for (const auto& v : ok.value().vertices)
    if (v.kind == "keyed_sum") {
      found = true;
      CHECK(v.params.at("state_bytes") == "1048576");
    }
  CHECK(found);
  auto bad = parse_job_file(job_with_state_bytes("\"big\""), "bench.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.error().what()), Catch::Contains("state_bytes"));
}

TEST_CASE("keyed_sum with value_bytes keeps that many bytes of keyed state per key, new per "
          "record, restored with the sum") {
  auto v = make_vertex("keyed_sum", {{"value_bytes", "1000"}}, 1);
  heap_keyed_state_backend keyed(v.max_parallelism, key_groups::range_for_subtask(0, 1, 128));
  auto op = open_sum(v, keyed, 0);
  collecting_output out;
  keyed.set_current_key(3);
  REQUIRE(op->process(record{3, 0, 5, {}}, out));
  const auto first = keyed.value_bytes("payload");
  REQUIRE(first);
  CHECK(first->size() == 1000);
  REQUIRE(op->process(record{3, 1, 7, {}}, out));
  const auto second = keyed.value_bytes("payload");
  REQUIRE(second);
  CHECK(second->size() == 1000);
  CHECK(*second != *first);  // each record rewrites it with other bytes
  CHECK(out.records.back().value == 12);
  keyed.set_current_key(4);
  REQUIRE(op->process(record{4, 1, 1, {}}, out));
  CHECK(keyed.value_bytes("payload") != second);  // another key, other bytes for the same seq
  // Restored, both the payload and the sum are back.
  heap_keyed_state_backend restored(v.max_parallelism, keyed.range());
  auto snapshot = keyed.snapshot_now();
  REQUIRE(snapshot);
  REQUIRE(restored.restore({*snapshot}));
  restored.set_current_key(3);
  CHECK(restored.value_bytes("payload") == second);
  CHECK(restored.value("sum") == 12);
}

TEST_CASE("keyed_sum refuses a negative or oversized value_bytes with a clear error") {
  for (const char* bad : {"-1", "1048577"}) {
    auto made = operator_factory::builtin().create(make_vertex("keyed_sum", {{"value_bytes", bad}}));
    REQUIRE_FALSE(made);
    CHECK_THAT(made.err().message, Catch::Contains("value_bytes") &&
                                       Catch::Contains("between 0 and 1048576"));
  }
  // The job file refuses it at submission, with the same range.
  auto bad = parse_job_file(
      "[[operator]]\nuid = \"src\"\nkind = \"sequence_source\"\nparams = { count = 10 }\n\n"
      "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"src\"\n"
      "params = { value_bytes = 2000000 }\n",
      "bench.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.error().what()), Catch::Contains("value_bytes"));
}

TEST_CASE("keyed_sum value_bytes in the rocksdb backend: per key, new per record, restored into "
          "either backend") {
  temp_folder dir;
  const auto range = key_groups::range_for_subtask(0, 1, 128);
  auto keyed = rocksdb_keyed_state_backend::open(128, range, dir.path() / "a");
  auto restored = rocksdb_keyed_state_backend::open(128, range, dir.path() / "b");
  REQUIRE(keyed);
  REQUIRE(restored);
  auto v = make_vertex("keyed_sum", {{"value_bytes", "3000"}}, 1);
  auto op = open_sum(v, **keyed, 0);
  collecting_output out;
  std::vector<std::string> latest;
  for (std::uint64_t key = 0; key < 4; ++key) {
    (*keyed)->set_current_key(key);
    REQUIRE(op->process(record{key, static_cast<std::int64_t>(key), 1, {}}, out));
    const auto first = (*keyed)->value_bytes("payload");
    REQUIRE(op->process(record{key, static_cast<std::int64_t>(key + 100), 1, {}}, out));
    const auto second = (*keyed)->value_bytes("payload");
    REQUIRE(first);
    REQUIRE(second);
    CHECK(first->size() == 3000);
    CHECK(second->size() == 3000);
    CHECK(*first != *second);
    for (const auto& other : latest) CHECK(*second != other);  // different per key
    latest.push_back(*second);
  }
  auto snapshot = (*keyed)->snapshot_now();
  REQUIRE(snapshot);
  REQUIRE((*restored)->restore({*snapshot}));
  heap_keyed_state_backend heap(128, range);
  REQUIRE(heap.restore({*snapshot}));
  for (std::uint64_t key = 0; key < 4; ++key) {
    (*restored)->set_current_key(key);
    heap.set_current_key(key);
    CHECK((*restored)->value_bytes("payload") == latest[key]);
    CHECK(heap.value_bytes("payload") == latest[key]);
    CHECK((*restored)->value("sum") == 2);
  }
}

TEST_CASE("keyed_sum value_bytes content does not compress away") {
  auto v = make_vertex("keyed_sum", {{"value_bytes", "65536"}}, 1);
  heap_keyed_state_backend keyed(v.max_parallelism, key_groups::range_for_subtask(0, 1, 128));
  auto op = open_sum(v, keyed, 0);
  collecting_output out;
  keyed.set_current_key(9);
  REQUIRE(op->process(record{9, 7, 1, {}}, out));
  const auto value = keyed.value_bytes("payload");
  REQUIRE(value);
  // Close to uniform bytes: no byte value takes more than 1% of them.
  std::array<std::size_t, 256> counts{};
  for (unsigned char c : *value) ++counts[c];
  for (auto n : counts) CHECK(n < value->size() / 100);
}
