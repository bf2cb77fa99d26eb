#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "graph/job_file.hpp"
#include "tests/graph/job_file_test_support.hpp"
#include "graph/job_graph_codec.hpp"
#include "graph/stream_environment.hpp"

using namespace snapflow;
using snapflow::testing::check_error;
using snapflow::testing::load_ok;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

const std::string source_dir = SNAPFLOW_SOURCE_DIR;

// The job of examples/exactly-once-sum.toml, declared through the C++ API.
job_graph exactly_once_sum_through_environment() {
  stream_environment env;
  env.set_job_name("exactly-once-sum")
      .set_parallelism(4)
      .enable_checkpointing(100ms, checkpointing_mode::exactly_once);
  auto source = env.add_source("sequence_source", {{"count", "1000000"}, {"keys", "16"}});
  source.uid("source").set_parallelism(2);
  auto sum = source.key_by().sum();
  sum.uid("sum").set_parallelism(4);
  sum.add_sink("two_phase_commit_file_sink", {{"path", "out/exactly-once-sum"}})
      .uid("sink")
      .set_parallelism(4);
  return env.build_job_graph();
}

// One sequence source, with these lines in [checkpointing].
std::string source_job_checkpointing(const std::string& lines) {
  return "[checkpointing]\ninterval_ms = 10\n" + lines +
         "\n[[operator]]\nuid = \"src\"\nkind = \"sequence_source\"\nparams = { count = 10 }\n";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Good files

TEST_CASE("the exactly-once-sum example loads and equals the same job built in C++") {
  auto r = load_job_file(source_dir + "/examples/exactly-once-sum.toml");
  INFO(r);
  REQUIRE(r.ok());
  job_graph loaded = r.value();
  const job_graph expected = exactly_once_sum_through_environment();
  CHECK(loaded.id.size() == 32);
  loaded.id = expected.id;  // both are random
  CHECK(loaded == expected);
  REQUIRE(loaded.checkpointing);
  CHECK(loaded.checkpointing->config.interval == 100ms);
  CHECK(loaded.checkpointing->config.mode == checkpointing_mode::exactly_once);
  CHECK(loaded.checkpointing->to_trigger == std::vector<vertex_id>{0});
}

TEST_CASE("a loaded job file survives a msgpack round trip") {
  auto r = load_job_file(source_dir + "/examples/exactly-once-sum.toml");
  REQUIRE(r.ok());
  auto decoded = decode_job_graph(encode_job_graph(r.value()));
  REQUIRE(decoded.ok());
  CHECK(decoded.value() == r.value());
}

TEST_CASE("every [checkpointing] key sets its checkpoint_config field") {
  const job_graph g = load_ok(R"([checkpointing]
interval_ms = 250
mode = "at_least_once"
timeout_ms = 60000
min_pause_ms = 20
max_concurrent = 3
tolerable_failures = 2
retained = 5
retention = "retain_on_cancellation"
unaligned = false
checkpoint_dir = "state/chk"
savepoint_dir = "state/sp"
stats_history_size = 50
state_backend = "hashmap"

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
)");
  REQUIRE(g.checkpointing);
  const checkpoint_config& c = g.checkpointing->config;
  CHECK(c.interval == 250ms);
  CHECK(c.mode == checkpointing_mode::at_least_once);
  CHECK(c.timeout == 60s);
  CHECK(c.min_pause == 20ms);
  CHECK(c.max_concurrent == 3);
  CHECK(c.tolerable_failures == 2);
  CHECK(c.retained == 5);
  CHECK(c.retention == externalized_retention::retain_on_cancellation);
  CHECK_FALSE(c.unaligned);
  CHECK(c.checkpoint_dir == "state/chk");
  CHECK(c.savepoint_dir == "state/sp");
  CHECK(c.stats_history_size == 50);
  CHECK(c.state_backend == "hashmap");
  CHECK(g.checkpointing->to_trigger == std::vector<vertex_id>{0});
  CHECK(g.checkpointing->to_acknowledge == std::vector<vertex_id>{0, 1});
  CHECK(g.checkpointing->to_confirm == std::vector<vertex_id>{0, 1});
}

TEST_CASE("unaligned checkpoints can be enabled from a job file") {
  const job_graph g = load_ok(R"([checkpointing]
interval_ms = 10
unaligned = true

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }
)");
  REQUIRE(g.checkpointing);
  CHECK(g.checkpointing->config.unaligned);
}

TEST_CASE("the byte bound of channels and buffer debloating are set in [checkpointing]; bad "
          "values are refused with their key") {
  const job_graph g = load_ok(source_job_checkpointing(
      "max_in_flight_bytes = 65536\nbuffer_debloat = true\nbuffer_debloat_target_ms = 500\n"));
  REQUIRE(g.checkpointing);
  CHECK(g.checkpointing->config.max_in_flight_bytes == 65536);
  CHECK(g.checkpointing->config.buffer_debloat);
  CHECK(g.checkpointing->config.buffer_debloat_target == std::chrono::milliseconds(500));
  const job_graph defaults = load_ok(source_job_checkpointing(""));
  CHECK(defaults.checkpointing->config.max_in_flight_bytes == 0);
  CHECK_FALSE(defaults.checkpointing->config.buffer_debloat);

  for (const char* bad : {"max_in_flight_bytes = -1\n", "max_in_flight_bytes = 1099511627776\n"}) {
    auto r = parse_job_file(source_job_checkpointing(bad), "job.toml");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("max_in_flight_bytes must be between 0 and"));
  }
  auto target = parse_job_file(
      source_job_checkpointing("max_in_flight_bytes = 4096\nbuffer_debloat = true\n"
                               "buffer_debloat_target_ms = 0\n"),
      "job.toml");
  REQUIRE_FALSE(target);
  CHECK_THAT(target.error().message, Catch::Contains("buffer_debloat_target_ms must be between 1"));
  auto unbounded = parse_job_file(source_job_checkpointing("buffer_debloat = true\n"), "job.toml");
  REQUIRE_FALSE(unbounded);
  CHECK_THAT(unbounded.error().message,
             Catch::Contains("buffer_debloat needs max_in_flight_bytes"));
  auto wrong_type =
      parse_job_file(source_job_checkpointing("max_in_flight_bytes = \"64k\"\n"), "job.toml");
  REQUIRE_FALSE(wrong_type);
  CHECK_THAT(wrong_type.error().message, Catch::Contains("expected an integer"));
}

TEST_CASE("the state backend is chosen in [checkpointing]; an unknown one is refused") {
  const job_graph g = load_ok(source_job_checkpointing("state_backend = \"rocksdb\"\n"));
  REQUIRE(g.checkpointing);
  CHECK(g.checkpointing->config.state_backend == "rocksdb");
  auto r = parse_job_file(source_job_checkpointing("state_backend = \"leveldb\"\n"), "job.toml");
  REQUIRE_FALSE(r.ok());
  std::ostringstream os;
  os << r;
  CHECK_THAT(os.str(), Catch::Contains("unknown checkpoint state_backend 'leveldb'") &&
                           Catch::Contains("hashmap") && Catch::Contains("rocksdb"));
}

TEST_CASE("incremental checkpoints are chosen in [checkpointing], off by default") {
  const job_graph g =
      load_ok(source_job_checkpointing("state_backend = \"rocksdb\"\nincremental = true\n"));
  REQUIRE(g.checkpointing);
  CHECK(g.checkpointing->config.incremental);
  const job_graph plain = load_ok(source_job_checkpointing(""));
  CHECK_FALSE(plain.checkpointing->config.incremental);
  check_error(R"([checkpointing]
interval_ms = 10
incremental = "yes"
)",
              "checkpointing.incremental", 3, "");
}

TEST_CASE("a job file without [checkpointing] has checkpointing off") {
  const job_graph g = load_ok(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }
)");
  CHECK_FALSE(g.checkpointing);
}

TEST_CASE("[checkpointing] without interval_ms means no periodic checkpoints") {
  const job_graph g = load_ok(R"([checkpointing]
mode = "exactly_once"

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }
)");
  REQUIRE(g.checkpointing);
  CHECK_FALSE(g.checkpointing->config.interval);
  CHECK(g.checkpointing->config == checkpoint_config{});
}

TEST_CASE("without [job] the job takes the C++ API's defaults") {
  const job_graph g = load_ok(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }
)");
  const stream_graph defaults;
  CHECK(g.name == defaults.job_name);
  REQUIRE(g.vertices.size() == 1);
  CHECK(g.vertices[0].parallelism == defaults.default_parallelism);
  CHECK(g.vertices[0].max_parallelism == defaults.default_max_parallelism);
  CHECK(g.vertices[0].name == "sequence_source");
}

TEST_CASE("vertex ids follow topological order even when consumers are declared first") {
  const job_graph g = load_ok(R"([[operator]]
uid = "sink"
kind = "print_sink"
input = "sum"

[[operator]]
uid = "sum"
kind = "keyed_sum"
input = "src"

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }
)");
  REQUIRE(g.vertices.size() == 3);
  CHECK(g.vertices[0].uid == "src");
  CHECK(g.vertices[1].uid == "sum");
  CHECK(g.vertices[2].uid == "sink");
  for (vertex_id i = 0; i < 3; ++i) CHECK(g.vertices[i].id == i);
  CHECK(g.edges ==
        std::vector<job_edge>{{0, 1, partitioning::hash}, {1, 2, partitioning::forward}});
}

TEST_CASE("partition defaults: forward at equal parallelism, else rebalance; keyed kinds hash") {
  const job_graph g = load_ok(R"([job]
parallelism = 2

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "same"
kind = "map_identity"
input = "src"

[[operator]]
uid = "wider"
kind = "map_identity"
input = "same"
parallelism = 3

[[operator]]
uid = "sum"
kind = "keyed_sum"
input = "wider"
parallelism = 3

[[operator]]
uid = "everywhere"
kind = "print_sink"
input = "sum"
partition = "broadcast"
)");
  CHECK(g.edges == std::vector<job_edge>{{0, 1, partitioning::forward},
                                         {1, 2, partitioning::rebalance},
                                         {2, 3, partitioning::hash},
                                         {3, 4, partitioning::broadcast}});
  CHECK(g.vertices[1].parallelism == 2);
  CHECK(g.vertices[4].parallelism == 2);
}

TEST_CASE("inputs = [...] gives an operator several inputs and every source is triggered") {
  const job_graph g = load_ok(R"([checkpointing]
interval_ms = 50

[[operator]]
uid = "numbers"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "lines"
kind = "line_source"
params = { path = "in.txt" }

[[operator]]
uid = "both"
kind = "print_sink"
inputs = ["numbers", "lines"]
partition = "rebalance"
)");
  CHECK(g.edges == std::vector<job_edge>{{0, 2, partitioning::rebalance},
                                         {1, 2, partitioning::rebalance}});
  CHECK(g.checkpointing->to_trigger == std::vector<vertex_id>{0, 1});
}

TEST_CASE("params of every TOML type are stored as strings, checked against a custom registry") {
  operator_registry registry;
  registry.add({"test_source",
                operator_role::source,
                {{"n", param_type::integer, true, "", ""},
                 {"label", param_type::string, false, "", ""},
                 {"flag", param_type::boolean, false, "", ""}},
                ""});
  const job_graph g = load_ok(R"([[operator]]
uid = "src"
kind = "test_source"
name = "custom"
max_parallelism = 7
params = { n = -5, label = "a b", flag = true }
)",
                              registry);
  REQUIRE(g.vertices.size() == 1);
  CHECK(g.vertices[0].params ==
        std::map<std::string, std::string>{{"n", "-5"}, {"label", "a b"}, {"flag", "true"}});
  CHECK(g.vertices[0].name == "custom");
  CHECK(g.vertices[0].max_parallelism == 7);
  // The registry a file is checked against is the one passed in, not the built-in one.
  auto builtin = parse_job_file(R"([[operator]]
uid = "src"
kind = "test_source"
params = { n = 1 }
)",
                                "job.toml");
  REQUIRE_FALSE(builtin.ok());
  CHECK(builtin.error().key == "operator[0].kind");
}

TEST_CASE("job_file_error formats as FILE:LINE: key 'KEY': MESSAGE, leaving out what is absent") {
  CHECK(job_file_error{"a.toml", "job.name", 3, "bad"}.what() == "a.toml:3: key 'job.name': bad");
  CHECK(job_file_error{"a.toml", "", 7, "syntax"}.what() == "a.toml:7: syntax");
  CHECK(job_file_error{"a.toml", "", 0, "missing"}.what() == "a.toml: missing");
}

// ---------------------------------------------------------------------------------------------
// Bad files: each names the file, the key and the line

TEST_CASE("job file error: unknown operator kind") {
  check_error(R"([[operator]]
uid = "src"
kind = "no_such_kind"
)",
              "operator[0].kind", 3,
              "operator 'src': unknown operator kind 'no_such_kind' (known kinds: ");
}

TEST_CASE("job file error: input names an unknown uid") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "sorce"
)",
              "operator[1].input", 9, "operator 'sink': input 'sorce' names no operator");
}

TEST_CASE("job file error: an entry of inputs names an unknown uid") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
inputs = ["src",
          "nope"]
)",
              "operator[1].inputs[1]", 10, "input 'nope' names no operator");
}

TEST_CASE("job file error: a non-source operator without input") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
)",
              "operator[1].input", 6, "operator 'sink' (print_sink) needs an input");
}

TEST_CASE("job file error: a cycle between operators") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "a"
kind = "map_identity"
inputs = ["src", "b"]

[[operator]]
uid = "b"
kind = "map_identity"
input = "a"

[[operator]]
uid = "sink"
kind = "print_sink"
input = "b"
)",
              "operator[1].inputs", 9, "operator 'a' is on a cycle: a -> b -> a");
}

TEST_CASE("job file error: an operator that reads itself") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "loop"
kind = "map_identity"
inputs = ["src", "loop"]
)",
              "operator[1].inputs", 9, "operator 'loop' is on a cycle: loop -> loop");
}

TEST_CASE("job file error: operator parallelism 0") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
parallelism = 0
params = { count = 10 }
)",
              "operator[0].parallelism", 4, "parallelism must be between 1 and 32768 (got 0)");
}

TEST_CASE("job file error: job parallelism 0") {
  check_error(R"([job]
name = "x"
parallelism = 0
)",
              "job.parallelism", 3, "parallelism must be between 1 and 32768 (got 0)");
}

TEST_CASE("job file error: max_parallelism below the operator's parallelism") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
parallelism = 8
max_parallelism = 4
params = { count = 10 }
)",
              "operator[0].max_parallelism", 5,
              "max_parallelism must be at least the parallelism (8), got 4");
}

TEST_CASE("job file error: forward edge between different parallelisms") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
parallelism = 2
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
partition = "forward"
parallelism = 3
)",
              "operator[1].partition", 11,
              "forward partition from 'src' (parallelism 2) to 'sink' (parallelism 3) needs "
              "equal parallelism");
}

TEST_CASE("job file error: unknown key at the top level") {
  check_error(R"([jobs]
name = "x"
)",
              "jobs", 1,
              "unknown key 'jobs' in the job file (known keys: job, checkpointing, restart, "
              "operator)");
}

TEST_CASE("job file error: unknown key in [job]") {
  check_error(R"([job]
nmae = "x"
)",
              "job.nmae", 2, "unknown key 'nmae' in [job] (known keys: name, parallelism, ");
}

TEST_CASE("job file error: unknown key in [checkpointing]") {
  check_error(R"([checkpointing]
interval_ms = 10
intervall_ms = 5
)",
              "checkpointing.intervall_ms", 3, "unknown key 'intervall_ms' in [checkpointing]");
}

TEST_CASE("job file error: unknown key in [[operator]], the first one in the file") {
  check_error(R"([[operator]]
uid = "src"
zzz = 1
aaa = 2
kind = "sequence_source"
)",
              "operator[0].zzz", 3, "unknown key 'zzz' in [[operator]] (known keys: uid, kind");
}

TEST_CASE("job file error: unknown parameter of an operator kind") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10, cnt = 5 }
)",
              "operator[0].params.cnt", 4,
              "unknown parameter 'cnt' for operator kind 'sequence_source' (known parameters: "
              "count, keys, rate, start)");
}

TEST_CASE("job file error: a parameter out of its bounds is refused at submission, naming the "
          "key, the bounds and the value") {
  // A source alone (its params on line 4), or an operator reading from one (params on line 10).
  const auto op = [](const std::string& kind, const std::string& params) {
    const std::string own = "[[operator]]\nuid = \"op\"\nkind = \"" + kind + "\"\n";
    if (kind == "sequence_source") return own + "params = { " + params + " }\n";
    return "[[operator]]\nuid = \"src\"\nkind = \"sequence_source\"\nparams = { count = 1 }\n\n" +
           own + "input = \"src\"\nparams = { " + params + " }\n";
  };
  check_error(op("sequence_source", "count = -1"), "operator[0].params.count", 4,
              "parameter 'count' of operator kind 'sequence_source' must be at least 0 (got -1)");
  check_error(op("sequence_source", "count = 5, keys = 0"), "operator[0].params.keys", 4,
              "must be at least 1 (got 0)");
  check_error(op("sequence_source", "count = 5, rate = -3"), "operator[0].params.rate", 4,
              "must be at least 0 (got -3)");
  check_error(op("map_identity", "delay_us_per_record = 1000001"),
              "operator[1].params.delay_us_per_record", 10, "between 0 and 1000000 (got 1000001)");
  check_error(op("discard_sink", "delay_us_per_record = -1"),
              "operator[1].params.delay_us_per_record", 10, "between 0 and 1000000 (got -1)");
  check_error(op("flat_map_repeat", "times = 2000000"), "operator[1].params.times", 10,
              "between 0 and 1000000");
  check_error(op("filter_modulo", "modulus = 0"), "operator[1].params.modulus", 10,
              "must be at least 1 (got 0)");
  check_error(op("filter_modulo", "modulus = 3, remainder = 3"), "operator[1].params.remainder", 10,
              "must be below modulus (got 3, modulus 3)");
  check_error(op("keyed_sum", "state_bytes = -1"), "operator[1].params.state_bytes", 10,
              "between 0 and 1073741824");
  check_error(op("two_phase_commit_file_sink", "path = \"  \""), "operator[1].params.path", 10,
              "must name a file or folder");
  // At the bounds they are taken.
  const auto at_bounds = parse_job_file(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 0, keys = 1, rate = 0, start = 0 }

[[operator]]
uid = "f"
kind = "filter_modulo"
input = "src"
params = { modulus = 3, remainder = 2 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "f"
)", "job.toml");
  INFO(at_bounds);
  CHECK(at_bounds.ok());
}

TEST_CASE("job file error: parameter for a kind that takes none") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "id"
kind = "flat_map_split_words"
input = "src"

[operator.params]
factor = 2
)",
              "operator[1].params.factor", 12, "(it takes no parameters)");
}

TEST_CASE("job file error: a required parameter is missing") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { keys = 4 }
)",
              "operator[0].params.count", 4,
              "operator 'src': operator kind 'sequence_source' requires parameter 'count'");
}

TEST_CASE("job file error: wrong value type for an integer key") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
parallelism = "two"
params = { count = 10 }
)",
              "operator[0].parallelism", 4, "wrong value type: expected an integer, got a string");
}

TEST_CASE("job file error: wrong value type for a parameter") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = "many" }
)",
              "operator[0].params.count", 4, "wrong value type: expected an integer, got a string");
}

TEST_CASE("job file error: wrong value type in [checkpointing]") {
  check_error(R"([checkpointing]
interval_ms = 1.5
)",
              "checkpointing.interval_ms", 2, "wrong value type: expected an integer, got a float");
  check_error(R"([checkpointing]
unaligned = "yes"
)",
              "checkpointing.unaligned", 2, "wrong value type: expected a boolean, got a string");
}

TEST_CASE("job file error: wrong value type for uid and input") {
  check_error(R"([[operator]]
uid = 5
)",
              "operator[0].uid", 2, "wrong value type: expected a string, got an integer");
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = ["src"]
)",
              "operator[1].input", 9, "wrong value type: expected a string, got an array");
}

TEST_CASE("job file error: [operator] as a single table instead of [[operator]]") {
  check_error(R"([operator]
uid = "src"
)",
              "operator", 1, "wrong value type: expected [[operator]] tables, got a table");
}

TEST_CASE("job file error: duplicate uid") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "src"
kind = "print_sink"
input = "src"
)",
              "operator[1].uid", 7, "duplicate uid 'src' (already used by operator[0] on line 2)");
}

TEST_CASE("job file error: missing or blank uid and missing kind") {
  check_error(R"([[operator]]
kind = "sequence_source"
)",
              "operator[0].uid", 1, "missing required key 'uid'");
  check_error(R"([[operator]]
uid = ""
)",
              "operator[0].uid", 2, "uid must not be blank");
  check_error(R"([[operator]]
uid = "src"
)",
              "operator[0].kind", 1, "operator 'src': missing required key 'kind'");
}

TEST_CASE("job file error: a job without operators") {
  check_error(R"([job]
name = "empty"
)",
              "operator", 1, "the job has no operators");
}

TEST_CASE("job file error: a source with an input") {
  check_error(R"([[operator]]
uid = "a"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "b"
kind = "sequence_source"
input = "a"
params = { count = 10 }
)",
              "operator[1].input", 9,
              "operator 'b' is a source (sequence_source) and takes no input");
}

TEST_CASE("job file error: a sink used as an input") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"

[[operator]]
uid = "after"
kind = "print_sink"
input = "sink"
)",
              "operator[2].input", 14, "input 'sink' is a sink (print_sink), which has no output");
}

TEST_CASE("job file error: a keyed operator with a partition other than hash") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sum"
kind = "keyed_sum"
input = "src"
partition = "rebalance"
)",
              "operator[1].partition", 10,
              "operator 'sum' is keyed (keyed_sum) and reads its inputs by key: partition must "
              "be hash (got rebalance)");
}

TEST_CASE("job file error: unknown partition") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
partition = "shuffle"
)",
              "operator[1].partition", 10,
              "unknown partition 'shuffle' (expected forward, hash, rebalance or broadcast)");
}

TEST_CASE("job file error: both input and inputs") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
inputs = ["src"]
)",
              "operator[1].inputs", 10, "set either input or inputs, not both");
}

TEST_CASE("job file error: an invalid checkpoint setting names its key") {
  check_error(R"([checkpointing]
interval_ms = 100
timeout_ms = 0
)",
              "checkpointing.timeout_ms", 3, "checkpoint timeout_ms must be between 1 and 2592000000 (30 days) (got 0)");
  check_error(R"([checkpointing]
interval_ms = 0
)",
              "checkpointing.interval_ms", 2, "checkpoint interval_ms must be between 1 and 2592000000 (30 days) (got 0)");
  check_error(R"([checkpointing]
mode = "at_least_once"
unaligned = true
)",
              "checkpointing.unaligned", 3, "checkpoint unaligned requires mode exactly_once");
}

TEST_CASE("inline_state_max_bytes: set from a job file, refused out of range with its key") {
  const job_graph g = load_ok(R"([checkpointing]
interval_ms = 100
inline_state_max_bytes = 4096

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }
)");
  REQUIRE(g.checkpointing);
  CHECK(g.checkpointing->config.inline_state_max_bytes == 4096);
  // 0 turns inlining off; the largest accepted value is 1 MiB.
  CHECK(load_ok(R"([checkpointing]
interval_ms = 100
inline_state_max_bytes = 0

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }
)")
            .checkpointing->config.inline_state_max_bytes == 0);

  check_error(R"([checkpointing]
interval_ms = 100
inline_state_max_bytes = -1
)",
              "checkpointing.inline_state_max_bytes", 3,
              "inline_state_max_bytes must be between 0 and 1048576 (1 MiB) (got -1)");
  check_error(R"([checkpointing]
interval_ms = 100
inline_state_max_bytes = 1048577
)",
              "checkpointing.inline_state_max_bytes", 3,
              "inline_state_max_bytes must be between 0 and 1048576 (1 MiB) (got 1048577)");
  check_error(R"([checkpointing]
inline_state_max_bytes = 99999999999
)",
              "checkpointing.inline_state_max_bytes", 2,
              "must be between -2147483648 and 2147483647 (got 99999999999)");
  check_error(R"([checkpointing]
inline_state_max_bytes = "1KiB"
)",
              "checkpointing.inline_state_max_bytes", 2,
              "wrong value type: expected an integer, got a string");
}

TEST_CASE("job file error: unknown checkpointing mode and retention") {
  check_error(R"([checkpointing]
mode = "twice"
)",
              "checkpointing.mode", 2,
              "unknown mode 'twice' (expected exactly_once or at_least_once)");
  check_error(R"([checkpointing]
retention = "forever"
)",
              "checkpointing.retention", 2, "unknown retention 'forever'");
}

TEST_CASE("job file error: TOML syntax error with its line") {
  auto r = parse_job_file(R"([job]
name = "x"
parallelism = = 2
)",
                          "job.toml");
  REQUIRE_FALSE(r.ok());
  const job_file_error& e = r.error();
  CHECK(e.file == "job.toml");
  CHECK(e.line == 3);
  CHECK(e.key.empty());
  CHECK_THAT(e.message, Contains("TOML syntax error"));
  CHECK_THAT(e.what(), Catch::StartsWith("job.toml:3: TOML syntax error: "));
}

TEST_CASE("job file error: missing file") {
  const std::string path = source_dir + "/examples/no-such-job.toml";
  auto r = load_job_file(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().file == path);
  CHECK(r.error().line == 0);
  CHECK(r.error().what() == path + ": cannot read job file: no such file");
}

TEST_CASE("job file error: a directory instead of a file") {
  auto r = load_job_file(source_dir + "/examples");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().what(), Contains("cannot read job file: it is a directory"));
}

TEST_CASE("job file error: binary junk is a syntax error, not a crash") {
  const std::string junk("\x00\xff\xfe[[[\n= \"\x80", 11);
  auto r = parse_job_file(junk, "junk.toml");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Contains("TOML syntax error"));
  CHECK(r.error().line >= 1);
}
