#include <catch2/catch.hpp>

#include "graph/stream_environment.hpp"

using namespace snapflow;
using namespace std::chrono_literals;

TEST_CASE("enable_checkpointing stores the interval and mode in the stream graph") {
  stream_environment env;
  CHECK_FALSE(env.checkpointing_enabled());
  env.enable_checkpointing(1ms, checkpointing_mode::at_least_once);
  REQUIRE(env.checkpointing_enabled());
  CHECK(env.graph().checkpointing->interval == 1ms);
  CHECK(env.graph().checkpointing->mode == checkpointing_mode::at_least_once);
}

TEST_CASE("every checkpoint setter is stored") {
  stream_environment env;
  env.enable_checkpointing(250ms)
      .set_checkpoint_timeout(5s)
      .set_min_pause_between_checkpoints(20ms)
      .set_max_concurrent_checkpoints(3)
      .set_tolerable_checkpoint_failures(4)
      .set_retained_checkpoints(2)
      .set_externalized_retention(externalized_retention::retain_on_cancellation)
      .set_checkpoint_dir("chk")
      .set_savepoint_dir("sp")
      .set_checkpoint_stats_history_size(50)
      .set_state_backend("hashmap");
  const auto& c = *env.graph().checkpointing;
  CHECK(c.interval == 250ms);
  CHECK(c.timeout == 5s);
  CHECK(c.min_pause == 20ms);
  CHECK(c.max_concurrent == 3);
  CHECK(c.tolerable_failures == 4);
  CHECK(c.retained == 2);
  CHECK(c.retention == externalized_retention::retain_on_cancellation);
  CHECK(c.checkpoint_dir == "chk");
  CHECK(c.savepoint_dir == "sp");
  CHECK(c.stats_history_size == 50);
  CHECK(c.state_backend == "hashmap");
}

TEST_CASE("checkpoint config accepts both state backends") {
  stream_environment env;
  env.enable_checkpointing(100ms);
  env.set_state_backend("rocksdb");
  CHECK(env.get_checkpoint_config().state_backend == "rocksdb");
  CHECK_FALSE(env.get_checkpoint_config().validate());
  env.set_state_backend("hashmap");
  CHECK(env.get_checkpoint_config().state_backend == "hashmap");
  // Incremental checkpoints: off by default; accepted with either backend (hashmap ignores it).
  CHECK_FALSE(env.get_checkpoint_config().incremental);
  env.enable_incremental_checkpoints();
  CHECK(env.get_checkpoint_config().incremental);
  CHECK_FALSE(env.get_checkpoint_config().validate());
}

TEST_CASE("invalid checkpoint settings are refused with the setting and range named") {
  stream_environment env;
  CHECK_THROWS_WITH(env.enable_checkpointing(0ms),
                    Catch::Contains("interval_ms") && Catch::Contains("between 1 and"));
  CHECK_THROWS_WITH(env.enable_checkpointing(-5ms), Catch::Contains("interval_ms"));
  CHECK_THROWS_WITH(env.set_checkpoint_timeout(0ms),
                    Catch::Contains("timeout_ms") && Catch::Contains("between 1 and"));
  CHECK_THROWS_WITH(env.set_max_concurrent_checkpoints(0),
                    Catch::Contains("max_concurrent") && Catch::Contains(">= 1"));
  CHECK_THROWS_WITH(env.set_min_pause_between_checkpoints(-1ms), Catch::Contains("min_pause_ms"));
  CHECK_THROWS_WITH(env.set_tolerable_checkpoint_failures(-1),
                    Catch::Contains("tolerable_failures"));
  CHECK_THROWS_WITH(env.set_retained_checkpoints(0), Catch::Contains("retained"));
  CHECK_THROWS_WITH(env.set_checkpoint_stats_history_size(-1),
                    Catch::Contains("stats_history_size"));
  CHECK_THROWS_WITH(env.set_parallelism(0), Catch::Contains("parallelism"));
  // Only backends that exist are accepted: a typo or an unknown one is refused, not ignored,
  // and the error names the ones there are.
  CHECK_THROWS_WITH(env.set_state_backend("rocks"),
                    Catch::Contains("unknown checkpoint state_backend 'rocks'") &&
                        Catch::Contains("hashmap") && Catch::Contains("rocksdb"));
  CHECK_THROWS_WITH(env.set_state_backend("RocksDB"),
                    Catch::Contains("unknown checkpoint state_backend 'RocksDB'"));
  CHECK_THROWS_WITH(env.set_state_backend(""), Catch::Contains("state_backend"));

  env.enable_checkpointing(10ms, checkpointing_mode::at_least_once);
  CHECK_THROWS_WITH(env.enable_unaligned_checkpoints(),
                    Catch::Contains("unaligned") && Catch::Contains("exactly_once"));
  // A refused setter leaves the configuration as it was.
  CHECK_FALSE(env.get_checkpoint_config().unaligned);
  CHECK(env.get_checkpoint_config().interval == 10ms);
}

TEST_CASE("a 1 ms interval is allowed") {
  stream_environment env;
  CHECK_NOTHROW(env.enable_checkpointing(1ms));
}
