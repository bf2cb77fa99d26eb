// Key selectors folded into the operator that feeds them (graph/key_selector_fusion.hpp): which
// ones fold, what the job graph looks like after (vertices renumbered, uids and edges kept), and
// that every kind of callable that takes one keys exactly the records it emits.
#include <catch2/catch.hpp>

#include "graph/key_selector_fusion.hpp"
#include "graph/stream_environment.hpp"

using namespace snapflow;

namespace {

// The selector of these tests: a key the records cannot have had before.
std::uint64_t key_of(const record& r) {
  return 1000 + static_cast<std::uint64_t>(r.value);
}

record numbered(std::int64_t value) {
  return record{7, value, value, {}};
}

const job_vertex& vertex_of(const job_graph& g, const std::string& kind) {
  for (const auto& v : g.vertices)
    if (v.kind == kind) return v;
  FAIL("no vertex of kind " << kind);
  return g.vertices.front();
}

bool has_kind(const job_graph& g, const std::string& kind) {
  for (const auto& v : g.vertices)
    if (v.kind == kind) return true;
  return false;
}

// Does nothing with state: the fused callables below are called without a backend.
class no_state final : public keyed_context {
 public:
  std::optional<std::int64_t> value(std::string_view) const override { return std::nullopt; }
  void set_value(std::string_view, std::int64_t) override {}
  void clear(std::string_view) override {}
  std::optional<std::string> value_bytes(std::string_view) const override { return std::nullopt; }
  void set_value_bytes(std::string_view, std::string_view) override {}
  std::optional<std::string> map_get_bytes(std::string_view, std::string_view) const override {
    return std::nullopt;
  }
  void map_put_bytes(std::string_view, std::string_view, std::string_view) override {}
  void map_remove(std::string_view, std::string_view) override {}
  std::vector<std::pair<std::string, std::string>> map_entries_bytes(
      std::string_view) const override {
    return {};
  }
};

process_function pass_through() {
  return [](const record& r, keyed_context&, std::vector<record>& out) { out.push_back(r); };
}

}  // namespace

TEST_CASE("a key selector after a map runs in the map: one vertex less, uids and edges kept") {
  stream_environment env;
  env.set_parallelism(2);
  auto src = env.add_source("sequence_source", {{"count", "10"}});
  auto mapped = src.map([](const record& r) { return record{r.key, r.seq, r.value * 2, {}}; });
  mapped.key_by(key_of).process(pass_through()).add_sink("print_sink");
  const job_graph g = env.build_job_graph();

  REQUIRE(g.vertices.size() == 4);
  CHECK_FALSE(has_kind(g, "user_key_by"));
  for (std::size_t i = 0; i < g.vertices.size(); ++i) CHECK(g.vertices[i].id == i);
  // Generated uids keep the declared ids: the process was node 3, the sink node 4.
  CHECK(vertex_of(g, "user_process").uid == "user_process-3");
  CHECK(vertex_of(g, "print_sink").uid == "print_sink-4");
  const job_vertex& map = vertex_of(g, "user_map");
  REQUIRE(g.edges.size() == 3);
  CHECK(g.edges[0].source == 0);
  CHECK(g.edges[0].target == map.id);
  CHECK(g.edges[0].part == partitioning::forward);
  CHECK(g.edges[1].source == map.id);
  CHECK(g.edges[1].target == vertex_of(g, "user_process").id);
  CHECK(g.edges[1].part == partitioning::hash);
  CHECK(g.edges[2].part == partitioning::forward);

  const record out = std::get<map_function>(*map.function)(numbered(5));
  CHECK(out.value == 10);
  CHECK(out.key == 1010);  // keyed by what the map made of it
}

TEST_CASE("every callable that emits records of its own takes the selector, on each record") {
  no_state state;
  SECTION("flat map") {
    stream_environment env;
    env.add_source("sequence_source", {{"count", "10"}})
        .flat_map([](const record& r, std::vector<record>& out) {
          out.push_back(numbered(r.value));
          out.push_back(numbered(r.value + 1));
        })
        .key_by(key_of)
        .process(pass_through());
    const job_graph g = env.build_job_graph();
    const job_vertex& v = vertex_of(g, "user_flat_map");
    std::vector<record> out{numbered(99)};  // already there: not this call's, left alone
    const auto& fused = std::get<flat_map_function>(*v.function);
    fused(numbered(3), out);
    REQUIRE(out.size() == 3);
    CHECK(out[0].key == 7);
    CHECK(out[1].key == 1003);
    CHECK(out[2].key == 1004);
  }
  SECTION("keyed process with timers: its records and its timers' records") {
    stream_environment env;
    timed_process_function timed;
    timed.process = pass_through();
    timed.on_timer = [](const fired_timer& t, keyed_context&, std::vector<record>& out) {
      out.push_back(numbered(t.timestamp));
    };
    env.add_source("sequence_source", {{"count", "10"}})
        .key_by()
        .process(timed)
        .key_by(key_of)
        .process(pass_through());
    const job_graph g = env.build_job_graph();
    REQUIRE(g.vertices.size() == 3);
    const auto& fused = std::get<timed_process_function>(*g.vertices[1].function);
    std::vector<record> out;
    fused.process(numbered(4), state, out);
    fused.on_timer(fired_timer{8, time_domain::event_time, "", 0}, state, out);
    REQUIRE(out.size() == 2);
    CHECK(out[0].key == 1004);
    CHECK(out[1].key == 1008);
    // The process after it reads the fused one's records by key.
    CHECK(g.edges.back().part == partitioning::hash);
  }
  SECTION("stateful process: its records and those of its end of input") {
    stateful_process_function fn;
    fn.process = [](const record& r, operator_state_context&, std::vector<record>& out) {
      out.push_back(r);
    };
    fn.end_input = [](operator_state_context&, std::vector<record>& out) {
      out.push_back(numbered(50));
    };
    auto fused = with_key_selector(user_function(fn), key_of);
    REQUIRE(fused);
    const auto& keyed = std::get<stateful_process_function>(*fused);
    struct : operator_state_context {
      std::vector<std::string> list;
      std::vector<std::string>& list_bytes(std::string_view, list_redistribution) override {
        return list;
      }
      std::uint32_t subtask_index() const override { return 0; }
      std::uint32_t parallelism() const override { return 1; }
    } ops;
    std::vector<record> out;
    keyed.process(numbered(2), ops, out);
    keyed.end_input(ops, out);
    REQUIRE(out.size() == 2);
    CHECK(out[0].key == 1002);
    CHECK(out[1].key == 1050);
  }
  SECTION("timestamp assigner: the key rides along, once") {
    timestamp_assigner a;
    a.timestamp = [](const record& r) { return r.value; };
    auto fused = with_key_selector(user_function(a), key_of);
    REQUIRE(fused);
    const auto& keyed = std::get<timestamp_assigner>(*fused);
    REQUIRE(keyed.key);
    CHECK(keyed.key(numbered(6)) == 1006);
    CHECK(with_key_selector(*fused, key_of) == nullptr);
  }
  SECTION("a filter or a selector passes records through: nothing to fold into") {
    CHECK(with_key_selector(user_function(filter_function([](const record&) { return true; })),
                            key_of) == nullptr);
    CHECK(with_key_selector(user_function(key_function(key_of)), key_of) == nullptr);
  }
}

TEST_CASE("a key selector stays a vertex where folding it would change what others see") {
  SECTION("its input has another output") {
    stream_environment env;
    auto mapped =
        env.add_source("sequence_source", {{"count", "10"}}).map([](const record& r) { return r; });
    mapped.key_by(key_of).process(pass_through());
    mapped.add_sink("print_sink");
    CHECK(has_kind(env.build_job_graph(), "user_key_by"));
  }
  SECTION("two selectors on one input") {
    stream_environment env;
    auto mapped =
        env.add_source("sequence_source", {{"count", "10"}}).map([](const record& r) { return r; });
    mapped.key_by(key_of).process(pass_through());
    mapped.key_by(key_of).process(pass_through());
    const job_graph g = env.build_job_graph();
    int selectors = 0;
    for (const auto& v : g.vertices) selectors += v.kind == "user_key_by";
    CHECK(selectors == 2);
  }
  SECTION("its input is a built-in operator") {
    stream_environment env;
    env.add_source("sequence_source", {{"count", "10"}}).key_by(key_of).process(pass_through());
    CHECK(has_kind(env.build_job_graph(), "user_key_by"));
  }
  SECTION("fusion turned off") {
    stream_environment env;
    env.set_key_selector_fusion(false);
    env.add_source("sequence_source", {{"count", "10"}})
        .map([](const record& r) { return r; })
        .key_by(key_of)
        .process(pass_through());
    const job_graph g = env.build_job_graph();
    REQUIRE(g.vertices.size() == 4);
    CHECK(g.vertices[2].kind == "user_key_by");
  }
}
