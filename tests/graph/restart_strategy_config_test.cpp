// A job's own restart strategy: the [restart] table of a job file, the C++ API setter, the
// msgpack form (old encodings without it still decode) and the range checks.
#include <catch2/catch.hpp>

#include <string>

#include "graph/job_file.hpp"
#include "graph/job_graph_codec.hpp"
#include "graph/stream_environment.hpp"
#include "tests/graph/job_file_test_support.hpp"

using namespace snapflow;
using snapflow::testing::check_error;
using snapflow::testing::load_ok;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

constexpr std::string_view operators = R"(
[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
)";

// A job file with `restart` as its [restart] table (line 1 is "[restart]").
std::string with_restart(std::string_view restart) {
  return "[restart]\n" + std::string(restart) + std::string(operators);
}

}  // namespace

TEST_CASE("a job file without [restart] leaves the strategy to the coordinator") {
  auto graph = load_ok(std::string(operators));
  CHECK_FALSE(graph.restart);
}

TEST_CASE("[restart] fixed_delay sets its attempts and delay; other settings keep defaults") {
  auto graph =
      load_ok(with_restart("strategy = \"fixed_delay\"\nmax_attempts = 3\ndelay_ms = 250\n"));
  REQUIRE(graph.restart);
  restart_strategy_config expected;
  expected.type = restart_strategy_config::kind::fixed_delay;
  expected.max_attempts = 3;
  expected.delay_ms = 250;
  CHECK(*graph.restart == expected);
}

TEST_CASE("[restart] exponential_backoff takes integer or float multipliers; Flink's name too") {
  auto graph = load_ok(with_restart(
      "strategy = \"exponential_backoff\"\ninitial_backoff_ms = 10\nmax_backoff_ms = 2000\n"
      "backoff_multiplier = 1.5\nreset_backoff_after_ms = 5000\nmax_attempts = -1\n"));
  REQUIRE(graph.restart);
  CHECK(graph.restart->type == restart_strategy_config::kind::exponential_delay);
  CHECK(graph.restart->initial_backoff_ms == 10);
  CHECK(graph.restart->max_backoff_ms == 2000);
  CHECK(graph.restart->backoff_multiplier == 1.5);
  CHECK(graph.restart->reset_backoff_after_ms == 5000);
  CHECK(graph.restart->max_attempts == -1);

  auto flink = load_ok(with_restart("strategy = \"exponential_delay\"\nbackoff_multiplier = 3\n"));
  REQUIRE(flink.restart);
  CHECK(flink.restart->type == restart_strategy_config::kind::exponential_delay);
  CHECK(flink.restart->backoff_multiplier == 3.0);
}

TEST_CASE("[restart] failure_rate and none") {
  auto rate =
      load_ok(with_restart("strategy = \"failure_rate\"\nmax_failures_per_interval = 5\n"
                           "failure_rate_interval_ms = 30000\ndelay_ms = 0\n"));
  REQUIRE(rate.restart);
  CHECK(rate.restart->type == restart_strategy_config::kind::failure_rate);
  CHECK(rate.restart->max_failures_per_interval == 5);
  CHECK(rate.restart->failure_rate_interval_ms == 30000);
  CHECK(rate.restart->delay_ms == 0);

  auto none = load_ok(with_restart("strategy = \"none\"\n"));
  REQUIRE(none.restart);
  CHECK(none.restart->type == restart_strategy_config::kind::none);
}

TEST_CASE("bad [restart] values are rejected with the key and line") {
  SECTION("missing strategy") {
    check_error(with_restart("max_attempts = 3\n"), "restart.strategy", 1,
               "missing required key 'strategy'");
  }
  SECTION("unknown strategy") {
    check_error(with_restart("strategy = \"forever\"\n"), "restart.strategy", 2,
               "unknown strategy 'forever' (expected none, fixed_delay, exponential_backoff or "
               "failure_rate)");
  }
  SECTION("strategy of the wrong type") {
    check_error(with_restart("strategy = 1\n"), "restart.strategy", 2,
               "wrong value type: expected a string, got an integer");
  }
  SECTION("unknown key") {
    check_error(with_restart("strategy = \"none\"\nretries = 3\n"), "restart.retries", 3,
               "unknown key 'retries' in [restart]");
  }
  SECTION("a setting the strategy does not use") {
    check_error(with_restart("strategy = \"exponential_backoff\"\ndelay_ms = 10\n"),
               "restart.delay_ms", 3,
               "delay_ms does not apply to strategy 'exponential_backoff' (its settings: "
               "max_attempts, initial_backoff_ms, max_backoff_ms, backoff_multiplier, "
               "reset_backoff_after_ms)");
    check_error(with_restart("strategy = \"none\"\nmax_attempts = 1\n"), "restart.max_attempts", 3,
               "(it takes no settings)");
  }
  SECTION("out of range") {
    check_error(with_restart("strategy = \"fixed_delay\"\nmax_attempts = -2\n"),
               "restart.max_attempts", 3, "restart max_attempts must be >= -1");
    check_error(with_restart("strategy = \"fixed_delay\"\ndelay_ms = -1\n"), "restart.delay_ms", 3,
               "restart delay_ms must be between 0 and 2592000000 (got -1)");
    check_error(with_restart("strategy = \"failure_rate\"\nfailure_rate_interval_ms = 0\n"),
               "restart.failure_rate_interval_ms", 3,
               "restart failure_rate_interval_ms must be between 1");
    check_error(with_restart("strategy = \"failure_rate\"\nmax_failures_per_interval = 0\n"),
               "restart.max_failures_per_interval", 3,
               "restart max_failures_per_interval must be >= 1 (got 0)");
    check_error(with_restart("strategy = \"exponential_backoff\"\nbackoff_multiplier = 0.5\n"),
               "restart.backoff_multiplier", 3, "restart backoff_multiplier must be between 1");
    check_error(with_restart("strategy = \"exponential_backoff\"\nbackoff_multiplier = nan\n"),
               "restart.backoff_multiplier", 3, "restart backoff_multiplier must be between 1");
    check_error(with_restart("strategy = \"exponential_backoff\"\ninitial_backoff_ms = 0\n"),
               "restart.initial_backoff_ms", 3, "restart initial_backoff_ms must be between 1");
    check_error(with_restart("strategy = \"exponential_backoff\"\nmax_backoff_ms = 10\n"
                            "initial_backoff_ms = 20\n"),
               "restart.max_backoff_ms", 3,
               "restart max_backoff_ms must be >= initial_backoff_ms (20)");
    check_error(with_restart("strategy = \"fixed_delay\"\ndelay_ms = 9223372036854775807\n"),
               "restart.delay_ms", 3, "restart delay_ms must be between 0 and 2592000000");
  }
  SECTION("wrong value types") {
    check_error(with_restart("strategy = \"fixed_delay\"\ndelay_ms = \"1s\"\n"), "restart.delay_ms",
               3, "wrong value type: expected an integer, got a string");
    check_error(with_restart("strategy = \"exponential_backoff\"\nbackoff_multiplier = \"2\"\n"),
               "restart.backoff_multiplier", 3, "expected a number, got a string");
  }
  SECTION("[restart] that is not a table") {
    check_error("restart = \"none\"\n" + std::string(operators), "restart", 1,
               "wrong value type: expected a table ([restart])");
  }
}

TEST_CASE("stream_environment::set_restart_strategy validates and carries the strategy") {
  stream_environment env;
  auto src = env.add_source("sequence_source", {{"count", "10"}});
  src.add_sink("print_sink");
  CHECK_FALSE(env.build_job_graph().restart);

  restart_strategy_config bad;
  bad.type = restart_strategy_config::kind::fixed_delay;
  bad.delay_ms = -5;
  CHECK_THROWS_WITH(env.set_restart_strategy(bad), Contains("restart delay_ms must be between"));
  CHECK_FALSE(env.get_restart_strategy());

  restart_strategy_config none;
  none.type = restart_strategy_config::kind::none;
  env.set_restart_strategy(none);
  auto graph = env.build_job_graph();
  REQUIRE(graph.restart);
  CHECK(*graph.restart == none);
}

TEST_CASE("a job graph's restart strategy round trips through msgpack") {
  stream_environment env;
  auto src = env.add_source("sequence_source", {{"count", "10"}});
  src.add_sink("print_sink");
  restart_strategy_config r;
  r.type = restart_strategy_config::kind::failure_rate;
  r.max_failures_per_interval = 7;
  r.failure_rate_interval_ms = 1234;
  r.backoff_multiplier = 1.25;
  env.set_restart_strategy(r);
  const job_graph graph = env.build_job_graph();
  auto decoded = decode_job_graph(encode_job_graph(graph));
  REQUIRE(decoded);
  CHECK(*decoded == graph);
  REQUIRE(decoded->restart);
  CHECK(*decoded->restart == r);
}

TEST_CASE("a job graph without a restart strategy encodes as before and decodes without one") {
  stream_environment env;
  env.enable_checkpointing(100ms);
  auto src = env.add_source("sequence_source", {{"count", "10"}});
  src.add_sink("print_sink");
  const job_graph graph = env.build_job_graph();
  const std::string bytes = encode_job_graph(graph);
  // The first version's top-level map had five entries and no "restart" key.
  REQUIRE(static_cast<unsigned char>(bytes[0]) == 0x85);
  CHECK(bytes.find("restart") == std::string::npos);
  auto decoded = decode_job_graph(bytes);
  REQUIRE(decoded);
  CHECK_FALSE(decoded->restart);
  CHECK(*decoded == graph);
}

TEST_CASE("a malformed restart field is a decode error naming it; nil means absent") {
  stream_environment env;
  auto src = env.add_source("sequence_source", {{"count", "10"}});
  src.add_sink("print_sink");
  const job_graph graph = env.build_job_graph();

  auto encode_with = [&](auto pack_restart) {
    msgpack::sbuffer buffer;
    msgpack::packer<msgpack::sbuffer> pk(buffer);
    // Re-pack the graph's five fields and append a hand-made restart field.
    const std::string plain = encode_job_graph(graph);
    msgpack::object_handle h = msgpack::unpack(plain.data(), plain.size());
    const msgpack::object& map = h.get();
    pk.pack_map(map.via.map.size + 1);
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
      pk.pack(map.via.map.ptr[i].key);
      pk.pack(map.via.map.ptr[i].val);
    }
    pk.pack(std::string("restart"));
    pack_restart(pk);
    return std::string(buffer.data(), buffer.size());
  };

  auto nil = decode_job_graph(encode_with([](auto& pk) { pk.pack_nil(); }));
  REQUIRE(nil);
  CHECK_FALSE(nil->restart);

  auto not_a_map = decode_job_graph(encode_with([](auto& pk) { pk.pack(std::string("none")); }));
  REQUIRE_FALSE(not_a_map);
  CHECK_THAT(not_a_map.err().message, Contains("field 'restart': expected a map"));

  auto bad_enum = decode_job_graph(encode_with([](auto& pk) {
    pk.pack_map(1);
    pk.pack(std::string("strategy"));
    pk.pack_uint8(9);
  }));
  REQUIRE_FALSE(bad_enum);
  CHECK_THAT(bad_enum.err().message, Contains("field 'restart.strategy': unknown value 9"));

  auto nan_multiplier = decode_job_graph(encode_with([](auto& pk) {
    restart_strategy_config r;
    pk.pack_map(9);
    pk.pack(std::string("strategy"));
    pk.pack_uint8(2);
    pk.pack(std::string("max_attempts"));
    pk.pack_int32(r.max_attempts);
    pk.pack(std::string("delay_ms"));
    pk.pack_int64(r.delay_ms);
    pk.pack(std::string("initial_backoff_ms"));
    pk.pack_int64(r.initial_backoff_ms);
    pk.pack(std::string("max_backoff_ms"));
    pk.pack_int64(r.max_backoff_ms);
    pk.pack(std::string("backoff_multiplier"));
    pk.pack_double(std::numeric_limits<double>::quiet_NaN());
    pk.pack(std::string("reset_backoff_after_ms"));
    pk.pack_int64(r.reset_backoff_after_ms);
    pk.pack(std::string("max_failures_per_interval"));
    pk.pack_int32(r.max_failures_per_interval);
    pk.pack(std::string("failure_rate_interval_ms"));
    pk.pack_int64(r.failure_rate_interval_ms);
  }));
  REQUIRE_FALSE(nan_multiplier);
  CHECK_THAT(nan_multiplier.err().message,
             Contains("field 'restart.backoff_multiplier': expected a finite number"));
}

TEST_CASE("validate() refuses a job graph whose restart strategy is out of range") {
  stream_environment env;
  auto src = env.add_source("sequence_source", {{"count", "10"}});
  src.add_sink("print_sink");
  job_graph graph = env.build_job_graph();
  graph.restart.emplace();
  graph.restart->max_failures_per_interval = 0;
  auto error = validate(graph, operator_registry::builtin());
  REQUIRE(error);
  CHECK_THAT(*error, Contains("restart max_failures_per_interval must be >= 1"));
}
