#include <catch2/catch.hpp>

#include <string>

#include "graph/job_file.hpp"
#include "graph/job_file_writer.hpp"
#include "graph/job_graph_codec.hpp"
#include "graph/stream_environment.hpp"

using namespace snapflow;
using namespace std::chrono_literals;

namespace {

// A job of every sort of vertex a program submits: a built-in source with integer parameters,
// callables (user_map, user_key_by, user_process), a kind only workers know, a built-in sink.
job_graph program_job() {
  stream_environment env;
  env.set_job_name("written").set_parallelism(3).enable_checkpointing(40ms);
  restart_strategy_config restart;
  restart.type = restart_strategy_config::kind::fixed_delay;
  restart.max_attempts = 4;
  restart.delay_ms = 250;
  env.set_restart_strategy(restart);
  env.set_max_in_flight_bytes(65'536).enable_buffer_debloat(500ms);
  auto source = env.add_source("sequence_source", {{"count", "500"}, {"rate", "10"}});
  source.uid("source").set_parallelism(2);
  auto mapped = source.map([](const record& r) { return r; }, "identity");
  mapped.uid("identity");
  auto custom = mapped.map("times_ten", {{"factor", "10"}});
  custom.uid("x10").custom_role(operator_role::transform);
  custom.key_by([](const record& r) { return r.key; }, "by key")
      .process([](const record&, keyed_context&, std::vector<record>&) {}, "count")
      .uid("count")
      .set_max_parallelism(256)
      .add_sink("two_phase_commit_file_sink", {{"path", "out/x"}})
      .uid("sink");
  job_graph g = env.build_job_graph();
  g.program = job_program{"writer test 1", "00ff"};
  return g;
}

const job_vertex& by_uid(const job_graph& g, const std::string& uid) {
  const job_vertex* v = g.find_vertex_by_uid(uid);
  REQUIRE(v != nullptr);
  return *v;
}

}  // namespace

TEST_CASE("a job graph written as a job file reads back as the same job, callables aside") {
  const job_graph g = program_job();
  auto text = write_job_file(g);
  REQUIRE(text.ok());
  INFO(*text);
  auto parsed = parse_job_file(*text, "written.toml");
  INFO((parsed.ok() ? std::string("ok") : parsed.error().what()));
  REQUIRE(parsed.ok());
  const job_graph& back = parsed.value();
  CHECK(back.name == g.name);
  CHECK(back.program == g.program);
  CHECK(back.restart == g.restart);
  REQUIRE(back.checkpointing.has_value());
  CHECK(back.checkpointing->config == g.checkpointing->config);
  REQUIRE(back.vertices.size() == g.vertices.size());
  for (const auto& v : g.vertices) {
    const job_vertex& w = by_uid(back, v.uid);
    CHECK(w.kind == v.kind);
    CHECK(w.name == v.name);
    CHECK(w.params == v.params);
    CHECK(w.parallelism == v.parallelism);
    CHECK(w.max_parallelism == v.max_parallelism);
    CHECK(w.custom_role == v.custom_role);
    CHECK_FALSE(w.function);
    const auto ins = g.inputs_of(v.id);
    const auto back_ins = back.inputs_of(w.id);
    REQUIRE(ins.size() == back_ins.size());
    for (std::size_t i = 0; i < ins.size(); ++i) {
      CHECK(back.find_vertex(back_ins[i]->source)->uid == g.find_vertex(ins[i]->source)->uid);
      CHECK(back_ins[i]->part == ins[i]->part);
    }
  }
}

TEST_CASE("a job graph's program round trips through msgpack; without one it is absent") {
  job_graph g = program_job();
  auto decoded = decode_job_graph(encode_job_graph(g));
  REQUIRE(decoded.ok());
  CHECK(decoded->program == g.program);
  g.program.reset();
  decoded = decode_job_graph(encode_job_graph(g));
  REQUIRE(decoded.ok());
  CHECK_FALSE(decoded->program.has_value());
}

TEST_CASE("a job file cannot run a C++ callable unless it names its program") {
  const std::string ops =
      "[[operator]]\nuid = \"s\"\nkind = \"sequence_source\"\nparams = { count = 1 }\n\n"
      "[[operator]]\nuid = \"m\"\nkind = \"user_map\"\ninput = \"s\"\n";
  auto without = parse_job_file("[job]\nname = \"j\"\n\n" + ops, "j.toml");
  REQUIRE_FALSE(without.ok());
  CHECK(without.error().key == "operator[1].kind");
  CHECK(without.error().message.find("runs a C++ callable") != std::string::npos);

  auto with = parse_job_file(
      "[job]\nname = \"j\"\nprogram = \"p 1\"\nprogram_fingerprint = \"0a1b\"\n\n" + ops, "j.toml");
  INFO((with.ok() ? std::string("ok") : with.error().what()));
  REQUIRE(with.ok());
  CHECK(with.value().program == job_program{"p 1", "0a1b"});
}

TEST_CASE("a job file's program fingerprint must be lowercase hex") {
  for (const char* bad : {"\"\"", "\"XYZ\"", "\"0A\"", "12"}) {
    auto r = parse_job_file("[job]\nprogram_fingerprint = " + std::string(bad) +
                                "\n\n[[operator]]\nuid = \"s\"\nkind = \"sequence_source\"\n"
                                "params = { count = 1 }\n",
                            "j.toml");
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().key == "job.program_fingerprint");
  }
  auto no_fingerprint = parse_job_file(
      "[job]\nprogram = \"p\"\n\n[[operator]]\nuid = \"s\"\nkind = \"sequence_source\"\n"
      "params = { count = 1 }\n",
      "j.toml");
  REQUIRE_FALSE(no_fingerprint.ok());
  CHECK(no_fingerprint.error().key == "job.program");
}

TEST_CASE("a vertex whose inputs are partitioned differently cannot be written as a job file") {
  stream_environment env;
  auto a = env.add_source("sequence_source", {{"count", "1"}});
  a.uid("a");
  auto b = env.add_source("sequence_source", {{"count", "1"}});
  b.uid("b");
  job_graph g = env.build_job_graph();
  job_vertex join{2, "join", "join", "map_identity", {}, 1, 128, {}};
  g.vertices.push_back(join);
  g.edges.push_back({0, 2, partitioning::forward});
  g.edges.push_back({1, 2, partitioning::broadcast});
  auto text = write_job_file(g);
  REQUIRE_FALSE(text.ok());
  CHECK(text.err().message.find("vertex 'join'") != std::string::npos);
}
