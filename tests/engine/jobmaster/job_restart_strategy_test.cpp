// The job master applies the job graph's own restart strategy when it has one, and the
// coordinator's default otherwise (manual clock, recording gateways, no sockets).
#include <catch2/catch.hpp>

#include <random>

#include <asio/io_context.hpp>

#include "engine/jobmaster/job_master.hpp"
#include "graph/stream_environment.hpp"
#include "tests/engine/test_gateway.hpp"

using namespace snapflow;
using namespace snapflow::test;
using namespace std::chrono_literals;

namespace {

class null_deployer : public task_deployment_gateway {
 public:
  std::size_t deployed = 0;
  void deploy(const worker_id&, const task_deployment_descriptor&) override { ++deployed; }
  void cancel(const worker_id&, const job_id&, const execution_attempt_id&) override {}
  void finish(const worker_id&, const job_id&, const execution_attempt_id&) override {}
};

job_graph pipeline(std::optional<restart_strategy_config> restart) {
  stream_environment env;
  env.set_parallelism(2).enable_checkpointing(10ms);
  auto src = env.add_source("sequence_source", {{"count", "100"}});
  src.uid("src");
  src.key_by().sum().uid("sum").add_sink("print_sink").uid("sink");
  if (restart) env.set_restart_strategy(*restart);
  return env.build_job_graph();
}

restart_strategy_config fixed_delay(std::int32_t attempts, std::int64_t delay_ms) {
  restart_strategy_config r;
  r.type = restart_strategy_config::kind::fixed_delay;
  r.max_attempts = attempts;
  r.delay_ms = delay_ms;
  return r;
}

restart_strategy_config no_restart() {
  restart_strategy_config r;
  r.type = restart_strategy_config::kind::none;
  return r;
}

struct fixture {
  asio::io_context io;
  manual_clock clock;
  std::filesystem::path state_dir = std::filesystem::temp_directory_path() /
                                    ("snapflow-jrs-" + std::to_string(std::random_device{}()));
  std::shared_ptr<worker_registry> workers = std::make_shared<worker_registry>();
  std::shared_ptr<null_deployer> deployer = std::make_shared<null_deployer>();
  std::shared_ptr<recording_gateway> gateway = std::make_shared<recording_gateway>();
  std::shared_ptr<job_master> master;

  // `coordinator_default` is what the coordinator was started with; the job may override it.
  fixture(std::optional<restart_strategy_config> job_restart,
          restart_strategy_config coordinator_default) {
    auto created = job_master::create(io.get_executor(), pipeline(job_restart), workers, deployer,
                                      gateway, {state_dir, io.get_executor(), coordinator_default});
    REQUIRE(created);
    master = *created;
    REQUIRE(workers->register_worker("w1", 2, "tcp://w1", clock.now_us()));
    master->start();
    run_all();
  }
  ~fixture() {
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);
  }
  void poll() {
    for (int i = 0; i < 10; ++i) {
      io.restart();
      if (io.poll() == 0) return;
    }
  }
  void run_all() {
    for (auto* v : master->graph().all_execution_vertices())
      master->on_task_state(v->current_attempt(), execution_state::running);
    poll();
  }
  void fail_one() {
    master->on_task_state(master->graph().find_job_vertex(0)->subtask(0).current_attempt(),
                          execution_state::failed, "boom");
    poll();
  }
  // Fails a task, waits out the restart delay (bounded) and brings every task up again.
  // Returns false when the job did not come back (it ended instead).
  bool fail_and_recover(std::chrono::milliseconds delay) {
    fail_one();
    if (master->status() == job_status::failed) return false;
    CHECK(master->status() == job_status::restarting);
    clock.advance(delay);
    poll();
    run_all();
    return master->status() == job_status::running;
  }
};

}  // namespace

TEST_CASE("a job with restart strategy none fails on its first failure despite the default") {
  fixture f(no_restart(), fixed_delay(-1, 10));
  REQUIRE(f.master->status() == job_status::running);
  f.fail_one();
  CHECK(f.master->status() == job_status::failed);
  CHECK(f.master->restarts() == 0);
  REQUIRE(f.master->failure_cause());
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("boom"));
}

TEST_CASE("a job's fixed delay with N attempts restarts N times and FAILS on failure N+1") {
  constexpr std::int32_t attempts = 3;
  fixture f(fixed_delay(attempts, 250), no_restart());
  REQUIRE(f.master->status() == job_status::running);
  for (std::int32_t i = 0; i < attempts; ++i) {
    INFO("failure " << i + 1);
    // The job's delay, not the default's: nothing restarts before it has passed.
    f.fail_one();
    REQUIRE(f.master->status() == job_status::restarting);
    f.clock.advance(249ms);
    f.poll();
    CHECK(f.master->status() == job_status::restarting);
    f.clock.advance(1ms);
    f.poll();
    f.run_all();
    REQUIRE(f.master->status() == job_status::running);
    CHECK(f.master->restarts() == i + 1);
  }
  f.fail_one();
  CHECK(f.master->status() == job_status::failed);
  CHECK(f.master->restarts() == attempts);
}

TEST_CASE("a job without its own strategy uses the coordinator's default") {
  SECTION("default none") {
    fixture f(std::nullopt, no_restart());
    f.fail_one();
    CHECK(f.master->status() == job_status::failed);
  }
  SECTION("default fixed delay, one attempt") {
    fixture f(std::nullopt, fixed_delay(1, 5));
    CHECK(f.fail_and_recover(5ms));
    CHECK_FALSE(f.fail_and_recover(5ms));
    CHECK(f.master->status() == job_status::failed);
  }
}

TEST_CASE("a job's failure-rate strategy ends the job once the rate is exceeded") {
  restart_strategy_config r;
  r.type = restart_strategy_config::kind::failure_rate;
  r.max_failures_per_interval = 2;
  r.failure_rate_interval_ms = 10'000;
  r.delay_ms = 1;
  fixture f(r, fixed_delay(-1, 1));
  CHECK(f.fail_and_recover(1ms));
  CHECK(f.fail_and_recover(1ms));
  CHECK_FALSE(f.fail_and_recover(1ms));
  CHECK(f.master->status() == job_status::failed);
}

TEST_CASE("job_master::create refuses a job graph with an out-of-range restart strategy") {
  asio::io_context io;
  job_graph graph = pipeline(std::nullopt);
  graph.restart = fixed_delay(1, -1);
  auto created =
      job_master::create(io.get_executor(), graph, std::make_shared<worker_registry>(),
                         std::make_shared<null_deployer>(), std::make_shared<recording_gateway>(),
                         {std::filesystem::temp_directory_path() / "snapflow-jrs-unused",
                          io.get_executor(), restart_strategy_config{}});
  REQUIRE_FALSE(created);
  CHECK_THAT(created.err().message, Catch::Contains("restart delay_ms must be between"));
}
