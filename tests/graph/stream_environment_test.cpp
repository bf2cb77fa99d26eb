#include <catch2/catch.hpp>

#include "graph/stream_environment.hpp"

using namespace snapflow;
using namespace std::chrono_literals;

namespace {
stream_environment example_job() {
  stream_environment env;
  env.set_parallelism(4).enable_checkpointing(100ms);
  auto source = env.add_source("sequence_source", {{"count", "1000"}, {"keys", "8"}});
  source.uid("source").set_parallelism(2);
  auto summed = source.key_by().sum();
  summed.uid("sum");
  summed.add_sink("two_phase_commit_file_sink", {{"path", "out"}}).uid("sink");
  return env;
}
}  // namespace

TEST_CASE("stream graph becomes a job graph with resolved parallelism and partitioning") {
  auto env = example_job();
  job_graph g = env.build_job_graph();
  REQUIRE(g.vertices.size() == 3);
  CHECK(g.vertices[0].uid == "source");
  CHECK(g.vertices[0].parallelism == 2);
  CHECK(g.vertices[1].kind == "keyed_sum");
  CHECK(g.vertices[1].parallelism == 4);
  REQUIRE(g.edges.size() == 2);
  CHECK(g.edges[0].part == partitioning::hash);
  CHECK(g.edges[1].part == partitioning::forward);
  CHECK(g.id.size() == 32);
}

TEST_CASE("checkpointing settings: trigger the sources, acknowledge and confirm all") {
  auto env = example_job();
  job_graph g = env.build_job_graph();
  REQUIRE(g.checkpointing);
  CHECK(g.checkpointing->to_trigger == std::vector<vertex_id>{0});
  CHECK(g.checkpointing->to_acknowledge == std::vector<vertex_id>{0, 1, 2});
  CHECK(g.checkpointing->to_confirm == std::vector<vertex_id>{0, 1, 2});
  CHECK(g.checkpointing->config.interval == 100ms);
}

TEST_CASE("a job without enable_checkpointing has no checkpointing settings") {
  stream_environment env;
  env.add_source("sequence_source", {{"count", "10"}}).add_sink("print_sink");
  CHECK_FALSE(env.build_job_graph().checkpointing);
}

TEST_CASE("two sources are both trigger vertices") {
  stream_environment env;
  env.enable_checkpointing(10ms);
  auto a = env.add_source("sequence_source", {{"count", "10"}});
  auto b = env.add_source("line_source", {{"path", "in.txt"}});
  a.add_sink("print_sink");
  b.add_sink("print_sink");
  auto g = env.build_job_graph();
  CHECK(g.checkpointing->to_trigger == std::vector<vertex_id>{0, 1});
}

TEST_CASE("C++ callables become user kinds with their function attached") {
  stream_environment env;
  auto s = env.add_source("sequence_source", {{"count", "10"}})
               .map([](const record& r) { return record{r.key, r.seq, r.value * 2, {}}; })
               .filter([](const record& r) { return r.value > 0; })
               .key_by([](const record& r) { return r.key % 3; })
               .process([](const record& r, keyed_context& ctx, std::vector<record>& out) {
                 ctx.set_value("n", ctx.value("n").value_or(0) + 1);
                 out.push_back(r);
               });
  s.add_sink("print_sink");
  auto g = env.build_job_graph();
  REQUIRE(g.vertices.size() == 6);
  CHECK(g.vertices[1].kind == "user_map");
  CHECK(g.vertices[1].function != nullptr);
  CHECK(g.vertices[3].kind == "user_key_by");
  CHECK(g.vertices[4].kind == "user_process");
  CHECK(std::holds_alternative<process_function>(*g.vertices[4].function));
}

TEST_CASE("invalid graphs are refused with the vertex named") {
  SECTION("unknown kind") {
    stream_environment env;
    env.add_source("no_such_source").uid("src");
    CHECK_THROWS_WITH(env.build_job_graph(), Catch::Contains("src") && Catch::Contains("unknown operator kind"));
  }
  SECTION("missing required parameter") {
    stream_environment env;
    env.add_source("sequence_source").uid("src");
    CHECK_THROWS_WITH(env.build_job_graph(), Catch::Contains("count"));
  }
  SECTION("forward edge between different parallelisms") {
    stream_environment env;
    auto s = env.add_source("sequence_source", {{"count", "1"}});
    s.set_parallelism(2);
    s.forward().map("map_identity").set_parallelism(3);
    CHECK_THROWS_WITH(env.build_job_graph(), Catch::Contains("forward edge"));
  }
  SECTION("duplicate uid") {
    stream_environment env;
    auto s = env.add_source("sequence_source", {{"count", "1"}});
    s.uid("a");
    CHECK_THROWS_WITH(s.map("map_identity").uid("a"), Catch::Contains("already used"));
  }
  SECTION("keyed operator without key_by") {
    stream_environment env;
    env.add_source("sequence_source", {{"count", "1"}}).map("keyed_sum");
    CHECK_THROWS_WITH(env.build_job_graph(), Catch::Contains("hash-partitioned"));
  }
}
