// Submitting, persisting and resuming jobs across a coordinator restart.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <random>

#include <asio/io_context.hpp>

#include "engine/jobmaster/dispatcher.hpp"
#include "graph/stream_environment.hpp"
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
    d.submit(std::move(g), std::move(savepoint), [&](result<job_id> r) { out = std::move(r); });
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
