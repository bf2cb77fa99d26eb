// Operator (non-keyed) list state of user_stateful_process: the even-split arithmetic, snapshots
// restored at other parallelisms as the job master's state assignment hands them out (even-split:
// every element exactly once, in old-subtask order; union: every element in every subtask), and
// malformed snapshot entries refused with a clear error. Driven directly: no task, no threads.
#include <catch2/catch.hpp>

#include <map>
#include <numeric>

#include "engine/jobmaster/state_assignment.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/operator_list_states.hpp"
#include "graph/operator_registry.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

std::vector<std::uint64_t> part_sizes(std::uint64_t total, std::uint32_t p) {
  std::vector<std::uint64_t> sizes;
  std::uint64_t next = 0;
  for (std::uint32_t i = 0; i < p; ++i) {
    const element_range r = even_split_range(total, p, i);
    CHECK(r.begin == next);  // contiguous, in subtask order
    next = r.end;
    sizes.push_back(r.size());
  }
  CHECK(next == total);  // every element in exactly one part
  return sizes;
}

// Each record's seq (as 8 bytes) goes into the even-split list "buffer" and the union list
// "seen" of its subtask.
stateful_process_function buffering() {
  stateful_process_function fn;
  fn.process = [](const record& r, operator_state_context& state, std::vector<record>&) {
    const std::string element = std::to_string(r.seq);
    state.list_bytes("buffer", list_redistribution::even_split).push_back(element);
    state.list_bytes("seen", list_redistribution::union_all).push_back(element);
  };
  return fn;
}

job_vertex stateful_vertex(std::uint32_t parallelism, stateful_process_function fn = buffering()) {
  job_vertex v = make_vertex("user_stateful_process", {}, parallelism, 128, "buffer");
  v.name = "buffer";
  v.function = std::make_shared<const user_function>(std::move(fn));
  return v;
}

// What new subtask `index` receives from `old`, as the job master selects it for the kind.
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

std::vector<std::unique_ptr<stream_operator>> open_all(
    const job_vertex& v, const std::vector<restored_operator_state>& old = {}) {
  std::vector<std::unique_ptr<stream_operator>> ops;
  for (std::uint32_t i = 0; i < v.parallelism; ++i) {
    auto op = try_open(v, i, old.empty() ? old : assigned(v, i, old));
    if (!op) FAIL(op.err().message);
    ops.push_back(std::move(op).value());
  }
  return ops;
}

std::vector<restored_operator_state> snapshot_all(
    std::vector<std::unique_ptr<stream_operator>>& ops) {
  std::vector<restored_operator_state> out;
  const auto p = static_cast<std::uint32_t>(ops.size());
  for (std::uint32_t i = 0; i < p; ++i) {
    auto snap = ops[i]->snapshot(1);
    REQUIRE(snap);
    out.push_back({i, p, snap->state});
  }
  return out;
}

// The list `name` of each subtask in `snapshot`, decoded.
std::vector<std::vector<std::string>> lists_of(const std::vector<restored_operator_state>& snapshot,
                                               const std::string& name) {
  std::vector<std::vector<std::string>> out;
  for (const auto& s : snapshot) {
    std::vector<std::string> elements;
    for (const auto& e : s.entries) {
      auto decoded = operator_list_states::decode_entry(e);
      REQUIRE(decoded);
      if (decoded->first == name) elements = decoded->second.elements;
    }
    out.push_back(elements);
  }
  return out;
}

std::vector<std::string> concatenated(const std::vector<std::vector<std::string>>& lists) {
  std::vector<std::string> all;
  for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  return all;
}

void feed(stream_operator& op, std::int64_t first, std::int64_t n) {
  collecting_output out;
  for (std::int64_t s = first; s < first + n; ++s) REQUIRE(op.process(record{0, s, 0, {}}, out));
}

std::string open_error(const std::vector<restored_operator_state>& restored,
                       std::uint32_t parallelism = 2, std::uint32_t index = 0) {
  auto r = try_open(stateful_vertex(parallelism), index, restored);
  REQUIRE_FALSE(r);
  return r.err().message;
}

restored_operator_state with_bytes(std::string bytes, std::string name = "list:buffer") {
  return {0, 1, {{std::move(name), std::move(bytes)}}};
}

}  // namespace

TEST_CASE("operator list state: even-split arithmetic") {
  CHECK(part_sizes(10, 4) == std::vector<std::uint64_t>{3, 3, 2, 2});   // uneven
  CHECK(part_sizes(12, 4) == std::vector<std::uint64_t>{3, 3, 3, 3});   // even
  CHECK(part_sizes(2, 5) == std::vector<std::uint64_t>{1, 1, 0, 0, 0});  // more subtasks
  CHECK(part_sizes(0, 3) == std::vector<std::uint64_t>{0, 0, 0});       // nothing
  CHECK(part_sizes(7, 1) == std::vector<std::uint64_t>{7});
  for (std::uint64_t total : {0u, 1u, 5u, 31u, 128u})
    for (std::uint32_t p : {1u, 2u, 3u, 7u, 64u}) {
      const auto sizes = part_sizes(total, p);
      const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
      CHECK(*hi - *lo <= 1);
    }
  CHECK(even_split_range(10, 4, 2) == element_range{6, 8});
}

TEST_CASE("operator list state: the kind hands every new subtask every old subtask's state") {
  std::map<std::uint32_t, subtask_state> old;
  for (std::uint32_t i = 0; i < 2; ++i) old.emplace(i, subtask_state{});
  const operator_kind* kind = operator_registry::builtin().find("user_stateful_process");
  REQUIRE(kind != nullptr);
  const state_assignment up(old, kind->role, kind->redistribution, 4, 128);
  CHECK(up.is_union());
  for (std::uint32_t i = 0; i < 4; ++i)
    CHECK(up.old_indexes_for(i) == std::vector<std::uint32_t>{0, 1});
}

TEST_CASE("operator list state: rescaled 2 -> 4 -> 2 -> 2, even-split and union") {
  // p = 2: subtask 0 buffers 5 elements, subtask 1 buffers 2.
  auto two = open_all(stateful_vertex(2));
  feed(*two[0], 0, 5);
  feed(*two[1], 100, 2);
  const auto snap2 = snapshot_all(two);
  const auto all = concatenated(lists_of(snap2, "buffer"));
  REQUIRE(all.size() == 7);

  // 2 -> 4: the 7 buffered elements split 2, 2, 2, 1 in old-subtask order; union everywhere.
  auto four = open_all(stateful_vertex(4), snap2);
  auto snap4 = snapshot_all(four);
  const auto buffers4 = lists_of(snap4, "buffer");
  CHECK(buffers4 == std::vector<std::vector<std::string>>{
                        {"0", "1"}, {"2", "3"}, {"4", "100"}, {"101"}});
  for (const auto& seen : lists_of(snap4, "seen")) CHECK(seen == all);

  // More records at p = 4, then 4 -> 2: nothing lost, nothing twice.
  feed(*four[3], 200, 3);
  snap4 = snapshot_all(four);
  const auto all4 = concatenated(lists_of(snap4, "buffer"));
  CHECK(all4.size() == 10);
  auto back = open_all(stateful_vertex(2), snap4);
  const auto snap_back = snapshot_all(back);
  const auto buffers2 = lists_of(snap_back, "buffer");
  CHECK(buffers2[0].size() == 5);
  CHECK(buffers2[1].size() == 5);
  CHECK(concatenated(buffers2) == all4);
  // Union state is every old subtask's list: each of the four held the seven, one three more.
  for (const auto& seen : lists_of(snap_back, "seen")) CHECK(seen.size() == 4 * 7 + 3);

  // Unchanged parallelism: each subtask keeps its own even-split list.
  feed(*back[1], 300, 4);
  const auto before = snapshot_all(back);
  auto same = open_all(stateful_vertex(2), before);
  CHECK(lists_of(snapshot_all(same), "buffer") == lists_of(before, "buffer"));
}

TEST_CASE("operator list state: more subtasks than elements, and none at all") {
  auto one = open_all(stateful_vertex(1));
  feed(*one[0], 0, 2);
  auto five = open_all(stateful_vertex(5), snapshot_all(one));
  const auto buffers = lists_of(snapshot_all(five), "buffer");
  CHECK(buffers == std::vector<std::vector<std::string>>{{"0"}, {"1"}, {}, {}, {}});

  auto empty = open_all(stateful_vertex(2));
  auto three = open_all(stateful_vertex(3), snapshot_all(empty));
  for (const auto& l : lists_of(snapshot_all(three), "buffer")) CHECK(l.empty());
}

TEST_CASE("operator list state: entries round-trip through their encoding") {
  const operator_list list{list_redistribution::union_all, {"", "a", std::string("\0b", 2)}};
  const auto entry = operator_list_states::encode_entry("xs", list);
  CHECK(entry.name == "list:xs");
  auto decoded = operator_list_states::decode_entry(entry);
  REQUIRE(decoded);
  CHECK(decoded->first == "xs");
  CHECK(decoded->second == list);
}

TEST_CASE("operator list state: a malformed snapshot entry is refused with a clear error") {
  using Catch::Contains;
  const std::string good =
      operator_list_states::encode_entry("buffer", {list_redistribution::even_split, {"ab"}})
          .bytes;
  CHECK_THAT(open_error({with_bytes("")}), Contains("'buffer': empty entry"));
  CHECK_THAT(open_error({with_bytes(std::string("\x07\0\0\0\0", 5))}),
             Contains("unknown redistribution mode 7"));
  CHECK_THAT(open_error({with_bytes(std::string("\x00\x01", 2))}),
             Contains("truncated before the element count"));
  CHECK_THAT(open_error({with_bytes(std::string("\x00\xff\xff\xff\xff\0\0\0\0", 9))}),
             Contains("4294967295 elements cannot fit in 4 bytes"));
  CHECK_THAT(open_error({with_bytes(good.substr(0, good.size() - 1))}),
             Contains("element 0 runs past the end"));
  CHECK_THAT(open_error({with_bytes(good + "x")}), Contains("1 bytes after the last element"));
  CHECK_THAT(open_error({with_bytes(good, "offset")}),
             Contains("entry 'offset' is not a list"));
  CHECK_THAT(open_error({with_bytes(good), with_bytes(good)}),
             Contains("old subtask 0 arrived twice"));
  CHECK_THAT(open_error({{3, 2, {}}}), Contains("old subtask 3 is beyond the old parallelism 2"));
  CHECK_THAT(open_error({{0, 2, {}}, {1, 3, {}}}),
             Contains("disagree on the old parallelism (2 and 3)"));
  const std::string as_union =
      operator_list_states::encode_entry("buffer", {list_redistribution::union_all, {}}).bytes;
  CHECK_THAT(open_error({{0, 2, {{"list:buffer", good}}}, {1, 2, {{"list:buffer", as_union}}}}),
             Contains("even-split state in one old subtask and union state in old subtask 1"));
  CHECK_THAT(open_error({{0, 1, {{"list:buffer", good}, {"list:buffer", good}}}}),
             Contains("appears twice in old subtask 0"));
  // Every error names the operator and the restore.
  CHECK_THAT(open_error({with_bytes("")}),
             Contains("user function 'buffer': restoring its operator state"));
}

TEST_CASE("operator list state: asking for a list under the other mode fails the task") {
  stateful_process_function fn;
  fn.process = [](const record&, operator_state_context& state, std::vector<record>&) {
    state.list_bytes("xs", list_redistribution::even_split).push_back("a");
    state.list_bytes("xs", list_redistribution::union_all);
  };
  auto op = try_open(stateful_vertex(1, fn), 0, {});
  REQUIRE(op);
  collecting_output out;
  auto r = (*op)->process(record{}, out);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message,
             Catch::Contains("'xs' is even-split state, asked for as union state"));
}

TEST_CASE("operator list state: end_input sees the restored state and emits") {
  stateful_process_function fn = buffering();
  fn.end_input = [](operator_state_context& state, std::vector<record>& out) {
    for (const auto& e : state.list_bytes("buffer", list_redistribution::even_split))
      out.push_back(record{0, std::stoll(e), 0, {}});
  };
  auto first = open_all(stateful_vertex(1, fn));
  feed(*first[0], 40, 3);
  auto restored = open_all(stateful_vertex(1, fn), snapshot_all(first));
  collecting_output out;
  REQUIRE(restored[0]->end_input(out));
  REQUIRE(out.records.size() == 3);
  CHECK(out.records[2].seq == 42);
}

TEST_CASE("operator list state: every cut and every flipped byte of an entry decodes or errs") {
  const auto entry = operator_list_states::encode_entry(
      "xs", {list_redistribution::union_all, {"one", "", "three", std::string(300, 'x')}});
  for (std::size_t n = 0; n < entry.bytes.size(); ++n)
    CHECK_FALSE(operator_list_states::decode_entry({entry.name, entry.bytes.substr(0, n)}));
  std::size_t decoded = 0;
  for (std::size_t at = 0; at < entry.bytes.size(); ++at)
    for (unsigned char bit = 1; bit != 0; bit = static_cast<unsigned char>(bit << 1)) {
      operator_state_entry spoiled = entry;
      spoiled.bytes[at] = static_cast<char>(spoiled.bytes[at] ^ bit);
      auto r = operator_list_states::decode_entry(spoiled);
      if (!r) continue;
      ++decoded;  // an element's content changed: still a well-formed list
      std::size_t bytes = 0;
      for (const auto& e : r->second.elements) bytes += e.size();
      CHECK(bytes <= entry.bytes.size());
    }
  CHECK(decoded > 0);
}
