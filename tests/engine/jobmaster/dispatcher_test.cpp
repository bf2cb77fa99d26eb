// Submitting, persisting and resuming jobs across a coordinator restart.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <random>

#include <asio/io_context.hpp>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/jobmaster/dispatcher.hpp"
#include "graph/stream_environment.hpp"
#include "tests/engine/keyed_savepoint.hpp"
#include "tests/engine/test_gateway.hpp"

using namespace snapflow;
using namespace snapflow::test;
using namespace std::chrono_literals;

namespace {

class null_deployer : public task_deployment_gateway {
 public:
  int deployed = 0;
  void deploy(const worker_id&, const task_deployment_descriptor&) override { ++deployed; }
  void cancel(const worker_id&, const job_id&, const execution_attempt_id&) override {}
};

// sequence_source -> keyed_count -> print_sink, the count's state cut at `max_parallelism`.
job_graph keyed_job(const std::string& name, std::uint32_t max_parallelism) {
  stream_environment env;
  env.set_job_name(name).enable_checkpointing(10ms);
  env.add_source("sequence_source", {{"count", "10"}})
      .key_by()
      .count()
      .uid("count")
      .set_max_parallelism(max_parallelism)
      .add_sink("print_sink");
  return env.build_job_graph();
}

job_graph small_job(const std::string& name) {
  stream_environment env;
  env.set_job_name(name).enable_checkpointing(10ms);
  env.add_source("sequence_source", {{"count", "10"}}).add_sink("print_sink");
  return env.build_job_graph();
}

struct fixture {
  asio::io_context io;
  manual_clock clock;
  std::filesystem::path state_dir = std::filesystem::temp_directory_path() /
                                     ("snapflow-disp-" + std::to_string(std::random_device{}()));
  std::shared_ptr<null_deployer> deployer = std::make_shared<null_deployer>();
  dispatcher::submit_failure failure = dispatcher::submit_failure::none;

  ~fixture() {
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);
  }
  std::shared_ptr<dispatcher> make() {
    auto workers = std::make_shared<worker_registry>();
    REQUIRE(workers->register_worker("w1", 4, "tcp://w1", clock.now_us()));
    return std::make_shared<dispatcher>(io.get_executor(), workers, deployer,
                                        std::make_shared<recording_gateway>(),
                                        dispatcher::options{state_dir, io.get_executor(), {}});
  }
  result<job_id> submit(dispatcher& d, job_graph g,
                        std::optional<std::filesystem::path> savepoint = {}) {
    std::optional<result<job_id>> out;
    d.submit(std::move(g), std::move(savepoint),
             [&](result<job_id> r, dispatcher::submit_failure why) {
               out = std::move(r);
               failure = why;
             });
    for (int i = 0; i < 10 && !out; ++i) {
      io.restart();
      io.poll();
    }
    REQUIRE(out);
    return *out;
  }
};

}  // namespace

TEST_CASE("a submitted job is persisted, listed and deployed") {
  fixture f;
  auto d = f.make();
  auto id = f.submit(*d, small_job("one"));
  REQUIRE(id);
  CHECK(std::filesystem::exists(d->job_folder(*id) / "job"));
  auto jobs = d->list();
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].name == "one");
  CHECK(jobs[0].status == job_status::created);
  CHECK(f.deployer->deployed == 2);
}

TEST_CASE("an invalid job is refused with the reason and nothing is persisted") {
  fixture f;
  auto d = f.make();
  auto g = small_job("bad");
  g.vertices[0].parallelism = 0;
  auto id = f.submit(*d, g);
  REQUIRE_FALSE(id);
  CHECK_THAT(id.err().message, Catch::Contains("parallelism"));
  CHECK(d->list().empty());
  CHECK_FALSE(std::filesystem::exists(f.state_dir / "jobs"));
}

TEST_CASE("a missing savepoint folder is a clear submit error") {
  fixture f;
  auto d = f.make();
  auto id = f.submit(*d, small_job("sp"), f.state_dir / "no-such-savepoint");
  REQUIRE_FALSE(id);
  CHECK_THAT(id.err().message, Catch::Contains("savepoint"));
}

TEST_CASE("a savepoint taken at another max parallelism is refused at submission, naming both "
          "values, and nothing is persisted") {
  fixture f;
  auto d = f.make();
  const job_graph g = keyed_job("keyed", 64);
  const auto savepoint = write_keyed_savepoint(f.state_dir / "savepoints" / "sp-1", g, "count", 128);
  auto id = f.submit(*d, g, savepoint);
  REQUIRE_FALSE(id);
  CHECK(f.failure == dispatcher::submit_failure::refused);
  CHECK_THAT(id.err().message, Catch::Contains("'count'") &&
                                   Catch::Contains("max parallelism 128") &&
                                   Catch::Contains("max parallelism 64"));
  CHECK(d->list().empty());
  CHECK_FALSE(std::filesystem::exists(f.state_dir / "jobs"));
  CHECK(f.deployer->deployed == 0);

  // The same savepoint into the job at the max parallelism it was taken at starts.
  auto same = f.submit(*d, keyed_job("keyed", 128), savepoint);
  REQUIRE(same);
  CHECK(f.failure == dispatcher::submit_failure::none);
  CHECK(d->find(*same) != nullptr);
}

TEST_CASE("a second submission under an id still being submitted is a conflict") {
  fixture f;
  auto d = f.make();
  job_graph g = small_job("twice");
  g.id = "fixed-id";
  std::vector<dispatcher::submit_failure> outcomes;
  const auto record = [&](result<job_id>, dispatcher::submit_failure why) {
    outcomes.push_back(why);
  };
  d->submit(g, std::nullopt, record);
  d->submit(g, std::nullopt, record);  // before the first one's answer
  for (int i = 0; i < 10 && outcomes.size() < 2; ++i) {
    f.io.restart();
    f.io.poll();
  }
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0] == dispatcher::submit_failure::conflict);
  CHECK(outcomes[1] == dispatcher::submit_failure::none);
  CHECK(d->list().size() == 1);
}

TEST_CASE("a restarted coordinator resumes unfinished jobs but not ended ones") {
  fixture f;
  job_id running, canceled;
  {
    auto d = f.make();
    running = *f.submit(*d, small_job("keeps running"));
    canceled = *f.submit(*d, small_job("canceled"));
    REQUIRE(d->cancel(canceled));
    f.io.restart();
    f.io.poll();  // the terminal marker is written on the I/O executor
    CHECK_FALSE(d->cancel("nope"));
  }
  auto d = f.make();
  auto resumed = d->recover();
  CHECK(resumed == std::vector<job_id>{running});
  REQUIRE(d->find(running));
  CHECK(d->find(canceled) == nullptr);
}

TEST_CASE("a resumed job's attempt numbers start above every attempt of the earlier start") {
  // Workers drop data batches of attempts older than one they have seen: a restarted
  // coordinator that began again at attempt 0 would have its data dropped as stale.
  fixture f;
  job_id id;
  std::uint32_t first_start = 0;
  {
    auto d = f.make();
    id = *f.submit(*d, small_job("resumed"));
    for (execution_vertex* v : d->find(id)->graph().all_execution_vertices())
      first_start = std::max(first_start, v->current_attempt().attempt);
  }
  for (int restart = 1; restart <= 2; ++restart) {
    auto d = f.make();
    REQUIRE(d->recover() == std::vector<job_id>{id});
    for (execution_vertex* v : d->find(id)->graph().all_execution_vertices())
      CHECK(v->current_attempt().attempt ==
            first_start + static_cast<std::uint32_t>(restart) * job_master::attempts_per_start);
  }
  // A floor file that is not a number stops the job from starting, with a clear reason.
  std::ofstream(f.state_dir / id / "attempt_floor", std::ios::trunc) << "garbage";
  auto d = f.make();
  CHECK(d->recover().empty());
}

TEST_CASE("a corrupt persisted job is skipped with a warning, others still resume") {
  fixture f;
  job_id good;
  {
    auto d = f.make();
    good = *f.submit(*d, small_job("good"));
  }
  std::filesystem::create_directories(f.state_dir / "jobs" / "garbage");
  std::ofstream(f.state_dir / "jobs" / "garbage" / "job") << "not msgpack at all";
  auto d = f.make();
  CHECK(d->recover() == std::vector<job_id>{good});
}

namespace {

void run_all_tasks(dispatcher& d, const job_id& id) {
  for (execution_vertex* v : d.find(id)->graph().all_execution_vertices())
    d.on_task_state(id, v->current_attempt(), execution_state::running, "");
}

std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool has_metadata_log(const std::filesystem::path& dir) {
  for (const auto& name : names_in(dir))
    if (metadata_log::segment_number(name)) return true;
  return false;
}

}  // namespace

TEST_CASE("a restarted coordinator lists ended jobs as summaries, and a resumed job keeps its "
          "start time and restart count") {
  fixture f;
  job_id running, canceled;
  std::int64_t running_start = 0, canceled_start = 0;
  {
    auto d = f.make();
    running = *f.submit(*d, small_job("keeps running"));
    running_start = d->summary(running)->start_time_ms;
    CHECK(running_start == f.clock.now_us() / 1000);
    f.clock.advance(5s);
    canceled = *f.submit(*d, small_job("canceled"));
    canceled_start = d->summary(canceled)->start_time_ms;
    CHECK(canceled_start == running_start + 5000);
    // The running job fails over once: its restart count goes to 1.
    run_all_tasks(*d, running);
    d->find(running)->fail("a task failed");
    for (int i = 0; i < 10 && d->find(running)->restarts() == 0; ++i) {
      f.clock.advance(1s);
      f.io.restart();
      f.io.poll();
    }
    REQUIRE(d->find(running)->restarts() == 1);
    REQUIRE(d->cancel(canceled));
    f.io.restart();
    f.io.poll();  // the terminal marker and the progress are written on the I/O executor
    CHECK(d->summary(canceled)->end_time_ms > 0);
  }
  // A crash right after the end left a checkpoint in progress and a metadata log segment.
  std::filesystem::create_directories(f.state_dir / canceled / "chk-9");
  std::ofstream(f.state_dir / canceled / "chk-9" / "state") << "s";
  std::ofstream(f.state_dir / canceled / "_checkpoints-3.log") << std::string(4096, '\0');
  f.clock.advance(1min);
  auto d = f.make();
  CHECK(d->recover() == std::vector<job_id>{running});
  CHECK_FALSE(std::filesystem::exists(f.state_dir / canceled / "chk-9"));
  CHECK_FALSE(std::filesystem::exists(f.state_dir / canceled / "_checkpoints-3.log"));
  // The ended job: listed, with its final status, never run.
  CHECK(d->find(canceled) == nullptr);
  auto ended = d->summary(canceled);
  REQUIRE(ended);
  CHECK(ended->name == "canceled");
  CHECK(ended->status == job_status::canceled);
  CHECK(ended->start_time_ms == canceled_start);
  CHECK(ended->end_time_ms >= canceled_start);
  auto list = d->list();
  REQUIRE(list.size() == 2);
  CHECK(std::count_if(list.begin(), list.end(),
                      [&](const job_summary& s) { return s.id == canceled; }) == 1);
  CHECK_THAT(d->cancel(canceled).err().message, Catch::Contains("has already ended (CANCELED)"));
  // Its id stays taken.
  job_graph again = small_job("again");
  again.id = canceled;
  CHECK_FALSE(f.submit(*d, again).ok());
  CHECK(f.failure == dispatcher::submit_failure::conflict);
  // The resumed job: the same start time and restart count.
  REQUIRE(d->find(running));
  CHECK(d->find(running)->restarts() == 1);
  CHECK(d->summary(running)->start_time_ms == running_start);
  CHECK(d->summary(running)->restarts == 1);
}

TEST_CASE("a job that ended leaves no metadata log and no orphaned checkpoint folder, even one a "
          "late state file made again") {
  fixture f;
  auto d = f.make();
  const job_id id = *f.submit(*d, small_job("ends"));
  run_all_tasks(*d, id);
  f.io.restart();
  f.io.poll();
  auto* master = d->find(id);
  REQUIRE(master->status() == job_status::running);
  auto* coordinator = master->coordinator();
  const auto job_dir = f.state_dir / id;
  auto poll = [&] {
    for (int i = 0; i < 10; ++i) {
      f.io.restart();
      if (f.io.poll() == 0) return;
    }
  };
  // Checkpoint 1 completes (its metadata goes to the job's log) ...
  coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  poll();
  for (execution_vertex* v : master->graph().all_execution_vertices())
    coordinator->receive_ack({id, v->current_attempt(), 1, {}, {}});
  poll();
  REQUIRE(coordinator->core().latest_completed_id() == 1);
  CHECK(has_metadata_log(job_dir));
  // ... checkpoint 2 is declined, and a task's late state file makes its folder again.
  coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  poll();
  execution_vertex* first = master->graph().all_execution_vertices().front();
  coordinator->receive_decline(
      {id, first->current_attempt(), 2, checkpoint_failure_reason::checkpoint_declined_task_not_ready,
       "not ready"});
  poll();
  std::filesystem::create_directories(job_dir / "chk-2");
  std::ofstream(job_dir / "chk-2" / "late-state") << "late";

  REQUIRE(d->cancel(id));
  poll();
  CHECK_FALSE(has_metadata_log(job_dir));
  CHECK_FALSE(std::filesystem::exists(job_dir / "chk-2"));
  // Canceled with delete_on_cancellation: nothing of the checkpoints is kept.
  CHECK_FALSE(std::filesystem::exists(job_dir / "chk-1"));

  // A state file later still: the sweep after final_sweep_delay_us takes it too.
  std::filesystem::create_directories(job_dir / "chk-2");
  std::ofstream(job_dir / "chk-2" / "later-state") << "later";
  f.clock.advance(std::chrono::microseconds(checkpoint_coordinator::final_sweep_delay_us));
  poll();
  CHECK_FALSE(std::filesystem::exists(job_dir / "chk-2"));
  CHECK_FALSE(has_metadata_log(job_dir));
}

TEST_CASE("recovery removes the folders of checkpoints that never completed and completed ones "
          "beyond what the job retains") {
  fixture f;
  job_graph g = small_job("recovered");
  g.id = "0123456789abcdef0123456789abcdef";
  const auto job_dir = f.state_dir / g.id;
  checkpoint_storage storage(job_dir);
  // Completed checkpoints 1..3 (the job retains 1), each with a state file.
  for (checkpoint_id id = 1; id <= 3; ++id) {
    completed_checkpoint c;
    c.job = g.id;
    c.id = id;
    c.kind = checkpoint_trigger_kind::periodic;
    c.location = storage.checkpoint_dir(id).string();
    std::filesystem::create_directories(c.location);
    std::ofstream(std::filesystem::path(c.location) / "state") << "s";
    REQUIRE(storage.write_metadata(c).ok());
  }
  // In progress at the crash: state files and no metadata, or an empty one; and a torn one.
  std::filesystem::create_directories(job_dir / "chk-4");
  std::ofstream(job_dir / "chk-4" / "state") << "s";
  std::filesystem::create_directories(job_dir / "chk-5");
  std::ofstream(job_dir / "chk-5" / "_metadata");
  std::ofstream(job_dir / "chk-5" / "state") << "s";
  std::filesystem::create_directories(job_dir / "chk-6");
  std::ofstream(job_dir / "chk-6" / "_metadata") << "SNAPFLOW-CHK torn";
  // Not a checkpoint folder: left alone.
  std::filesystem::create_directories(job_dir / "chk-x");

  auto state = job_master::load_durable_state(f.state_dir, g, std::nullopt);
  REQUIRE(state.ok());
  REQUIRE(state->checkpoints.size() == 1);
  CHECK(state->checkpoints[0].id == 3);
  for (const char* gone : {"chk-1", "chk-2", "chk-4", "chk-5"}) {
    INFO(gone);
    CHECK_FALSE(std::filesystem::exists(job_dir / gone));
  }
  CHECK(std::filesystem::exists(job_dir / "chk-3" / "state"));
  // A damaged `_metadata` may be a completed checkpoint the disk tore: left for a person.
  CHECK(std::filesystem::exists(job_dir / "chk-6" / "_metadata"));
  CHECK(std::filesystem::exists(job_dir / "chk-x"));
}
