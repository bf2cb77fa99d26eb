// From a job graph to an execution graph with a checkpoint coordinator attached, and the
// periodic trigger following the job's status, on a manual clock (no sleeps).
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>

#include "engine/jobmaster/execution_graph.hpp"
#include "graph/stream_environment.hpp"
#include "tests/engine/test_gateway.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using namespace snapflow::test;
using namespace std::chrono_literals;

namespace {

job_graph example_job(std::optional<std::chrono::milliseconds> interval = 100ms) {
  stream_environment env;
  env.set_parallelism(4);
  if (interval) env.enable_checkpointing(*interval);
  auto a = env.add_source("sequence_source", {{"count", "100"}});
  a.uid("numbers").set_parallelism(2);
  auto b = env.add_source("line_source", {{"path", "in.txt"}});
  b.uid("lines").set_parallelism(3);
  auto summed = a.key_by().sum();
  summed.uid("sum");
  summed.add_sink("print_sink").uid("sink-a").set_parallelism(4);
  b.add_sink("print_sink").uid("sink-b").set_parallelism(1);
  job_graph g = env.build_job_graph();
  if (!interval) {
    // Manual checkpoints only: checkpoint settings without an interval.
    g.checkpointing = make_checkpointing_settings(g, checkpoint_config{});
  }
  return g;
}

struct fixture {
  // Where completed checkpoints' _metadata goes; declared first, so removed last.
  snapflow::testing::temp_folder state{"execution-graph"};
  asio::io_context io;
  manual_clock clock;
  std::shared_ptr<recording_gateway> gateway = std::make_shared<recording_gateway>();

  std::shared_ptr<execution_graph> build(const job_graph& g) {
    auto eg = build_execution_graph(g, io.get_executor());
    REQUIRE(eg);
    return *eg;
  }
  checkpoint_runtime runtime() { return {io.get_executor(), gateway, state.path()}; }
  result<void> enable(execution_graph& eg, const job_graph& g) {
    const auto& s = *g.checkpointing;
    return eg.enable_checkpointing(
        s.config, s.to_trigger, s.to_acknowledge, s.to_confirm, {},
        std::make_shared<in_memory_checkpoint_id_counter>(),
        std::make_shared<completed_checkpoint_store>(1), "hashmap",
        std::make_shared<checkpoint_stats_tracker>(10, s.config), runtime());
  }
  // An io_context that ran out of work stops; restart() so a later poll runs new work.
  void poll() {
    io.restart();
    io.poll();
  }
  void advance(std::chrono::microseconds by) {
    clock.advance(by);
    poll();
  }
  void set_all_running(execution_graph& eg) {
    for (auto* v : eg.all_execution_vertices()) v->set_state(execution_state::running);
  }
};

}  // namespace

TEST_CASE("execution graph has one execution vertex per subtask and an attempt id each") {
  fixture f;
  auto g = example_job();
  auto eg = f.build(g);
  REQUIRE(eg->job_vertices().size() == 5);
  CHECK(eg->num_subtasks() == 2 + 3 + 4 + 4 + 1);
  for (const auto& jv : eg->job_vertices()) {
    CHECK(jv->subtasks().size() == jv->vertex().parallelism);
    for (std::uint32_t i = 0; i < jv->parallelism(); ++i) {
      CHECK(jv->subtask(i).id() == subtask_id{jv->id(), i});
      CHECK(jv->subtask(i).current_attempt().attempt == 0);
    }
  }
  auto& s = eg->find_job_vertex(0)->subtask(1);
  auto before = s.current_attempt();
  CHECK(s.reset_for_new_attempt() != before);
  CHECK(eg->status() == job_status::created);
}

TEST_CASE("trigger vertices are exactly the sources; acknowledge and confirm are all subtasks") {
  fixture f;
  auto g = example_job();
  REQUIRE(g.checkpointing);
  CHECK(g.checkpointing->to_trigger == std::vector<vertex_id>{0, 1});
  auto eg = f.build(g);
  REQUIRE(f.enable(*eg, g));
  f.set_all_running(*eg);
  auto* coordinator = eg->get_checkpoint_coordinator();
  REQUIRE(coordinator);
  coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  // Triggers go to the 2 + 3 source subtasks only.
  REQUIRE(f.gateway->triggers.size() == 5);
  for (const auto& t : f.gateway->triggers) CHECK(t.attempt.subtask.vertex <= 1);
  const pending_checkpoint* p = coordinator->core().find_pending(1);
  REQUIRE(p);
  CHECK(p->num_subtasks() == eg->num_subtasks());
  // Everyone acks: every subtask is confirmed.
  for (auto* v : eg->all_execution_vertices())
    coordinator->receive_ack({g.id, v->current_attempt(), 1, {}, {}});
  f.poll();  // metadata write on the I/O executor, result posted back
  f.poll();
  CHECK(f.gateway->completes.size() == eg->num_subtasks());
  CHECK(eg->state_backend_name() == std::string("hashmap"));
}

TEST_CASE("settings naming an unknown vertex fail with the vertex named and change nothing") {
  fixture f;
  auto g = example_job();
  auto eg = f.build(g);
  auto s = *g.checkpointing;
  auto r = eg->enable_checkpointing(s.config, {0, 42}, s.to_acknowledge, s.to_confirm, {},
                                    std::make_shared<in_memory_checkpoint_id_counter>(),
                                    std::make_shared<completed_checkpoint_store>(1), "hashmap",
                                    std::make_shared<checkpoint_stats_tracker>(10, s.config),
                                    f.runtime());
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("vertex 42"));
  CHECK(eg->get_checkpoint_coordinator() == nullptr);
  CHECK(eg->num_job_status_listeners() == 0);
  CHECK(f.enable(*eg, g));  // a correct call still works afterwards
}

TEST_CASE("enabling checkpointing twice fails and keeps the first coordinator") {
  fixture f;
  auto g = example_job();
  auto eg = f.build(g);
  REQUIRE(f.enable(*eg, g));
  auto* first = eg->get_checkpoint_coordinator();
  auto listeners = eg->num_job_status_listeners();
  auto again = f.enable(*eg, g);
  REQUIRE_FALSE(again);
  CHECK_THAT(again.err().message, Catch::Contains("already enabled"));
  CHECK(eg->get_checkpoint_coordinator() == first);
  CHECK(eg->num_job_status_listeners() == listeners);
}

TEST_CASE("enabling checkpointing when the job is RUNNING fails") {
  fixture f;
  auto g = example_job();
  auto eg = f.build(g);
  REQUIRE(eg->transition_to(job_status::running));
  auto r = f.enable(*eg, g);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("CREATED") && Catch::Contains("RUNNING"));
  CHECK(eg->get_checkpoint_coordinator() == nullptr);
}

TEST_CASE("invalid checkpoint config passed to enable_checkpointing is refused") {
  fixture f;
  auto g = example_job();
  auto eg = f.build(g);
  auto s = *g.checkpointing;
  s.config.max_concurrent = 0;
  auto r = eg->enable_checkpointing(s.config, s.to_trigger, s.to_acknowledge, s.to_confirm, {},
                                    std::make_shared<in_memory_checkpoint_id_counter>(),
                                    std::make_shared<completed_checkpoint_store>(1), "hashmap",
                                    std::make_shared<checkpoint_stats_tracker>(10, s.config),
                                    f.runtime());
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("max_concurrent"));
}

TEST_CASE("with periodic checkpoints disabled no job status listener is registered") {
  fixture f;
  auto g = example_job(std::nullopt);
  auto eg = f.build(g);
  REQUIRE(f.enable(*eg, g));
  CHECK(eg->num_job_status_listeners() == 0);
  REQUIRE(eg->get_checkpoint_coordinator());
  eg->transition_to(job_status::running);
  f.advance(10s);
  CHECK_FALSE(eg->get_checkpoint_coordinator()->is_periodic_checkpointing_started());
  CHECK(f.gateway->triggers.empty());
}

TEST_CASE("RUNNING starts the periodic trigger after an initial delay, then every interval") {
  fixture f;
  auto g = example_job(100ms);
  auto eg = f.build(g);
  REQUIRE(f.enable(*eg, g));
  CHECK(eg->num_job_status_listeners() == 1);
  f.set_all_running(*eg);
  auto* coordinator = eg->get_checkpoint_coordinator();
  CHECK_FALSE(coordinator->is_periodic_checkpointing_started());
  f.advance(1s);
  CHECK(coordinator->periodic_ticks() == 0);

  REQUIRE(eg->transition_to(job_status::running));
  CHECK(coordinator->is_periodic_checkpointing_started());
  // The initial delay lies in [min pause, interval] = [0, 100 ms].
  for (int i = 0; i < 100 && coordinator->periodic_ticks() == 0; ++i) f.advance(1ms);
  CHECK(coordinator->periodic_ticks() == 1);
  CHECK(f.gateway->triggers.size() == 5);
  f.advance(99ms);
  CHECK(coordinator->periodic_ticks() == 1);
  f.advance(1ms);
  CHECK(coordinator->periodic_ticks() == 2);
}

TEST_CASE("FAILING, CANCELED, FINISHED and SUSPENDED stop the periodic trigger") {
  struct path {
    std::vector<job_status> steps;
  };
  auto p = GENERATE(path{{job_status::failing}},
                    path{{job_status::cancelling, job_status::canceled}},
                    path{{job_status::finished}}, path{{job_status::suspended}});
  fixture f;
  auto g = example_job(10ms);
  auto eg = f.build(g);
  REQUIRE(f.enable(*eg, g));
  f.set_all_running(*eg);
  auto* coordinator = eg->get_checkpoint_coordinator();
  REQUIRE(eg->transition_to(job_status::running));
  f.advance(10ms);
  REQUIRE(coordinator->periodic_ticks() >= 1);
  const auto ticks = coordinator->periodic_ticks();
  for (auto s : p.steps) {
    REQUIRE(eg->transition_to(s));
    CHECK_FALSE(coordinator->is_periodic_checkpointing_started());
  }
  // Pending checkpoints are aborted when the job leaves RUNNING.
  CHECK(coordinator->core().num_pending() == 0);
  for (int i = 0; i < 50; ++i) f.advance(10ms);
  CHECK(coordinator->periodic_ticks() == ticks);
}

TEST_CASE("restarting resumes the periodic trigger: RUNNING, FAILING, RESTARTING, RUNNING") {
  fixture f;
  auto g = example_job(10ms);
  auto eg = f.build(g);
  REQUIRE(f.enable(*eg, g));
  f.set_all_running(*eg);
  auto* coordinator = eg->get_checkpoint_coordinator();
  eg->transition_to(job_status::running);
  f.advance(10ms);
  eg->transition_to(job_status::failing);
  eg->transition_to(job_status::restarting);
  const auto ticks = coordinator->periodic_ticks();
  f.advance(100ms);
  CHECK(coordinator->periodic_ticks() == ticks);
  eg->transition_to(job_status::running);
  CHECK(coordinator->is_periodic_checkpointing_started());
  f.advance(10ms);
  f.advance(10ms);
  CHECK(coordinator->periodic_ticks() > ticks);
}

TEST_CASE("checkpoint failures past the tolerable number fail the job on the job master executor") {
  fixture f;
  auto g = example_job(10ms);
  auto eg = f.build(g);
  REQUIRE(f.enable(*eg, g));
  f.set_all_running(*eg);
  int failures = 0;
  eg->set_job_failure_handler([&](const std::string& cause, std::optional<execution_attempt_id>) {
    ++failures;
    CHECK_THAT(cause, Catch::Contains("checkpoint_declined"));
  });
  eg->transition_to(job_status::running);
  auto* coordinator = eg->get_checkpoint_coordinator();
  coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  auto attempt = eg->find_job_vertex(0)->subtask(0).current_attempt();
  coordinator->receive_decline({g.id, attempt, 1, checkpoint_failure_reason::checkpoint_declined, "no"});
  // Not from inside the coordinator's call stack: only once the executor runs it.
  CHECK(failures == 0);
  f.poll();
  CHECK(failures == 1);
  CHECK(eg->failure_cause());
}
