// The job master over a recording deployment gateway and a manual clock: placement, status,
// checkpoints, failover with new attempts restored from the latest checkpoint, slots, cancel.
#include <catch2/catch.hpp>

#include <random>
#include <set>

#include <asio/io_context.hpp>

#include "engine/jobmaster/job_master.hpp"
#include "engine/jobmaster/state_assignment.hpp"
#include "graph/stream_environment.hpp"
#include "tests/engine/test_gateway.hpp"

using namespace snapflow;
using namespace snapflow::test;
using namespace std::chrono_literals;

namespace {

class recording_deployer : public task_deployment_gateway {
 public:
  std::vector<std::pair<worker_id, task_deployment_descriptor>> deployed;
  std::vector<std::pair<worker_id, execution_attempt_id>> canceled;
  void deploy(const worker_id& w, const task_deployment_descriptor& d) override {
    deployed.emplace_back(w, d);
  }
  void cancel(const worker_id& w, const job_id&, const execution_attempt_id& a) override {
    canceled.emplace_back(w, a);
  }
  std::vector<execution_attempt_id> finished;
  void finish(const worker_id&, const job_id&, const execution_attempt_id& a) override {
    finished.push_back(a);
  }
};

job_graph pipeline() {
  stream_environment env;
  env.set_parallelism(2).enable_checkpointing(10ms);
  auto src = env.add_source("sequence_source", {{"count", "100"}});
  src.uid("src");
  src.key_by().sum().uid("sum").add_sink("print_sink").uid("sink");
  return env.build_job_graph();
}

struct fixture {
  asio::io_context io;
  manual_clock clock;
  std::filesystem::path state_dir = std::filesystem::temp_directory_path() /
                                     ("snapflow-jm-" + std::to_string(std::random_device{}()));
  std::shared_ptr<worker_registry> workers = std::make_shared<worker_registry>();
  std::shared_ptr<recording_deployer> deployer = std::make_shared<recording_deployer>();
  std::shared_ptr<recording_gateway> gateway = std::make_shared<recording_gateway>();
  std::shared_ptr<job_master> master;
  job_graph graph = pipeline();

  explicit fixture(restart_strategy_config restart = {}) : fixture(pipeline(), restart) {}
  fixture(job_graph job, restart_strategy_config restart) : graph(std::move(job)) {
    restart.type = restart_strategy_config::kind::fixed_delay;
    restart.delay_ms = 100;
    if (restart.max_attempts < 0) restart.max_attempts = 3;
    auto created = job_master::create(io.get_executor(), graph, workers, deployer, gateway,
                                      {state_dir, io.get_executor(), restart});
    REQUIRE(created);
    master = *created;
  }
  ~fixture() {
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);
  }
  void add_worker(const std::string& id, std::uint32_t slots = 2) {
    REQUIRE(workers->register_worker(id, slots, "tcp://" + id, clock.now_us()));
  }
  void poll() {
    for (int i = 0; i < 10; ++i) {
      io.restart();
      if (io.poll() == 0) return;
    }
  }
  void advance(std::chrono::microseconds by) {
    clock.advance(by);
    poll();
  }
  // Every deployed task of the current attempt reports `state`.
  void report_all(execution_state state) {
    for (auto* v : master->graph().all_execution_vertices())
      master->on_task_state(v->current_attempt(), state);
    poll();
  }
  // One worker, the job started and every task RUNNING.
  void run_on_one_worker() {
    add_worker("w1");
    master->start();
    report_all(execution_state::running);
  }
  // Both sources say they ran out after `last_barrier`.
  void exhaust_sources(checkpoint_id last_barrier) {
    auto& sources = *master->graph().find_job_vertex(0);
    for (std::uint32_t i = 0; i < 2; ++i)
      master->on_source_exhausted(sources.subtask(i).current_attempt(), last_barrier);
    poll();
  }
  // Advances the clock 1 ms at a time, at most `max_ms` times, until a checkpoint is pending.
  std::vector<checkpoint_id> wait_for_pending(int max_ms) {
    for (int i = 0; i < max_ms && master->coordinator()->core().pending_ids().empty(); ++i)
      advance(std::chrono::milliseconds(1));
    return master->coordinator()->core().pending_ids();
  }
  // Manual checkpoints 1 to `through`, each triggered and acknowledged by every subtask.
  void complete_manual_checkpoints(checkpoint_id through) {
    for (checkpoint_id id = 1; id <= through; ++id) {
      master->coordinator()->trigger_checkpoint(checkpoint_trigger_kind::manual);
      poll();
      ack_all(id);
    }
    REQUIRE(master->coordinator()->core().latest_completed_id() == through);
  }
  // A second job master on the same state folder, as a restarted coordinator process makes,
  // with one worker of its own and its own deployer.
  struct restarted {
    std::shared_ptr<job_master> master;
    std::shared_ptr<recording_deployer> deployer;
  };
  restarted restart_coordinator() {
    auto registry = std::make_shared<worker_registry>();
    REQUIRE(registry->register_worker("w1", 2, "tcp://w1", clock.now_us()));
    auto recorder = std::make_shared<recording_deployer>();
    auto created = job_master::create(io.get_executor(), graph, registry, recorder, gateway,
                                      {state_dir, io.get_executor(), {}});
    REQUIRE(created);
    return {*created, recorder};
  }
  // Acks every trigger of checkpoint `id` from every current subtask.
  void ack_all(checkpoint_id id) {
    for (auto* v : master->graph().all_execution_vertices())
      master->coordinator()->receive_ack({graph.id, v->current_attempt(), id, {}, {}});
    poll();
  }
};

}  // namespace

TEST_CASE("job master places subtask k of every vertex on slot k and deploys each once") {
  fixture f;
  f.add_worker("w1", 1);
  f.add_worker("w2", 1);
  f.master->start();
  REQUIRE(f.deployer->deployed.size() == 6);
  std::map<std::uint32_t, std::set<worker_id>> by_index;
  for (const auto& [w, d] : f.deployer->deployed) {
    by_index[d.attempt.subtask.index].insert(w);
    CHECK(d.job == f.graph.id);
    CHECK_FALSE(d.restore_checkpoint_id);
    // Its own endpoint and those of the subtasks it exchanges records with, not the whole
    // job's: src -hash-> sum -forward-> sink at parallelism 2.
    const vertex_id src = f.graph.find_vertex_by_uid("src")->id;
    const vertex_id sum = f.graph.find_vertex_by_uid("sum")->id;
    const vertex_id sink = f.graph.find_vertex_by_uid("sink")->id;
    const subtask_id self = d.attempt.subtask;
    std::set<subtask_id> expected{self};
    if (self.vertex == src) expected.insert({{sum, 0}, {sum, 1}});
    if (self.vertex == sum) expected.insert({{src, 0}, {src, 1}, {sink, self.index}});
    if (self.vertex == sink) expected.insert({sum, self.index});
    std::set<subtask_id> got;
    for (const auto& [s, endpoint] : d.subtask_endpoints) got.insert(s);
    CHECK(got == expected);
    CHECK_FALSE(d.job_graph_bytes.empty());
  }
  CHECK(by_index[0].size() == 1);
  CHECK(by_index[1].size() == 1);
  CHECK(*by_index[0].begin() != *by_index[1].begin());
  CHECK(f.master->status() == job_status::created);
  f.report_all(execution_state::running);
  CHECK(f.master->status() == job_status::running);
}

TEST_CASE("job master waits for slots, then schedules when workers come") {
  fixture f;
  f.add_worker("w1", 1);
  f.master->start();
  CHECK(f.master->waiting_for_slots());
  CHECK(f.deployer->deployed.empty());
  f.add_worker("w2", 1);
  f.master->on_slots_available();
  CHECK_FALSE(f.master->waiting_for_slots());
  CHECK(f.deployer->deployed.size() == 6);
}

TEST_CASE("job master that waits for slots longer than the timeout fails saying how many it "
          "needs and has; slots in time cancel the timeout") {
  {  // one manual clock at a time: the first fixture goes before the second is made
    fixture f;  // the default timeout: 5 minutes
    f.add_worker("w1", 1);
    f.master->start();
    REQUIRE(f.master->waiting_for_slots());
    f.advance(std::chrono::minutes(5) - 1ms);
    CHECK(f.master->status() == job_status::created);
    f.advance(1ms);
    CHECK(f.master->status() == job_status::failed);
    CHECK_FALSE(f.master->waiting_for_slots());
    REQUIRE(f.master->failure_cause());
    CHECK_THAT(*f.master->failure_cause(),
               Catch::Contains("needs 2 slots, 1 available") && Catch::Contains("300 s"));
    CHECK(f.deployer->deployed.empty());
    // A worker that comes now deploys nothing: the job has ended.
    f.add_worker("w2", 1);
    f.master->on_slots_available();
    CHECK(f.deployer->deployed.empty());
  }

  fixture g;
  g.add_worker("w1", 1);
  g.master->start();
  g.advance(std::chrono::minutes(4));
  g.add_worker("w2", 1);
  g.master->on_slots_available();
  REQUIRE(g.deployer->deployed.size() == 6);
  g.advance(std::chrono::minutes(2));  // past the first wait's timeout: it was cancelled
  CHECK(g.master->status() == job_status::created);
}

TEST_CASE("job master runs periodic checkpoints once RUNNING and finishes when all tasks finish") {
  fixture f;
  f.add_worker("w1");
  f.master->start();
  f.report_all(execution_state::running);
  for (int i = 0; i < 20 && f.gateway->triggers.empty(); ++i) f.advance(1ms);
  REQUIRE_FALSE(f.gateway->triggers.empty());
  f.ack_all(f.gateway->triggers.back().id);
  CHECK(f.master->coordinator()->core().latest_completed_id() == 1);
  f.report_all(execution_state::finished);
  CHECK(f.master->status() == job_status::finished);
  CHECK(f.workers->total_free_slots() == 2);
}

TEST_CASE("a failed task fails the job over: new attempts restored from the latest checkpoint") {
  fixture f;
  f.add_worker("w1");
  f.master->start();
  f.report_all(execution_state::running);
  f.master->coordinator()->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  f.ack_all(1);
  REQUIRE(f.master->coordinator()->core().latest_completed_id() == 1);
  auto old_attempt = f.master->graph().find_job_vertex(1)->subtask(0).current_attempt();
  f.deployer->deployed.clear();

  f.master->on_task_state(old_attempt, execution_state::failed, "boom");
  f.poll();
  CHECK(f.master->status() == job_status::restarting);
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("boom"));
  CHECK(f.deployer->canceled.size() == 5);  // everyone else
  f.advance(99ms);
  CHECK(f.deployer->deployed.empty());
  f.advance(1ms);
  REQUIRE(f.deployer->deployed.size() == 6);
  for (const auto& [_, d] : f.deployer->deployed) {
    CHECK(d.attempt.attempt == 1);
    REQUIRE(d.restore_checkpoint_id);
    CHECK(*d.restore_checkpoint_id == 1);
  }
  // Reports from the old attempt are ignored.
  f.master->on_task_state(old_attempt, execution_state::running);
  CHECK(f.master->status() == job_status::restarting);
  f.report_all(execution_state::running);
  CHECK(f.master->status() == job_status::running);
  CHECK(f.master->restarts() == 1);
  CHECK(f.master->coordinator()->core().stats().counts().restored == 1);
}

TEST_CASE("a lost worker fails over every subtask it ran") {
  fixture f;
  f.add_worker("w1", 1);
  f.add_worker("w2", 1);
  f.master->start();
  f.report_all(execution_state::running);
  f.workers->remove("w2");
  f.master->on_worker_lost("w2");
  CHECK(f.master->status() == job_status::restarting);
  f.deployer->deployed.clear();
  f.advance(100ms);
  CHECK(f.master->waiting_for_slots());  // one worker left, two slots needed
  f.add_worker("w3", 1);
  f.master->on_slots_available();
  CHECK(f.deployer->deployed.size() == 6);
  f.report_all(execution_state::running);
  CHECK(f.master->status() == job_status::running);
}

TEST_CASE("an exhausted restart strategy ends the job FAILED with its cause") {
  restart_strategy_config r;
  r.max_attempts = 1;
  fixture f(r);
  f.add_worker("w1");
  f.master->start();
  f.report_all(execution_state::running);
  auto fail_one = [&] {
    f.master->on_task_state(f.master->graph().find_job_vertex(0)->subtask(0).current_attempt(),
                            execution_state::failed, "disk full");
    f.poll();
  };
  fail_one();
  f.advance(100ms);
  f.report_all(execution_state::running);
  fail_one();
  CHECK(f.master->status() == job_status::failed);
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("disk full"));
  CHECK(f.master->coordinator()->core().is_shutdown());
}

TEST_CASE("cancel ends the job CANCELED and cancels every task") {
  fixture f;
  f.add_worker("w1");
  f.master->start();
  f.report_all(execution_state::running);
  f.master->cancel();
  CHECK(f.master->status() == job_status::canceled);
  CHECK(f.deployer->canceled.size() == 6);
  CHECK(f.workers->total_free_slots() == 2);
}

TEST_CASE("a restarted coordinator resumes the job from the latest checkpoint on disk") {
  fixture f;
  f.run_on_one_worker();
  f.complete_manual_checkpoints(2);

  // A new job master on the same state folder (the coordinator process restarted).
  const auto premade = f.state_dir / f.graph.id / "chk-3";  // made with chk-1, never used
  REQUIRE(std::filesystem::is_directory(premade));
  REQUIRE(std::filesystem::is_empty(premade));
  auto [master, deployer] = f.restart_coordinator();
  CHECK_FALSE(std::filesystem::exists(premade));  // removed with the recovery, no warning
  master->start();
  REQUIRE(deployer->deployed.size() == 6);
  CHECK(deployer->deployed[0].second.restore_checkpoint_id == std::optional<checkpoint_id>(2));
  for (auto* v : master->graph().all_execution_vertices())
    master->on_task_state(v->current_attempt(), execution_state::running);
  CHECK(master->status() == job_status::running);
  master->coordinator()->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE_FALSE(master->coordinator()->core().pending_ids().empty());
  CHECK(master->coordinator()->core().pending_ids()[0] > 2);
}

TEST_CASE("bounded sources finish only after a checkpoint taken after every last record") {
  fixture f;
  f.add_worker("w1");
  f.master->start();
  f.report_all(execution_state::running);
  auto& sources = *f.master->graph().find_job_vertex(0);
  // Source 0 is done before any barrier; source 1 after barrier 1.
  f.master->on_source_exhausted(sources.subtask(0).current_attempt(), 0);
  f.master->coordinator()->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  f.ack_all(1);
  CHECK(f.deployer->finished.empty());  // source 1 has not said it is exhausted
  f.master->on_source_exhausted(sources.subtask(1).current_attempt(), 1);
  f.poll();
  CHECK(f.deployer->finished.empty());  // checkpoint 1 may precede source 1's last records
  // The job master asked for a checkpoint itself; once it completes the sources may finish.
  REQUIRE(f.master->coordinator()->core().pending_ids() == std::vector<checkpoint_id>{2});
  f.ack_all(2);
  CHECK(f.deployer->finished.size() == 2);
  f.report_all(execution_state::finished);
  CHECK(f.master->status() == job_status::finished);
}

TEST_CASE("a periodic checkpoint in flight as the sources run out ends before they finish") {
  fixture f;
  f.run_on_one_worker();
  auto* coordinator = f.master->coordinator();
  // Periodic checkpoint 1 completes; periodic checkpoint 2 is in flight when both sources say
  // they ran out after barrier 1.
  REQUIRE(f.wait_for_pending(20) == std::vector<checkpoint_id>{1});
  f.ack_all(1);
  REQUIRE(f.wait_for_pending(20) == std::vector<checkpoint_id>{2});
  f.exhaust_sources(1);
  CHECK(coordinator->periodic_triggers_paused());
  // Checkpoint 2 completes and is after every last record, but the final checkpoint the job
  // master asked for is still to come: the sources wait for it rather than leave it to fail.
  f.ack_all(2);
  CHECK(coordinator->core().latest_completed_id() == 2);
  CHECK(f.deployer->finished.empty());
  REQUIRE(f.wait_for_pending(5) == std::vector<checkpoint_id>{3});
  f.ack_all(3);
  CHECK(f.deployer->finished.size() == 2);
  // No tick triggers anything more while the job ends.
  const auto triggers = f.gateway->triggers.size();
  f.advance(50ms);
  CHECK(f.gateway->triggers.size() == triggers);
  CHECK(coordinator->core().pending_ids().empty());
  f.report_all(execution_state::finished);
  CHECK(f.master->status() == job_status::finished);
  CHECK(coordinator->core().stats().counts().failed == 0);
  CHECK(coordinator->core().stats().counts().completed == 3);
}

TEST_CASE("a failed final checkpoint is asked for again while periodic ticks are paused") {
  fixture f;
  f.run_on_one_worker();
  auto* coordinator = f.master->coordinator();
  f.exhaust_sources(0);
  REQUIRE(coordinator->periodic_triggers_paused());
  const auto first = coordinator->core().pending_ids();
  REQUIRE(first.size() == 1);
  auto* v = f.master->graph().all_execution_vertices()[0];
  // A decline that does not count toward the tolerable failures: the job keeps running.
  coordinator->receive_decline({f.graph.id, v->current_attempt(), first[0],
                                checkpoint_failure_reason::checkpoint_declined_task_not_ready,
                                "not now"});
  f.poll();
  CHECK(coordinator->core().pending_ids().empty());
  CHECK(f.deployer->finished.empty());
  // Asked again after a short wait, not by a periodic tick.
  const auto again = f.wait_for_pending(50);
  REQUIRE(again.size() == 1);
  f.ack_all(again[0]);
  CHECK(f.deployer->finished.size() == 2);
}

TEST_CASE("a restored job whose sources ran out before any barrier ends after a checkpoint of "
          "its own run") {
  fixture f;
  f.run_on_one_worker();
  f.complete_manual_checkpoints(2);
  // A new job master on the same state folder restores checkpoint 2; its sources have nothing
  // left and run out before any barrier of this run.
  auto [master, deployer] = f.restart_coordinator();
  master->start();
  for (auto* v : master->graph().all_execution_vertices())
    master->on_task_state(v->current_attempt(), execution_state::running);
  f.poll();
  REQUIRE(master->status() == job_status::running);
  auto& sources = *master->graph().find_job_vertex(0);
  for (std::uint32_t i = 0; i < 2; ++i)
    master->on_source_exhausted(sources.subtask(i).current_attempt(), 0);
  f.poll();
  // Checkpoint 2 was taken before this run's records: it does not let the sources end.
  CHECK(deployer->finished.empty());
  const auto pending = master->coordinator()->core().pending_ids();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0] > 2);
  for (auto* v : master->graph().all_execution_vertices())
    master->coordinator()->receive_ack({f.graph.id, v->current_attempt(), pending[0], {}, {}});
  f.poll();
  CHECK(deployer->finished.size() == 2);
}

TEST_CASE("sources are not told to finish while the job fails over") {
  fixture f;
  f.run_on_one_worker();
  // Checkpoint 1 completes, periodic checkpoint 2 is in flight as the sources run out after
  // barrier 1; the final checkpoint asked for waits behind it.
  REQUIRE(f.wait_for_pending(20) == std::vector<checkpoint_id>{1});
  f.ack_all(1);
  REQUIRE(f.wait_for_pending(20) == std::vector<checkpoint_id>{2});
  f.exhaust_sources(1);
  f.ack_all(2);  // covers every last record, but the requested one is in flight now
  REQUIRE(f.master->coordinator()->core().pending_ids() == std::vector<checkpoint_id>{3});
  CHECK(f.deployer->finished.empty());
  // A task fails: the job fails over and aborts checkpoint 3, which ends its request.
  auto* task = f.master->graph().all_execution_vertices().back();
  f.master->on_task_state(task->current_attempt(), execution_state::failed, "boom");
  f.poll();
  CHECK(f.master->status() != job_status::running);
  CHECK(f.deployer->finished.empty());
}

TEST_CASE("a source that runs out before the whole job runs still lets the job finish") {
  fixture f;
  f.add_worker("w1");
  f.master->start();
  auto& sources = *f.master->graph().find_job_vertex(0);
  // Both sources are running and already exhausted while the other tasks still deploy.
  for (std::uint32_t i = 0; i < 2; ++i) {
    f.master->on_task_state(sources.subtask(i).current_attempt(), execution_state::running);
    f.master->on_source_exhausted(sources.subtask(i).current_attempt(), 0);
  }
  f.poll();
  CHECK(f.master->status() == job_status::created);
  CHECK(f.deployer->finished.empty());
  // Once the job runs, the reports kept count: a final checkpoint is requested at once.
  f.report_all(execution_state::running);
  REQUIRE(f.master->status() == job_status::running);
  const auto pending = f.master->coordinator()->core().pending_ids();
  REQUIRE(pending.size() == 1);
  f.ack_all(pending[0]);
  CHECK(f.deployer->finished.size() == 2);
  f.report_all(execution_state::finished);
  CHECK(f.master->status() == job_status::finished);
}

// --- restore: which old states each new subtask receives (state_assignment.hpp) ---------------

namespace {

// src -hash-> sum (keyed) -forward-> sink, every vertex at `parallelism`, max parallelism 128;
// with `custom_sink`, the sink is a kind only the workers know (it declares nothing).
job_graph rescale_job(std::uint32_t parallelism, bool custom_sink = false) {
  stream_environment env;
  env.set_parallelism(parallelism).set_max_parallelism(128).enable_checkpointing(10ms);
  auto src = env.add_source("sequence_source", {{"count", "100"}});
  src.uid("src");
  src.key_by().sum().uid("sum").add_sink("print_sink").uid("sink");
  job_graph g = env.build_job_graph();
  if (custom_sink)
    for (auto& v : g.vertices)
      if (v.uid == "sink") {
        v.kind = "custom_sink_kind";
        v.custom_role = operator_role::sink;
      }
  return g;
}

std::string handle_name(vertex_id vertex, std::uint32_t index) {
  return "v" + std::to_string(vertex) + "-" + std::to_string(index);
}

// A checkpoint of `graph`'s vertices taken at `old_parallelism`: one handle per old subtask,
// named after it so a test can see that the right state travelled with its index.
completed_checkpoint checkpoint_at(const job_graph& graph, std::uint32_t old_parallelism) {
  completed_checkpoint c;
  c.job = graph.id;
  c.id = 5;
  c.kind = checkpoint_trigger_kind::savepoint;
  c.location = "savepoint-5";
  for (const auto& v : graph.vertices)
    for (std::uint32_t i = 0; i < old_parallelism; ++i)
      c.subtask_states[{v.id, i}] =
          subtask_state{{state_handle{handle_name(v.id, i), 1, 0, {}}}, 1};
  return c;
}

using assignment = std::map<std::string, std::map<std::uint32_t, std::vector<std::uint32_t>>>;

// Restores `graph` from a checkpoint at `old_parallelism`; for each uid and new subtask index,
// the old subtask indexes its deploy descriptor lists.
assignment restore_into(const job_graph& graph, std::uint32_t old_parallelism) {
  asio::io_context io;
  const auto state_dir = std::filesystem::temp_directory_path() /
                         ("snapflow-jm-restore-" + std::to_string(std::random_device{}()));
  auto workers = std::make_shared<worker_registry>();
  std::uint32_t slots = 0;
  for (const auto& v : graph.vertices) slots = std::max(slots, v.parallelism);
  REQUIRE(workers->register_worker("w1", slots, "tcp://w1", 0));
  auto deployer = std::make_shared<recording_deployer>();
  job_master::options opts{state_dir, io.get_executor(), {}, checkpoint_at(graph, old_parallelism)};
  auto created = job_master::create(io.get_executor(), graph, workers, deployer,
                                    std::make_shared<recording_gateway>(), opts);
  REQUIRE(created);
  (*created)->start();
  assignment out;
  for (const auto& [_, d] : deployer->deployed) {
    REQUIRE(d.restore_checkpoint_id == std::optional<checkpoint_id>(5));
    const subtask_id self = d.attempt.subtask;
    auto& olds = out[graph.find_vertex(self.vertex)->uid][self.index];
    for (const auto& [old_index, state] : d.restore_states) {
      REQUIRE(state.handles.size() == 1);
      CHECK(state.handles[0].path == handle_name(self.vertex, old_index));
      olds.push_back(old_index);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(state_dir, ec);
  return out;
}

using indexes = std::vector<std::uint32_t>;

}  // namespace

TEST_CASE("restore at unchanged parallelism: each subtask receives only its own old state") {
  const assignment got = restore_into(rescale_job(4), 4);
  for (const char* uid : {"src", "sum", "sink"}) {
    INFO(uid);
    REQUIRE(got.at(uid).size() == 4);
    for (std::uint32_t i = 0; i < 4; ++i) CHECK(got.at(uid).at(i) == indexes{i});
  }
}

TEST_CASE("restore scaled up: keyed state by key-group overlap, operator state round robin") {
  // 2 -> 4 at max parallelism 128: old 0 owned key groups 0..63, old 1 64..127; new i owns
  // 32i..32i+31, so new 0 and 1 need old 0, new 2 and 3 old 1.
  const assignment got = restore_into(rescale_job(4), 2);
  CHECK(got.at("sum").at(0) == indexes{0});
  CHECK(got.at("sum").at(1) == indexes{0, 1});  // round robin gives it old 1 as well
  CHECK(got.at("sum").at(2) == indexes{1});
  CHECK(got.at("sum").at(3) == indexes{1});
  // Old i goes to new i % 4: new 2 and 3 start without operator state.
  CHECK(got.at("sink").at(0) == indexes{0});
  CHECK(got.at("sink").at(1) == indexes{1});
  CHECK(got.at("sink").at(2).empty());
  CHECK(got.at("sink").at(3).empty());
  // The source's split j belongs to subtask j % p: new i owns splits i, i + 4, ..., all of
  // which old subtask i % 2 owned.
  for (std::uint32_t i = 0; i < 4; ++i) CHECK(got.at("src").at(i) == indexes{i % 2});
}

TEST_CASE("restore scaled down: every old state reaches a new subtask, none goes everywhere") {
  // 5 -> 2 at max parallelism 128. Old ranges: 0..25, 26..51, 52..76, 77..102, 103..127;
  // new: 0..63 (old 0, 1, 2) and 64..127 (old 2, 3, 4).
  const assignment got = restore_into(rescale_job(2), 5);
  CHECK(got.at("sum").at(0) == indexes{0, 1, 2, 4});  // 0, 2, 4 by round robin too
  CHECK(got.at("sum").at(1) == indexes{1, 2, 3, 4});  // 1, 3 by round robin too
  CHECK(got.at("sink").at(0) == indexes{0, 2, 4});
  CHECK(got.at("sink").at(1) == indexes{1, 3});
  // New 0 owns the even splits, which all five old subtasks shared; new 1 the odd ones.
  for (std::uint32_t i = 0; i < 2; ++i) CHECK(got.at("src").at(i) == (indexes{0, 1, 2, 3, 4}));
}

TEST_CASE("restore of a kind that declares no redistribution: every subtask gets every state") {
  const assignment got = restore_into(rescale_job(3, /*custom_sink=*/true), 2);
  for (std::uint32_t i = 0; i < 3; ++i) CHECK(got.at("sink").at(i) == indexes{0, 1});
  // The built-in round-robin vertices of the same job still get only what they need: keyed_sum's
  // new subtask 0 (key groups 0..42) only old subtask 0 (0..63).
  CHECK(got.at("sum").at(0) == indexes{0});
}

TEST_CASE("state assignment: a custom kind that declares round robin in its registry gets it") {
  operator_registry registry = operator_registry::builtin();
  operator_kind kind{"my_offsets_source", operator_role::source, {}, "test kind"};
  kind.redistribution = operator_state_redistribution::round_robin;
  registry.add(kind);
  job_vertex v;
  v.id = 3;
  v.kind = "my_offsets_source";
  v.parallelism = 2;
  const auto a =
      state_assignment::for_vertex(v, registry, checkpoint_at(job_graph{{}, {}, {v}}, 3));
  CHECK_FALSE(a.is_union());
  CHECK(a.old_parallelism() == 3);
  CHECK(a.old_indexes_for(0) == indexes{0, 2});
  CHECK(a.old_indexes_for(1) == indexes{1});
  // Unknown to the registry (only the workers know it): everything to everyone.
  v.kind = "unknown_kind";
  v.custom_role = operator_role::source;
  const auto u =
      state_assignment::for_vertex(v, registry, checkpoint_at(job_graph{{}, {}, {v}}, 3));
  CHECK(u.is_union());
  CHECK(u.old_indexes_for(1) == indexes{0, 1, 2});
}

TEST_CASE("state assignment: a checkpoint missing an old subtask falls back to union") {
  std::map<std::uint32_t, subtask_state> old_states{{0, {}}, {2, {}}};  // no index 1
  state_assignment a(old_states, operator_role::keyed, operator_state_redistribution::round_robin,
                     /*new_parallelism=*/2, /*max_parallelism=*/128);
  CHECK(a.is_union());
  CHECK(a.states_for(0).size() == 2);
  CHECK(a.states_for(1).size() == 2);
}

TEST_CASE("a subtask that finishes while a checkpoint waits for its ack ends that checkpoint") {
  fixture f;
  f.run_on_one_worker();
  f.master->coordinator()->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  const auto pending = f.master->coordinator()->core().pending_ids();
  REQUIRE(pending.size() == 1);
  const auto sink = f.master->graph().find_job_vertex(1)->subtask(0).current_attempt();
  f.master->on_task_state(sink, execution_state::finished);
  f.poll();
  CHECK(f.master->coordinator()->core().num_pending() == 0);
  const checkpoint_stats* s = f.master->coordinator()->core().stats().find(pending[0]);
  REQUIRE(s != nullptr);
  CHECK(s->failure_reason == checkpoint_failure_reason::checkpoint_declined_task_closing);
  CHECK(f.master->coordinator()->armed_timeouts() == 0);
  CHECK_FALSE(f.gateway->aborts.empty());
}

TEST_CASE("a user program's job is placed only on workers that carry its fingerprint") {
  job_graph job = pipeline();
  job.program = job_program{"prog 1", "abc123"};
  fixture f(job, {});
  REQUIRE(f.workers->register_worker("plain", 4, "tcp://plain", f.clock.now_us()));
  REQUIRE(f.workers->register_worker("other", 4, "tcp://other", f.clock.now_us(), {}, {},
                                     {{"fff000", "prog 0"}}));
  f.master->start();
  f.poll();
  // Eight free slots, none of them where the program runs: nothing is deployed, and the wait
  // says why.
  CHECK(f.deployer->deployed.empty());
  CHECK(f.master->waiting_for_slots());
  const std::string& why = f.master->waiting_reason();
  CHECK(why.find("'prog 1' (fingerprint abc123)") != std::string::npos);
  CHECK(why.find("worker 'other' carries 'prog 0' (fingerprint fff000)") != std::string::npos);
  CHECK(why.find("worker 'plain' carries no program") != std::string::npos);

  REQUIRE(f.workers->register_worker("own", 2, "tcp://own", f.clock.now_us(), {}, {},
                                     {{"abc123", "prog 1"}}));
  f.master->on_slots_available();
  f.poll();
  CHECK_FALSE(f.master->waiting_for_slots());
  CHECK(f.master->waiting_reason().empty());
  REQUIRE_FALSE(f.deployer->deployed.empty());
  for (const auto& [worker, _] : f.deployer->deployed) CHECK(worker == "own");
}

TEST_CASE("a job that names no program is placed on any worker, program workers too") {
  fixture f;
  REQUIRE(f.workers->register_worker("own", 2, "tcp://own", f.clock.now_us(), {}, {},
                                     {{"abc123", "prog 1"}}));
  f.master->start();
  f.poll();
  CHECK_FALSE(f.deployer->deployed.empty());
  CHECK(f.master->waiting_reason().empty());
}

TEST_CASE("a neighbour's CANCELED report ahead of a task's FAILED one: the failure is the cause") {
  const std::int32_t max_attempts = GENERATE(0, 3);  // ends FAILED / fails over
  INFO("restart attempts " << max_attempts);
  restart_strategy_config restart;
  restart.max_attempts = max_attempts;
  fixture f(pipeline(), restart);
  f.run_on_one_worker();
  auto& sources = *f.master->graph().find_job_vertex(0);
  auto& sums = *f.master->graph().find_job_vertex(1);
  // The failing task cancelled its channels; the source's report got there first.
  f.master->on_task_state(sources.subtask(0).current_attempt(), execution_state::canceled);
  f.poll();
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("canceled unexpectedly"));
  f.master->on_task_state(sums.subtask(1).current_attempt(), execution_state::failed,
                          "no implementation for operator kind 'x'");
  f.poll();
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("no implementation for operator kind 'x'"));
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("sum"));
  // Only the first failure behind the symptom: a later one does not replace it.
  f.master->on_task_state(sums.subtask(0).current_attempt(), execution_state::failed, "later");
  f.poll();
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("operator kind 'x'"));
  if (max_attempts == 0) {
    CHECK(f.master->status() == job_status::failed);
    return;
  }
  // The new attempt's failures are its own: a CANCELED-only cause of the old attempt does not
  // turn its FAILED reports into replacements.
  f.advance(100ms);
  f.report_all(execution_state::running);
  REQUIRE(f.master->status() == job_status::running);
  f.master->on_task_state(sums.subtask(0).current_attempt(), execution_state::failed, "second");
  f.poll();
  CHECK(f.master->status() == job_status::restarting);
  CHECK_THAT(*f.master->failure_cause(), Catch::Contains("second"));
}
