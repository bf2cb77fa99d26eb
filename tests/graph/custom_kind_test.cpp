// Operator kinds only custom worker binaries know: a job file names them with their role, the
// job graph carries that role (custom_role), validate() checks the shape by it, and the codec
// writes it only when set so existing encodings keep their bytes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "graph/job_file.hpp"
#include "graph/job_graph_codec.hpp"
#include "graph/stream_environment.hpp"
#include "tests/graph/job_file_test_support.hpp"

using namespace snapflow;
using snapflow::testing::check_error;
using snapflow::testing::load_ok;
using Catch::Contains;

namespace {

const std::string source_dir = SNAPFLOW_SOURCE_DIR;

// my_source (source) -> my_map (transform) -> my_agg (keyed) -> my_sink (sink): no kind here
// is built in.
constexpr std::string_view all_custom_roles = R"([[operator]]
uid = "src"
kind = "my_source"
role = "source"
params = { topic = "clicks", partitions = 3, compacted = true }

[[operator]]
uid = "map"
kind = "my_map"
role = "transform"
input = "src"

[[operator]]
uid = "agg"
kind = "my_agg"
role = "keyed"
input = "map"

[[operator]]
uid = "out"
kind = "my_sink"
role = "sink"
input = "agg"
)";

job_vertex vertex(vertex_id id, std::string kind, std::optional<operator_role> role,
                  std::map<std::string, std::string> params = {}) {
  job_vertex v;
  v.id = id;
  v.uid = "v" + std::to_string(id);
  v.name = kind;
  v.kind = std::move(kind);
  v.custom_role = role;
  v.params = std::move(params);
  return v;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

TEST_CASE("custom kinds of every role parse and validate; their params pass unchecked") {
  const job_graph g = load_ok(all_custom_roles);
  REQUIRE(g.vertices.size() == 4);
  CHECK(g.vertices[0].kind == "my_source");
  CHECK(g.vertices[0].custom_role == operator_role::source);
  CHECK(g.vertices[1].custom_role == operator_role::transform);
  CHECK(g.vertices[2].custom_role == operator_role::keyed);
  CHECK(g.vertices[3].custom_role == operator_role::sink);
  // Values keep the parser's text form for each TOML type.
  const std::map<std::string, std::string> params{
      {"topic", "clicks"}, {"partitions", "3"}, {"compacted", "true"}};
  CHECK(g.vertices[0].params == params);
  CHECK(g.vertices[0].name == "my_source");
  // A keyed custom kind reads by key, as a built-in keyed one does.
  REQUIRE(g.inputs_of(g.vertices[2].id).size() == 1);
  CHECK(g.inputs_of(g.vertices[2].id).front()->part == partitioning::hash);
  CHECK_FALSE(validate(g, operator_registry::builtin()));
}

TEST_CASE("the C++ API declares custom kinds with their role, as a job file does") {
  stream_environment env;
  auto src = env.add_source("my_source", {{"topic", "clicks"}, {"partitions", "3"},
                                          {"compacted", "true"}});
  src.uid("src").custom_role(operator_role::source);
  auto map = src.map("my_map");
  map.uid("map").custom_role(operator_role::transform);
  auto agg = map.key_by().process("my_agg");
  agg.uid("agg").custom_role(operator_role::keyed);
  agg.add_sink("my_sink").uid("out").custom_role(operator_role::sink);
  const job_graph built = env.build_job_graph();

  const job_graph loaded = load_ok(all_custom_roles);
  REQUIRE(built.vertices.size() == loaded.vertices.size());
  for (std::size_t i = 0; i < built.vertices.size(); ++i) {
    INFO("vertex " << i);
    CHECK(built.vertices[i].kind == loaded.vertices[i].kind);
    CHECK(built.vertices[i].uid == loaded.vertices[i].uid);
    CHECK(built.vertices[i].custom_role == loaded.vertices[i].custom_role);
  }
  CHECK(built.edges == loaded.edges);
  CHECK(built.vertices[0].params.at("topic") == "clicks");

  SECTION("an unknown kind without a role is refused when the graph is built") {
    stream_environment plain;
    plain.add_source("my_source").add_sink("print_sink");
    CHECK_THROWS_WITH(plain.build_job_graph(),
                      Contains("unknown operator kind 'my_source'; a kind only your workers know "
                               "needs role = source|transform|keyed|sink"));
  }
  SECTION("a built-in kind given another role is refused") {
    stream_environment wrong;
    auto s = wrong.add_source("sequence_source", {{"count", "1"}});
    s.custom_role(operator_role::transform);
    s.add_sink("print_sink");
    CHECK_THROWS_WITH(wrong.build_job_graph(),
                      Contains("operator kind 'sequence_source' is a source, not a transform"));
  }
}

TEST_CASE("a custom kind between built-in ones parses, and built-in vertices carry no role") {
  const job_graph g = load_ok(R"([[operator]]
uid = "source"
kind = "sequence_source"
role = "source"
params = { count = 10 }

[[operator]]
uid = "x10"
kind = "times_ten"
role = "transform"
input = "source"

[[operator]]
uid = "sink"
kind = "print_sink"
input = "x10"
)");
  REQUIRE(g.vertices.size() == 3);
  CHECK_FALSE(g.vertices[0].custom_role);  // a built-in kind given its own role stays built-in
  CHECK(g.vertices[1].custom_role == operator_role::transform);
  CHECK_FALSE(g.vertices[2].custom_role);
}

TEST_CASE("job file error: an unknown kind without a role hints at role") {
  check_error(R"([[operator]]
uid = "x10"
kind = "times_ten"
)",
             "operator[0].kind", 3,
             "unknown operator kind 'times_ten' (known kinds: ");
  auto e = check_error(R"([[operator]]
uid = "x10"
kind = "times_ten"
)",
                      "operator[0].kind", 3, "");
  CHECK_THAT(e.message,
             Contains("; a kind only your workers know needs role = source|transform|keyed|sink"));
}

TEST_CASE("job file error: a bad role value names the key and line") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 1 }

[[operator]]
uid = "x10"
kind = "times_ten"
input = "src"
role = "mapper"
)",
             "operator[1].role", 10,
             "operator 'x10': unknown role 'mapper' (expected source, transform, keyed or sink)");
  check_error(R"([[operator]]
uid = "src"
kind = "my_source"
role = 1
)",
             "operator[0].role", 4, "expected a string, got an integer");
}

TEST_CASE("job file error: a built-in kind with a role that is not its own") {
  check_error(R"([[operator]]
uid = "src"
kind = "sequence_source"
role = "transform"
params = { count = 1 }
)",
             "operator[0].role", 4,
             "operator 'src': operator kind 'sequence_source' is a source, not a transform");
}

TEST_CASE("job file error: a custom source with an input") {
  check_error(R"([[operator]]
uid = "a"
kind = "my_source"
role = "source"

[[operator]]
uid = "b"
kind = "my_other_source"
role = "source"
input = "a"
)",
             "operator[1].input", 10,
             "operator 'b' is a source (my_other_source) and takes no input");
}

TEST_CASE("job file error: a custom sink used as an input") {
  check_error(R"([[operator]]
uid = "a"
kind = "my_source"
role = "source"

[[operator]]
uid = "out"
kind = "my_sink"
role = "sink"
input = "a"

[[operator]]
uid = "after"
kind = "print_sink"
input = "out"
)",
             "operator[2].input", 15, "input 'out' is a sink (my_sink), which has no output");
}

TEST_CASE("job file error: a custom keyed kind with a non-hash partition") {
  check_error(R"([[operator]]
uid = "a"
kind = "my_source"
role = "source"

[[operator]]
uid = "k"
kind = "my_agg"
role = "keyed"
input = "a"
partition = "rebalance"
)",
             "operator[1].partition", 11, "partition must be hash");
}

TEST_CASE("job file error: a custom kind's param values are still strings, integers or booleans") {
  check_error(R"([[operator]]
uid = "a"
kind = "my_source"
role = "source"
params = { ratio = 0.5 }
)",
             "operator[0].params.ratio", 5,
             "wrong value type: expected a string, an integer or a boolean, got a float");
}

TEST_CASE("validate() checks a custom-role vertex's shape by its declared role") {
  const operator_registry& builtin = operator_registry::builtin();
  job_graph g;
  g.vertices = {vertex(0, "my_source", operator_role::source, {{"anything", "goes"}}),
                vertex(1, "my_map", operator_role::transform),
                vertex(2, "print_sink", std::nullopt)};
  g.edges = {{0, 1, partitioning::forward}, {1, 2, partitioning::forward}};
  CHECK_FALSE(validate(g, builtin));

  SECTION("without a role an unknown kind is refused, with the hint") {
    g.vertices[1].custom_role.reset();
    auto error = validate(g, builtin);
    REQUIRE(error);
    CHECK_THAT(*error, Contains("vertex 'v1': unknown operator kind 'my_map'; a kind only your "
                                "workers know needs role = source|transform|keyed|sink"));
  }
  SECTION("a custom source takes no inputs") {
    g.vertices[1].custom_role = operator_role::source;
    auto error = validate(g, builtin);
    REQUIRE(error);
    CHECK_THAT(*error, Contains("vertex 'v1': a source (my_map) takes no inputs"));
  }
  SECTION("a custom sink has no outputs") {
    g.vertices[1].custom_role = operator_role::sink;
    auto error = validate(g, builtin);
    REQUIRE(error);
    CHECK_THAT(*error, Contains("vertex 'v1': a sink (my_map) has no outputs"));
  }
  SECTION("a custom keyed vertex needs hash inputs") {
    g.vertices[1].custom_role = operator_role::keyed;
    auto error = validate(g, builtin);
    REQUIRE(error);
    CHECK_THAT(*error, Contains("keyed operator my_map needs hash-partitioned inputs"));
    g.edges[0].part = partitioning::hash;
    CHECK_FALSE(validate(g, builtin));
  }
  SECTION("a built-in kind may carry its own role but no other") {
    g.vertices[2].custom_role = operator_role::sink;
    CHECK_FALSE(validate(g, builtin));
    g.vertices[2].custom_role = operator_role::transform;
    auto error = validate(g, builtin);
    REQUIRE(error);
    CHECK_THAT(*error,
               Contains("vertex 'v2': operator kind 'print_sink' is a sink, not a transform"));
  }
  SECTION("a built-in kind's params are still checked") {
    g.vertices[2].params = {{"nope", "1"}};
    auto error = validate(g, builtin);
    REQUIRE(error);
    CHECK_THAT(*error, Contains("unknown parameter 'nope'"));
  }
}

TEST_CASE("custom_role round trips through msgpack and takes part in equality") {
  const job_graph g = load_ok(all_custom_roles);
  auto decoded = decode_job_graph(encode_job_graph(g));
  INFO((decoded.ok() ? std::string("ok") : decoded.err().message));
  REQUIRE(decoded.ok());
  CHECK(decoded.value() == g);
  CHECK(decoded->vertices[2].custom_role == operator_role::keyed);

  job_graph other = g;
  other.vertices[1].custom_role = operator_role::sink;
  CHECK_FALSE(other == g);
}

TEST_CASE("a vertex without custom_role encodes exactly as before the field existed") {
  job_graph g;
  g.id = "0123456789abcdef0123456789abcdef";
  g.name = "plain";
  g.vertices = {vertex(0, "sequence_source", std::nullopt, {{"count", "5"}}),
                vertex(1, "print_sink", std::nullopt)};
  g.edges = {{0, 1, partitioning::forward}};
  const std::string bytes = encode_job_graph(g);

  // The vertex maps keep their seven fields and no custom_role key.
  msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
  const msgpack::object& top = handle.get();
  REQUIRE(top.type == msgpack::type::MAP);
  const msgpack::object* vertices = nullptr;
  for (std::uint32_t i = 0; i < top.via.map.size; ++i)
    if (top.via.map.ptr[i].key.as<std::string>() == "vertices") vertices = &top.via.map.ptr[i].val;
  REQUIRE(vertices != nullptr);
  REQUIRE(vertices->via.array.size == 2);
  for (std::uint32_t i = 0; i < 2; ++i) {
    const msgpack::object& v = vertices->via.array.ptr[i];
    REQUIRE(v.type == msgpack::type::MAP);
    CHECK(v.via.map.size == 7);
    for (std::uint32_t k = 0; k < v.via.map.size; ++k)
      CHECK(v.via.map.ptr[k].key.as<std::string>() != "custom_role");
  }

  // Setting the role and clearing it again leaves the bytes as they were.
  job_graph touched = g;
  touched.vertices[1].custom_role = operator_role::sink;
  CHECK(encode_job_graph(touched) != bytes);
  touched.vertices[1].custom_role.reset();
  CHECK(encode_job_graph(touched) == bytes);
}

TEST_CASE("committed encoder-made job graphs re-encode byte for byte") {
  // make_fuzz_corpus wrote these with encode_job_graph before custom_role existed.
  const std::filesystem::path dir =
      std::filesystem::path(source_dir) / "tests/fuzz/corpus/job_graph";
  for (const char* name :
       {"with_checkpointing.bin", "without_checkpointing.bin", "with_restart.bin"}) {
    INFO(name);
    const std::string bytes = read_file(dir / name);
    REQUIRE_FALSE(bytes.empty());
    auto decoded = decode_job_graph(bytes);
    REQUIRE(decoded.ok());
    for (const auto& v : decoded->vertices) CHECK_FALSE(v.custom_role);
    CHECK(encode_job_graph(*decoded) == bytes);
  }
}

TEST_CASE("a custom_role out of range is an error naming the field") {
  job_graph g;
  g.id = "0123456789abcdef0123456789abcdef";
  g.name = "bad role";
  g.vertices = {vertex(0, "my_source", operator_role::source)};
  std::string bytes = encode_job_graph(g);
  // The role is the last value of the vertex map, a positive fixint 0..3; make it 9.
  const std::string key = "custom_role";
  const auto at = bytes.find(key);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes[at + key.size()] == 0);
  bytes[at + key.size()] = 9;
  auto decoded = decode_job_graph(bytes);
  REQUIRE_FALSE(decoded.ok());
  CHECK_THAT(decoded.err().message, Contains("vertices[0].custom_role"));
  CHECK_THAT(decoded.err().message, Contains("unknown value 9"));
}
