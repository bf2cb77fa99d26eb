// keyed_sum's `state_bytes` parameter (the benchmarks' "subtask holding N MiB of state"):
// the snapshot carries exactly that much extra operator state, different per subtask, and bad
// values are refused with a clear error by both the job file and the operator factory.
// Its `value_bytes` parameter (K keys x V bytes of keyed state): every key holds V bytes,
// rewritten on every record of the key, kept by a snapshot and restored from it, in either
// backend; bad values are refused the same way.
#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <vector>

#include "engine/runtime/key_groups.hpp"
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

std::string job_with_param(const std::string& param, const std::string& value) {
  return "[[operator]]\nuid = \"src\"\nkind = \"sequence_source\"\nparams = { count = 10 }\n\n"
         "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"src\"\n"
         "params = { " + param + " = " + value + " }\n\n"
         "[[operator]]\nuid = \"sink\"\nkind = \"discard_sink\"\ninput = \"sum\"\n";
}
std::string job_with_state_bytes(const std::string& value) {
  return job_with_param("state_bytes", value);
}

// The first `n` keys subtask 0 of 2 owns (max parallelism 128).
std::vector<std::uint64_t> keys_of_subtask0(std::size_t n) {
  std::vector<std::uint64_t> keys;
  for (std::uint64_t key = 0; keys.size() < n; ++key)
    if (key_groups::subtask_for_key(key, 2, 128) == 0) keys.push_back(key);
  return keys;
}

// Feeds one record per key (seq = `seq0` + its index) and returns each key's stored bytes.
std::vector<std::string> feed(stream_operator& op, keyed_state_backend& keyed,
                              const std::vector<std::uint64_t>& keys, std::int64_t seq0) {
  collecting_output out;
  std::vector<std::string> values;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keyed.set_current_key(keys[i]);
    REQUIRE(op.process(record{keys[i], seq0 + static_cast<std::int64_t>(i), 1, {}}, out));
    values.push_back(keyed_sum::stored_value(keyed));
  }
  return values;
}

std::vector<std::string> read_back(keyed_state_backend& keyed,
                                   const std::vector<std::uint64_t>& keys) {
  std::vector<std::string> values;
  for (auto key : keys) {
    keyed.set_current_key(key);
    values.push_back(keyed_sum::stored_value(keyed));
  }
  return values;
}

// value_bytes through one backend: present per key, changed on update, restored from a
// snapshot into a fresh backend of the same kind.
void check_value_bytes(keyed_state_backend& keyed, keyed_state_backend& restored,
                       std::int64_t value_bytes) {
  auto v = make_vertex("keyed_sum", {{"value_bytes", std::to_string(value_bytes)}}, 2);
  auto op = open_sum(v, keyed, 0);
  const auto keys = keys_of_subtask0(5);
  const auto first = feed(*op, keyed, keys, 0);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    CHECK(first[i].size() == static_cast<std::size_t>(value_bytes));
    for (std::size_t j = 0; j < i; ++j) CHECK(first[i] != first[j]);  // different per key
  }
  const auto second = feed(*op, keyed, keys, 100);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    CHECK(second[i].size() == static_cast<std::size_t>(value_bytes));
    CHECK(second[i] != first[i]);  // rewritten by the record
  }
  // The sum is unaffected by the bytes beside it.
  keyed.set_current_key(keys[0]);
  CHECK(keyed.value("sum") == 2);

  auto snap = keyed.snapshot_now();
  REQUIRE(snap);
  REQUIRE(restored.restore({*snap}));
  CHECK(read_back(restored, keys) == second);
  // Later updates never reach a snapshot already taken.
  feed(*op, keyed, keys, 200);
  auto again = heap_keyed_state_backend(128, key_groups::range_for_subtask(0, 2, 128));
  REQUIRE(again.restore({*snap}));
  CHECK(read_back(again, keys) == second);
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

TEST_CASE("keyed_sum without value_bytes keeps only the sum per key") {
  auto v = make_vertex("keyed_sum", {}, 2);
  heap_keyed_state_backend keyed(v.max_parallelism, key_groups::range_for_subtask(0, 2, 128));
  auto op = open_sum(v, keyed, 0);
  const auto values = feed(*op, keyed, keys_of_subtask0(3), 0);
  for (const auto& value : values) CHECK(value.empty());
  keyed.set_current_key(keys_of_subtask0(1)[0]);
  CHECK(keyed.map_entries(keyed_sum::value_state).empty());
}

TEST_CASE("keyed_sum value_bytes holds that many bytes per key, rewritten and restored (hashmap)") {
  // One chunk, several chunks with a short last one, and a single byte.
  for (std::int64_t bytes : {std::int64_t{100}, std::int64_t{3 * 4096 + 17}, std::int64_t{1}}) {
    INFO("value_bytes " << bytes);
    heap_keyed_state_backend keyed(128, key_groups::range_for_subtask(0, 2, 128));
    heap_keyed_state_backend restored(128, key_groups::range_for_subtask(0, 2, 128));
    check_value_bytes(keyed, restored, bytes);
  }
}

TEST_CASE("keyed_sum value_bytes holds that many bytes per key, rewritten and restored (rocksdb)") {
  temp_folder dir;
  auto keyed = rocksdb_keyed_state_backend::open(128, key_groups::range_for_subtask(0, 2, 128),
                                                 dir.path() / "a");
  auto restored = rocksdb_keyed_state_backend::open(128, key_groups::range_for_subtask(0, 2, 128),
                                                    dir.path() / "b");
  REQUIRE(keyed);
  REQUIRE(restored);
  check_value_bytes(**keyed, **restored, 2 * 4096 + 5);
}

TEST_CASE("keyed_sum value_bytes content does not compress away") {
  auto v = make_vertex("keyed_sum", {{"value_bytes", "65536"}}, 2);
  heap_keyed_state_backend keyed(v.max_parallelism, key_groups::range_for_subtask(0, 2, 128));
  auto op = open_sum(v, keyed, 0);
  const auto value = feed(*op, keyed, keys_of_subtask0(1), 7)[0];
  // A byte histogram close to uniform: no byte value takes more than 1% of the bytes.
  std::array<std::size_t, 256> counts{};
  for (unsigned char c : value) ++counts[c];
  for (auto n : counts) CHECK(n < value.size() / 100);
}

TEST_CASE("keyed_sum refuses a negative or oversized value_bytes with a clear error") {
  for (const char* bad : {"-1", "16777217"}) {
    auto made =
        operator_factory::builtin().create(make_vertex("keyed_sum", {{"value_bytes", bad}}));
    REQUIRE_FALSE(made);
    CHECK_THAT(made.err().message, Catch::Contains("value_bytes") &&
                                       Catch::Contains("between 0 and 16777216"));
    auto file = parse_job_file(job_with_param("value_bytes", bad), "bench.toml");
    REQUIRE_FALSE(file.ok());
    CHECK_THAT(std::string(file.error().what()),
               Catch::Contains("value_bytes") && Catch::Contains("between 0 and 16777216"));
  }
  auto text = parse_job_file(job_with_param("value_bytes", "\"1k\""), "bench.toml");
  REQUIRE_FALSE(text.ok());
  CHECK_THAT(std::string(text.error().what()), Catch::Contains("value_bytes"));
  auto ok = parse_job_file(job_with_param("value_bytes", "1024"), "bench.toml");
  REQUIRE(ok.ok());
}
