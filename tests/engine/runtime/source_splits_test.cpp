// The built-in sources' splits: every number exactly once at any parallelism, in the stride
// order when the parallelism divides the number of splits, and snapshots that restore at another
// parallelism (handed out as the job master's state assignment hands them) without losing or
// repeating a number. Driven directly: no task, no threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "engine/jobmaster/state_assignment.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/source_operators.hpp"
#include "engine/runtime/source_splits.hpp"
#include "graph/operator_registry.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

constexpr std::uint32_t splits = 12;  // the vertices' max parallelism
constexpr std::int64_t start = 7;
constexpr std::int64_t count = 1000;

job_vertex sequence_vertex(std::uint32_t parallelism, std::uint32_t max_parallelism = splits) {
  return make_vertex("sequence_source",
                     {{"count", std::to_string(count)}, {"start", std::to_string(start)}},
                     parallelism, max_parallelism);
}

// One opened source subtask.
struct subtask {
  std::unique_ptr<stream_operator> op;
  collecting_output out;

  source_operator& source() { return dynamic_cast<source_operator&>(*op); }
  // Emits up to `n` records, at most 7 per call; true when the source is exhausted.
  bool emit(std::size_t n) {
    std::size_t before = out.records.size();
    for (int calls = 0; calls < 100'000; ++calls) {
      if (out.records.size() - before >= n) return false;
      const std::size_t budget = std::min<std::size_t>(7, n - (out.records.size() - before));
      const std::size_t was = out.records.size();
      auto r = source().emit(out, budget);
      REQUIRE(r);
      REQUIRE(out.records.size() - was <= budget);  // the per-call bound holds
      if (r->state == source_operator::emit_result::status::exhausted) return true;
    }
    FAIL("source never ended");
    return true;
  }
  void drain() { emit(std::numeric_limits<std::size_t>::max() / 2); }
  std::vector<std::int64_t> seqs() const {
    std::vector<std::int64_t> s;
    for (const auto& r : out.records) s.push_back(r.seq);
    return s;
  }
};

result<std::unique_ptr<stream_operator>> try_open(
    const job_vertex& v, std::uint32_t index,
    const std::vector<restored_operator_state>& restored) {
  auto made = operator_factory::builtin().create(v);
  if (!made) return made.err();
  operator_context c;
  c.vertex = &v;
  c.subtask_index = index;
  c.parallelism = v.parallelism;
  c.restored_checkpoint = restored.empty() ? 0 : 1;
  if (auto opened = (*made)->open(c, restored); !opened) return opened.err();
  return std::move(made).value();
}

std::string open_error(const job_vertex& v, std::uint32_t index,
                       const std::vector<restored_operator_state>& restored) {
  auto r = try_open(v, index, restored);
  REQUIRE_FALSE(r);
  return r.err().message;
}

// What new subtask `index` receives from `old` (every old subtask's snapshot, by index) under the
// kind's registered redistribution, as the job master's state assignment selects it.
std::vector<restored_operator_state> assigned(const job_vertex& v, std::uint32_t index,
                                              const std::vector<restored_operator_state>& old) {
  std::map<std::uint32_t, subtask_state> states;
  for (const auto& o : old) states.emplace(o.old_subtask_index, subtask_state{});
  const operator_kind* kind = operator_registry::builtin().find(v.kind);
  REQUIRE(kind != nullptr);
  state_assignment assignment(std::move(states), kind->role, kind->redistribution, v.parallelism,
                              v.max_parallelism);
  std::vector<restored_operator_state> out;
  for (std::uint32_t i : assignment.old_indexes_for(index)) out.push_back(old.at(i));
  return out;
}

// All subtasks of `v`, opened from `old` (empty: fresh).
std::vector<subtask> open_all(const job_vertex& v,
                              const std::vector<restored_operator_state>& old = {}) {
  std::vector<subtask> subtasks(v.parallelism);
  for (std::uint32_t i = 0; i < v.parallelism; ++i) {
    auto op = try_open(v, i, old.empty() ? old : assigned(v, i, old));
    if (!op) FAIL(op.err().message);
    subtasks[i].op = std::move(op).value();
  }
  return subtasks;
}

std::vector<restored_operator_state> snapshot_all(std::vector<subtask>& subtasks) {
  std::vector<restored_operator_state> out;
  const auto p = static_cast<std::uint32_t>(subtasks.size());
  for (std::uint32_t i = 0; i < p; ++i) {
    auto snap = subtasks[i].op->snapshot(1);
    REQUIRE(snap);
    out.push_back({i, p, snap->state});
  }
  return out;
}

// Adds every subtask's records so far to `seen` (number -> times) and forgets them.
void collect(std::vector<subtask>& subtasks, std::map<std::int64_t, int>& seen) {
  for (auto& s : subtasks) {
    const auto seqs = s.seqs();
    CHECK(std::is_sorted(seqs.begin(), seqs.end()));  // ascending within a subtask
    for (std::int64_t q : seqs) ++seen[q];
    s.out.records.clear();
  }
}

void check_each_once(const std::map<std::int64_t, int>& seen, std::int64_t first,
                     std::int64_t n) {
  REQUIRE(seen.size() == static_cast<std::size_t>(n));
  CHECK(seen.begin()->first == first);
  CHECK(seen.rbegin()->first == first + n - 1);
  for (const auto& [q, times] : seen)
    if (times != 1) FAIL("number " << q << " emitted " << times << " times");
}

// Runs p=3 to a mid-run snapshot (subtasks at different progress), drops what they emit after
// it (a crash), and returns the snapshot; `seen` gets what the snapshot covers.
std::vector<restored_operator_state> run_to_snapshot(const job_vertex& v,
                                                     std::map<std::int64_t, int>& seen) {
  auto first = open_all(v);
  for (std::uint32_t i = 0; i < v.parallelism; ++i) first[i].emit(40 + 37 * i);
  collect(first, seen);
  auto snap = snapshot_all(first);
  for (auto& s : first) s.emit(25);  // after the checkpoint: lost with the crash
  return snap;
}

std::filesystem::path write_lines(const std::filesystem::path& folder, int n) {
  const auto file = folder / "in.txt";
  std::ofstream out(file);
  for (int i = 0; i < n; ++i) out << "line " << i << "\n";
  return file;
}

}  // namespace

TEST_CASE("sequence source: every number once at p = 1..5; stride order when p divides S") {
  for (std::uint32_t p = 1; p <= 5; ++p) {
    INFO("parallelism " << p);
    auto subtasks = open_all(sequence_vertex(p));
    for (auto& s : subtasks) s.drain();
    if (splits % p == 0)
      for (std::uint32_t i = 0; i < p; ++i) {
        const auto seqs = subtasks[i].seqs();
        for (std::size_t k = 0; k < seqs.size(); ++k)
          REQUIRE(seqs[k] == start + i + static_cast<std::int64_t>(k * p));
      }
    std::map<std::int64_t, int> seen;
    collect(subtasks, seen);
    check_each_once(seen, start, count);
  }
}

TEST_CASE("sequence source: a snapshot at p=3 restores at 2, 5 and 1, every number once") {
  const std::uint32_t to = GENERATE(2u, 5u, 1u);
  INFO("3 -> " << to);
  std::map<std::int64_t, int> seen;
  const auto snap = run_to_snapshot(sequence_vertex(3), seen);
  auto second = open_all(sequence_vertex(to), snap);
  for (auto& s : second) s.drain();
  collect(second, seen);
  check_each_once(seen, start, count);
}

TEST_CASE("sequence source: restored twice in a row, 3 -> 5 -> 2, every number once") {
  std::map<std::int64_t, int> seen;
  const auto snap = run_to_snapshot(sequence_vertex(3), seen);
  auto second = open_all(sequence_vertex(5), snap);
  for (std::uint32_t i = 0; i < 5; ++i) second[i].emit(30 + 11 * i);
  collect(second, seen);
  const auto snap2 = snapshot_all(second);
  auto third = open_all(sequence_vertex(2), snap2);
  for (auto& s : third) s.drain();
  collect(third, seen);
  check_each_once(seen, start, count);
}

TEST_CASE("sequence source: restores with the number of splits its state was written with") {
  // Written with S = 12, restored into a vertex whose max parallelism is now 16, or 8: the
  // state's 12 splits decide, and snapshots go on writing 12.
  const std::uint32_t max_parallelism = GENERATE(16u, 8u);
  std::map<std::int64_t, int> seen;
  const auto snap = run_to_snapshot(sequence_vertex(3), seen);
  auto second = open_all(sequence_vertex(4, max_parallelism), snap);
  for (std::uint32_t i = 0; i < 4; ++i) second[i].emit(20);
  collect(second, seen);
  // Snapshots keep S = 12.
  for (auto& s : snapshot_all(second))
    CHECK(s.entries.at(0) == operator_state_entry{"splits", "12"});
  for (auto& s : second) s.drain();
  collect(second, seen);
  check_each_once(seen, start, count);
}

TEST_CASE("sequence source: more subtasks than splits leaves the extra ones idle, none lost") {
  std::map<std::int64_t, int> seen;
  const auto snap = run_to_snapshot(sequence_vertex(3), seen);
  // 14 subtasks over 12 splits (the max parallelism grew to 16 since).
  auto second = open_all(sequence_vertex(14, 16), snap);
  for (auto& s : second) s.drain();
  CHECK(second[12].out.records.empty());
  CHECK(second[13].out.records.empty());
  collect(second, seen);
  check_each_once(seen, start, count);
}

TEST_CASE("sequence source: offsets written before splits restore at the same parallelism") {
  const auto v = sequence_vertex(2);
  // Old subtask 0 emitted 7, 9, 11; old subtask 1 emitted 8: stride 2.
  const std::vector<restored_operator_state> old = {{0, 2, {{"offset", "13"}}},
                                                    {1, 2, {{"offset", "10"}}}};
  std::map<std::int64_t, int> seen = {{7, 1}, {9, 1}, {11, 1}, {8, 1}};
  auto restored = open_all(v, old);
  for (std::uint32_t i = 0; i < 2; ++i) {
    restored[i].emit(3);
    const auto seqs = restored[i].seqs();
    CHECK(seqs == (i == 0 ? std::vector<std::int64_t>{13, 15, 17}
                          : std::vector<std::int64_t>{10, 12, 14}));
  }
  // Their next snapshot is in splits (S = the old parallelism), which rescale from then on.
  const auto snap = snapshot_all(restored);
  CHECK(snap[0].entries ==
        std::vector<operator_state_entry>{{"splits", "2"}, {"split/0", "19"}});
  collect(restored, seen);
  auto third = open_all(sequence_vertex(1), snap);
  third[0].drain();
  collect(third, seen);
  check_each_once(seen, start, count);

  // At another parallelism: the error it always gave.
  CHECK_THAT(open_error(sequence_vertex(3), 0, old),
             Catch::Contains("cannot be restored at another parallelism (2 -> 3)"));
  // A missing or foreign offset is named.
  CHECK_THAT(open_error(v, 0, {old[0]}), Catch::Contains("no offset for old subtask 1"));
  CHECK_THAT(open_error(v, 0, {old[0], {1, 2, {{"offset", "11"}}}}),
             Catch::Contains("not in the split of subtask 1"));
}

TEST_CASE("sequence source: inconsistent split state is a clear error") {
  const auto v = sequence_vertex(2);
  std::map<std::int64_t, int> seen;
  auto snap = run_to_snapshot(sequence_vertex(3), seen);
  struct bad_case {
    std::string what;
    std::function<void(std::vector<restored_operator_state>&)> spoil;
    std::string expected;
  };
  const std::vector<bad_case> cases = {
      {"missing split",
       [](auto& s) { s[1].entries.erase(s[1].entries.begin() + 1); },
       "split 1 of 12 is missing"},
      {"missing subtask", [](auto& s) { s.pop_back(); }, "split 2 of 12 is missing"},
      {"duplicate split", [](auto& s) { s[0].entries.push_back(s[1].entries[1]); },
       "split 1 appears twice"},
      {"wrong residue", [](auto& s) { s[0].entries[1].bytes = "8"; },
       "split 0 at 8, which is not one of its numbers (7, 19, ...)"},
      {"below the first", [](auto& s) { s[0].entries[1].bytes = "-5"; },
       "split 0 at -5, which is not one of its numbers"},
      {"zero splits",
       [](auto& s) {
         for (auto& o : s) o.entries[0].bytes = "0";
       },
       "0 splits is out of range (1..32768)"},
      {"absurd splits",
       [](auto& s) {
         for (auto& o : s) o.entries[0].bytes = "4000000000";
       },
       "out of range"},
      {"disagreeing splits", [](auto& s) { s[2].entries[0].bytes = "6"; },
       "disagree on the number of splits (12 and 6)"},
      {"garbage count", [](auto& s) { s[1].entries[0].bytes = "12x"; },
       "malformed number of splits '12x'"},
      {"garbage position", [](auto& s) { s[1].entries[1].bytes = ""; },
       "split 1: malformed position ''"},
      {"garbage index", [](auto& s) { s[1].entries[1].name = "split/+1"; },
       "malformed split index '+1'"},
      {"index beyond S", [](auto& s) { s[1].entries[1].name = "split/12"; },
       "split 12 does not exist (12 splits)"},
      {"no count",
       [](auto& s) {
         for (auto& o : s) o.entries.erase(o.entries.begin());
       },
       "split positions without the number of splits"},
      {"unknown entry", [](auto& s) { s[0].entries.push_back({"cursor", "1"}); },
       "unknown entry 'cursor'"},
      {"offsets and splits", [](auto& s) { s[0].entries.push_back({"offset", "7"}); },
       "mixes offsets and splits"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto spoiled = snap;
    c.spoil(spoiled);
    const std::string message = open_error(v, 0, spoiled);
    CHECK_THAT(message, Catch::StartsWith("sequence_source state: "));
    CHECK_THAT(message, Catch::Contains(c.expected));
  }
}

TEST_CASE("sources redistribute their operator state union_all") {
  for (const char* kind : {"sequence_source", "line_source"}) {
    const operator_kind* k = operator_registry::builtin().find(kind);
    REQUIRE(k != nullptr);
    CHECK(k->redistribution == operator_state_redistribution::union_all);
  }
}

TEST_CASE("sequence source: 64 subtasks restore from the union of 64 at a large S") {
  // The union assignment makes each of p subtasks read all p states: p * S tiny entries, parsed
  // once per subtask (S = 4096 here; the largest, 32768, takes about 5 s in a debug build with
  // sanitizers, the default 128 nothing to speak of).
  const std::uint32_t max_parallelism = 4096;
  auto v = make_vertex("sequence_source", {{"count", "100000"}}, 64, max_parallelism);
  auto first = open_all(v);
  std::map<std::int64_t, int> seen;
  for (std::uint32_t i = 0; i < 64; ++i) first[i].emit(i % 5);
  collect(first, seen);
  const auto started = std::chrono::steady_clock::now();
  const auto snap = snapshot_all(first);
  auto second = open_all(v, snap);
  WARN("snapshot and union restore of 64 subtasks at S = 4096: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                started)
              .count()
       << " ms");
  for (auto& s : second) s.drain();
  collect(second, seen);
  check_each_once(seen, 0, 100'000);
}

TEST_CASE("line source: every line once at p = 1..5; snapshots rescale 3 -> 2, 5, 1 and "
          "3 -> 5 -> 2") {
  temp_folder dir;
  constexpr int lines = 500;
  const auto file = write_lines(dir.path(), lines);
  auto vertex = [&](std::uint32_t p) {
    return make_vertex("line_source", {{"path", file.string()}}, p, splits);
  };
  auto check_payloads = [](std::vector<subtask>& subtasks) {
    for (auto& s : subtasks)
      for (const auto& r : s.out.records) {
        REQUIRE(r.payload == "line " + std::to_string(r.seq));
        CHECK(r.key == fnv1a_64(r.payload));
      }
  };
  SECTION("fresh") {
    for (std::uint32_t p = 1; p <= 5; ++p) {
      INFO("parallelism " << p);
      auto subtasks = open_all(vertex(p));
      for (auto& s : subtasks) s.drain();
      check_payloads(subtasks);
      if (splits % p == 0)
        for (std::uint32_t i = 0; i < p; ++i) {
          const auto seqs = subtasks[i].seqs();
          for (std::size_t k = 0; k < seqs.size(); ++k)
            REQUIRE(seqs[k] == i + static_cast<std::int64_t>(k * p));
        }
      std::map<std::int64_t, int> seen;
      collect(subtasks, seen);
      check_each_once(seen, 0, lines);
    }
  }
  SECTION("rescaled once") {
    const std::uint32_t to = GENERATE(2u, 5u, 1u);
    INFO("3 -> " << to);
    std::map<std::int64_t, int> seen;
    const auto snap = run_to_snapshot(vertex(3), seen);
    auto second = open_all(vertex(to), snap);
    for (auto& s : second) s.drain();
    check_payloads(second);
    collect(second, seen);
    check_each_once(seen, 0, lines);
  }
  SECTION("rescaled twice") {
    std::map<std::int64_t, int> seen;
    const auto snap = run_to_snapshot(vertex(3), seen);
    auto second = open_all(vertex(5), snap);
    for (std::uint32_t i = 0; i < 5; ++i) second[i].emit(10 + 13 * i);
    collect(second, seen);
    const auto snap2 = snapshot_all(second);
    auto third = open_all(vertex(2), snap2);
    for (auto& s : third) s.drain();
    check_payloads(third);
    collect(third, seen);
    check_each_once(seen, 0, lines);
  }
  SECTION("offsets from before splits, same parallelism") {
    // Old subtask 0 emitted lines 0, 3; subtasks 1 and 2 nothing yet: stride 3.
    const std::vector<restored_operator_state> old = {
        {0, 3, {{"offset", "6"}}}, {1, 3, {{"offset", "1"}}}, {2, 3, {{"offset", "2"}}}};
    std::map<std::int64_t, int> seen = {{0, 1}, {3, 1}};
    auto restored = open_all(vertex(3), old);
    for (auto& s : restored) s.drain();
    CHECK(restored[0].seqs().front() == 6);
    CHECK(restored[0].seqs()[1] == 9);
    collect(restored, seen);
    check_each_once(seen, 0, lines);
    CHECK_THAT(open_error(vertex(2), 0, old),
               Catch::Contains("line_source cannot be restored at another parallelism (3 -> 2)"));
  }
  SECTION("bad state") {
    std::map<std::int64_t, int> seen;
    auto snap = run_to_snapshot(vertex(3), seen);
    snap[2].entries[1].bytes = "3";  // split 2 at line 3
    CHECK_THAT(open_error(vertex(2), 0, snap),
               Catch::Contains("line_source state: split 2 at 3, which is not one of its numbers"));
  }
}
