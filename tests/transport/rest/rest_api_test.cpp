// The coordinator REST API: called directly on its executor, and over HTTP on loopback.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <asio/io_context.hpp>
#include <httplib.h>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/task_executor.hpp"
#include "graph/job_file.hpp"
#include "tests/engine/keyed_savepoint.hpp"
#include "tests/engine/test_gateway.hpp"
#include "transport/rest/rest_server.hpp"

using namespace snapflow;
using namespace snapflow::rest;
using nlohmann::json;

namespace {

class null_deployer : public task_deployment_gateway {
 public:
  std::vector<task_deployment_descriptor> deployed;
  void deploy(const worker_id&, const task_deployment_descriptor& d) override { deployed.push_back(d); }
  void cancel(const worker_id&, const job_id&, const execution_attempt_id&) override {}
};

const char* job_text = R"(
[job]
name = "rest test"
parallelism = 1

[checkpointing]
interval_ms = 50
timeout_ms = 5000

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
)";

// A keyed job whose count's max parallelism is `max_parallelism`.
std::string keyed_job_text(std::uint32_t max_parallelism) {
  return R"(
[job]
name = "keyed"
parallelism = 1
max_parallelism = )" + std::to_string(max_parallelism) + R"(

[checkpointing]
interval_ms = 50

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "count"
kind = "keyed_count"
input = "src"

[[operator]]
uid = "sink"
kind = "print_sink"
input = "count"
)";
}

// A savepoint in `folder` for the job `text` describes, its count's keyed state cut at
// `max_parallelism`.
void write_keyed_savepoint(const std::filesystem::path& folder, const std::string& text,
                           std::uint32_t max_parallelism) {
  auto graph = parse_job_file(text, "keyed.toml");
  REQUIRE(graph);
  test::write_keyed_savepoint(folder, graph.value(), "count", max_parallelism);
}

struct fixture {
  // A manual clock keeps the periodic trigger still, so only the checkpoints a test triggers
  // exist; the HTTP test runs the io_context for real and does without.
  std::optional<manual_clock> clock;
  asio::io_context io;
  std::filesystem::path state_dir = std::filesystem::temp_directory_path() /
                                     ("snapflow-rest-" + std::to_string(std::random_device{}()));
  std::shared_ptr<null_deployer> deployer = std::make_shared<null_deployer>();
  std::shared_ptr<test::recording_gateway> gateway = std::make_shared<test::recording_gateway>();
  std::shared_ptr<dispatcher> jobs;
  std::shared_ptr<coordinator_rest_api> api;

  explicit fixture(bool manual_time = true) {
    if (manual_time) clock.emplace();
    auto workers = std::make_shared<worker_registry>();
    REQUIRE(workers->register_worker("w1", 2, "tcp://w1", 0));
    jobs = std::make_shared<dispatcher>(io.get_executor(), workers, deployer, gateway,
                                        dispatcher::options{state_dir, io.get_executor(), {}});
    api = std::make_shared<coordinator_rest_api>(jobs);
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
  // The answer to one request: at once, or, for a submission, once the dispatcher answered.
  rest_response serve(rest_request request) {
    std::optional<rest_response> out;
    api->serve(request, [&out](rest_response r) { out = std::move(r); });
    for (int i = 0; i < 10 && !out; ++i) poll();
    REQUIRE(out);
    return *out;
  }
  json call(std::string method, std::string path, std::string body = {}, int expect = 200,
            std::map<std::string, std::string> query = {}) {
    auto r = serve({std::move(method), std::move(path), std::move(query), std::move(body)});
    INFO(r.body);
    CHECK(r.status == expect);
    poll();
    return json::parse(r.body);
  }
  job_id submit_and_run(const std::string& text = job_text) {
    auto submitted = call("POST", "/jobs", text, 202);
    job_id id = submitted["jobid"];
    for (auto& d : deployer->deployed) jobs->on_task_state(id, d.attempt, execution_state::running, "");
    poll();
    return id;
  }
};

}  // namespace

TEST_CASE("REST: submit a job file, list it, see its details") {
  fixture f;
  job_id id = f.submit_and_run();
  auto list = f.call("GET", "/jobs");
  REQUIRE(list["jobs"].size() == 1);
  CHECK(list["jobs"][0]["id"] == id);
  CHECK(list["jobs"][0]["status"] == "RUNNING");
  auto details = f.call("GET", "/jobs/" + id);
  CHECK(details["name"] == "rest test");
  CHECK(details["vertices"].size() == 2);
  CHECK(details["vertices"][0]["subtasks"][0]["worker"] == "w1");
}

TEST_CASE("REST: a bad job file is a 400 naming file, key and line") {
  fixture f;
  auto r = f.call("POST", "/jobs", "[job]\nname = 1\n", 400);
  CHECK_THAT(r["errors"][0].get<std::string>(), Catch::Contains("job file:2"));
  f.call("GET", "/jobs/ffff", {}, 404);
  f.call("GET", "/nothing-here", {}, 404);
}

TEST_CASE("REST: trigger a checkpoint, poll its outcome, read stats and details") {
  fixture f;
  job_id id = f.submit_and_run();
  auto trig = f.call("POST", "/jobs/" + id + "/checkpoints", {}, 202);
  std::string request = trig["request-id"];
  CHECK(f.call("GET", "/jobs/" + id + "/checkpoints/" + request)["status"]["id"] == "IN_PROGRESS");
  auto* master = f.jobs->find(id);
  for (auto* v : master->graph().all_execution_vertices())
    master->coordinator()->receive_ack({id, v->current_attempt(), 1, {}, {1, 2, 3, 0}});
  f.poll();
  auto done = f.call("GET", "/jobs/" + id + "/checkpoints/" + request);
  CHECK(done["status"]["id"] == "COMPLETED");
  CHECK(done["operation"]["checkpointId"] == 1);
  CHECK_THAT(done["operation"]["location"].get<std::string>(), Catch::Contains("chk-1"));

  auto stats = f.call("GET", "/jobs/" + id + "/checkpoints");
  CHECK(stats["counts"]["completed"] == 1);
  CHECK(stats["latest"]["completed"]["id"] == 1);
  CHECK(stats["history"].size() == 1);
  for (auto key : {"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"})
    CHECK(stats["summary"]["end_to_end_duration"].contains(key));
  auto details = f.call("GET", "/jobs/" + id + "/checkpoints/details/1");
  REQUIRE(details["subtasks"].size() == 2);
  CHECK(details["subtasks"][0]["checkpoint"]["sync_us"] == 1);
  CHECK(details["subtasks"][0]["alignment"]["duration_us"] == 3);
  f.call("GET", "/jobs/" + id + "/checkpoints/details/99", {}, 404);
  f.call("GET", "/jobs/" + id + "/checkpoints/details/x", {}, 400);

  // Per vertex: what its acknowledged subtasks reported, always there.
  REQUIRE(details["tasks"].size() == 2);
  for (int v = 0; v < 2; ++v) {
    const json& t = details["tasks"][v];
    CHECK(t["vertex"] == v);
    CHECK(t["uid"] == (v == 0 ? "src" : "sink"));
    CHECK(t["num_subtasks"] == 1);
    CHECK(t["num_acknowledged_subtasks"] == 1);
    CHECK(t["max_alignment_duration_us"] == 3);
    CHECK(t["end_to_end_duration"]["min_us"] == t["end_to_end_duration"]["max_us"]);
  }
  // Large jobs: the summary without the per-subtask list, or one vertex's subtasks.
  const std::string path = "/jobs/" + id + "/checkpoints/details/1";
  auto summary_only = f.call("GET", path, {}, 200, {{"subtasks", "none"}});
  CHECK_FALSE(summary_only.contains("subtasks"));
  CHECK(summary_only["tasks"].size() == 2);
  auto sink_only = f.call("GET", path, {}, 200, {{"vertex", "1"}});
  REQUIRE(sink_only["subtasks"].size() == 1);
  CHECK(sink_only["subtasks"][0]["vertex"] == 1);
  CHECK_THAT(f.call("GET", path, {}, 400, {{"vertex", "2"}})["errors"][0].get<std::string>(),
             Catch::Contains("vertex must be a vertex id of this job, got '2'"));
  f.call("GET", path, {}, 400, {{"vertex", "-1"}});
  f.call("GET", path, {}, 400, {{"subtasks", "some"}});
}

TEST_CASE("REST: checkpoint config and changing the interval of a running job") {
  fixture f;
  job_id id = f.submit_and_run();
  auto cfg = f.call("GET", "/jobs/" + id + "/checkpoints/config");
  CHECK(cfg["interval"] == 50);
  CHECK(cfg["mode"] == "exactly_once");
  f.call("PATCH", "/jobs/" + id + "/checkpoints/config", R"({"interval": 20})");
  CHECK(f.call("GET", "/jobs/" + id + "/checkpoints/config")["interval"] == 20);
  f.call("PATCH", "/jobs/" + id + "/checkpoints/config", R"({"interval": 0})", 400);
  f.call("PATCH", "/jobs/" + id + "/checkpoints/config", "nonsense", 400);
}

TEST_CASE("REST: a running job submitted unaligned switches between unaligned and aligned "
          "checkpoints; bad bodies and an aligned job are refused") {
  fixture f;
  const std::string config = "/checkpoints/config";
  // Submitted aligned: unaligned cannot be switched on (its tasks do not persist in-flight
  // records), aligned stays as it is.
  job_id aligned = f.submit_and_run();
  CHECK_THAT(f.call("PATCH", "/jobs/" + aligned + config, R"({"unaligned": true})", 409)["errors"]
                 [0]
                     .get<std::string>(),
             Catch::Contains("submitted with aligned checkpoints"));
  f.call("PATCH", "/jobs/" + aligned + config, R"({"unaligned": false})");
  for (const char* bad : {R"({})", R"({"unaligned": "yes"})", R"({"unaligned": 1})",
                          R"({"interval": 20, "also": 1})", R"({"interval": 2.5})", "[]"})
    f.call("PATCH", "/jobs/" + aligned + config, bad, 400);
  CHECK(f.call("GET", "/jobs/" + aligned + config)["unaligned_checkpoints"] == false);
  CHECK(f.call("GET", "/jobs/" + aligned + config)["interval"] == 50);

  std::string text = job_text;
  text.replace(text.find("timeout_ms = 5000"), 17,
               "timeout_ms = 5000\nunaligned = true\naligned_checkpoint_timeout_ms = 10");
  job_id id = f.submit_and_run(text);
  auto* master = f.jobs->find(id);
  // Each checkpoint's trigger options carry the mode in force when it was triggered.
  auto trigger_one = [&](checkpoint_id n) {
    f.call("POST", "/jobs/" + id + "/checkpoints", {}, 202);
    REQUIRE(!f.gateway->triggers.empty());
    CHECK(f.gateway->triggers.back().id == n);
    const checkpoint_options options = f.gateway->triggers.back().options;
    for (auto* v : master->graph().all_execution_vertices())
      master->coordinator()->receive_ack({id, v->current_attempt(), n, {}, {1, 2, 3, 0}});
    f.poll();
    return options;
  };
  CHECK(trigger_one(1).unaligned);
  auto switched = f.call("PATCH", "/jobs/" + id + config, R"({"unaligned": false})");
  CHECK(switched["unaligned"] == false);
  CHECK(switched["interval"] == 50);
  CHECK(f.call("GET", "/jobs/" + id + config)["unaligned_checkpoints"] == false);
  CHECK_FALSE(trigger_one(2).unaligned);
  f.call("PATCH", "/jobs/" + id + config, R"({"unaligned": true, "interval": 30})");
  const checkpoint_options back = trigger_one(3);
  CHECK(back.unaligned);
  CHECK(back.aligned_timeout_ms == 10);  // kept while aligned
  CHECK(f.call("GET", "/jobs/" + id + config)["interval"] == 30);
}

TEST_CASE("REST: savepoint with cancel, then the job is canceled") {
  fixture f;
  job_id id = f.submit_and_run();
  f.api->set_savepoint_targets({confined_folder(f.state_dir / "savepoints"), false});
  auto trig = f.call("POST", "/jobs/" + id + "/savepoints",
                     json{{"target-directory", "sp"}, {"cancel-job", true}}.dump(),
                     202);
  auto* master = f.jobs->find(id);
  for (auto* v : master->graph().all_execution_vertices())
    master->coordinator()->receive_ack({id, v->current_attempt(), 1, {}, {}});
  f.poll();
  auto done = f.call("GET", "/jobs/" + id + "/savepoints/" + trig["request-id"].get<std::string>());
  CHECK_THAT(done["operation"]["location"].get<std::string>(), Catch::Contains("savepoint-"));
  CHECK(f.call("GET", "/jobs/" + id)["state"] == "CANCELED");
  f.call("PATCH", "/jobs/" + id, {}, 409);
}

TEST_CASE("REST: metrics use Flink's checkpoint metric names") {
  fixture f;
  f.submit_and_run();
  auto r = f.serve({"GET", "/metrics", {}, {}});
  CHECK(r.status == 200);
  for (auto name : {"totalNumberOfCheckpoints", "numberOfInProgressCheckpoints",
                    "numberOfCompletedCheckpoints", "numberOfFailedCheckpoints",
                    "lastCheckpointDuration", "lastCheckpointSize", "lastCompletedCheckpointId",
                    "lastCheckpointRestoreTimestamp", "snapflow_seconds_since_last_completed_checkpoint"})
    CHECK_THAT(r.body, Catch::Contains(name));
}

TEST_CASE("REST: /metrics has barrier latency by stage as histograms in the right buckets") {
  fixture f;
  job_id id = f.submit_and_run();
  f.call("POST", "/jobs/" + id + "/checkpoints", {}, 202);
  auto* master = f.jobs->find(id);
  const std::int64_t trigger_us =
      master->coordinator()->core().stats().find(1)->trigger_timestamp_us;
  f.clock->advance(std::chrono::microseconds(10'000));
  // Each subtask: barrier 400 us after the trigger, 3 ms aligning, 1 + 2 ms snapshot; the ack
  // arrives 10 ms after the trigger, so 3.6 ms are left for the ack's way back.
  checkpoint_metrics m;
  m.sync_duration_us = 1'000;
  m.async_duration_us = 2'000;
  m.alignment_duration_us = 3'000;
  m.barrier_received_timestamp_us = trigger_us + 400;
  for (auto* v : master->graph().all_execution_vertices())
    master->coordinator()->receive_ack({id, v->current_attempt(), 1, {}, m});
  f.poll();
  auto details = f.call("GET", "/jobs/" + id + "/checkpoints/details/1");
  CHECK(details["subtasks"][0]["start_delay_us"] == 400);

  auto r = f.serve({"GET", "/metrics", {}, {}});
  REQUIRE(r.status == 200);
  const std::string name = "snapflow_checkpoint_stage_duration_seconds";
  const std::string labels = "{job_id=\"" + id + "\",job_name=\"rest test\",stage=\"";
  auto bucket = [&](const std::string& stage, const std::string& le, int count) {
    return name + "_bucket" + labels + stage + "\",le=\"" + le + "\"} " + std::to_string(count) +
           "\n";
  };
  CHECK_THAT(r.body, Catch::Contains("# TYPE " + name + " histogram\n"));
  CHECK_THAT(r.body, Catch::Contains(bucket("trigger_to_barrier", "0.00025", 0)));
  CHECK_THAT(r.body, Catch::Contains(bucket("trigger_to_barrier", "0.0005", 2)));
  CHECK_THAT(r.body, Catch::Contains(bucket("barrier_to_aligned", "0.0025", 0)));
  CHECK_THAT(r.body, Catch::Contains(bucket("barrier_to_aligned", "0.005", 2)));
  CHECK_THAT(r.body, Catch::Contains(bucket("aligned_to_snapshot_done", "0.0025", 0)));
  CHECK_THAT(r.body, Catch::Contains(bucket("aligned_to_snapshot_done", "0.005", 2)));
  CHECK_THAT(r.body, Catch::Contains(bucket("snapshot_done_to_ack", "0.0025", 0)));
  CHECK_THAT(r.body, Catch::Contains(bucket("snapshot_done_to_ack", "0.005", 2)));
  CHECK_THAT(r.body, Catch::Contains(bucket("snapshot_done_to_ack", "+Inf", 2)));
  CHECK_THAT(r.body, Catch::Contains(name + "_sum" + labels + "trigger_to_barrier\"} 0.0008\n"));
  CHECK_THAT(r.body, Catch::Contains(name + "_sum" + labels + "snapshot_done_to_ack\"} 0.0072\n"));
  CHECK_THAT(r.body, Catch::Contains(name + "_count" + labels + "barrier_to_aligned\"} 2\n"));
}

TEST_CASE("REST: job details carry record counters of current attempts, edges and sources") {
  fixture f;
  auto io = std::make_shared<task_io_metrics>();
  f.api = std::make_shared<coordinator_rest_api>(f.jobs, io);
  job_id id = f.submit_and_run();
  auto* master = f.jobs->find(id);
  const auto vertices = master->graph().all_execution_vertices();
  REQUIRE(vertices.size() == 2);
  const execution_attempt_id source = vertices[0]->current_attempt();
  const execution_attempt_id sink = vertices[1]->current_attempt();
  REQUIRE(source.subtask.vertex != sink.subtask.vertex);
  io->report({id, source, 0, 1'000}, 5'000'000);
  task_io_counters sink_io{id, sink, 990, 0};
  sink_io.in_flight_bytes_bound = 8192;
  sink_io.buffered_in_bytes = 3000;
  io->report(sink_io, 6'000'000);
  // An earlier attempt's late report neither replaces nor shows.
  io->report({id, {source.subtask, source.attempt + 1}, 0, 7}, 7'000'000);
  io->report({id, source, 0, 1'200}, 8'000'000);

  auto d = f.call("GET", "/jobs/" + id);
  REQUIRE(d["edges"].size() == 1);
  CHECK(d["edges"][0]["ship_strategy"] == "forward");
  json src, snk;
  for (const auto& v : d["vertices"]) (v["is_source"].get<bool>() ? src : snk) = v;
  // The newer attempt reported 7; the current one (older) is shown as having no counters yet.
  CHECK(src["metrics"]["write-records"] == 0);
  CHECK(snk["metrics"]["read-records"] == 990);
  CHECK(snk["subtasks"][0]["metrics"]["read-records"] == 990);
  CHECK(snk["subtasks"][0]["metrics"]["records-timestamp-us"] == 6'000'000);
  CHECK(snk["subtasks"][0]["metrics"]["in-flight-bytes-bound"] == 8192);
  CHECK(snk["subtasks"][0]["metrics"]["buffered-in-bytes"] == 3000);
  CHECK(snk["metrics"]["buffered-in-bytes"] == 3000);
  CHECK(src["subtasks"][0]["metrics"]["in-flight-bytes-bound"] == 0);
  CHECK_THAT(f.api->metrics_text(), Catch::Contains("snapflow_buffered_in_bytes{job_id=\"" + id));
  CHECK(src["subtasks"][0]["metrics"]["records-timestamp-us"] == 0);  // none of its own yet
  CHECK(d["source-records"] == 0);
  CHECK(d["records-timestamp"] == 7'000);  // ms of the newest report taken (8 s was stale)
  CHECK(d.contains("now"));

  // Without the newer attempt, the source's own numbers show.
  io->forget(id);
  io->report({id, source, 0, 1'200}, 9'000'000);
  d = f.call("GET", "/jobs/" + id);
  CHECK(d["source-records"] == 1'200);
  for (const auto& v : d["vertices"])
    if (v["is_source"].get<bool>())
      CHECK(v["subtasks"][0]["metrics"]["records-timestamp-us"] == 9'000'000);
}

TEST_CASE("REST: the HTTP server answers on loopback, serves the web page, and a submitted job is "
          "found at once") {
  fixture f(false);
  rest_server server(f.io.get_executor(), f.api);
  auto started = server.start("127.0.0.1", 0);
  REQUIRE(started);
  const int port = *started;
  // The coordinator thread: the io_context runs while the client waits.
  auto guard = asio::make_work_guard(f.io);
  std::thread coordinator([&] { f.io.run(); });
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  auto page = client.Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK_THAT(page->body, Catch::Contains("snapflow"));
  auto jobs = client.Get("/jobs");
  REQUIRE(jobs);
  CHECK(jobs->status == 200);
  CHECK(json::parse(jobs->body)["jobs"].empty());
  auto missing = client.Get("/jobs/none");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  // A submission answers once the job is known: the very next call finds it.
  auto submitted = client.Post("/jobs", job_text, "application/toml");
  REQUIRE(submitted);
  REQUIRE(submitted->status == 202);
  const std::string id = json::parse(submitted->body)["jobid"];
  auto details = client.Get("/jobs/" + id);
  REQUIRE(details);
  CHECK(details->status == 200);
  guard.reset();
  f.io.stop();
  coordinator.join();
  server.stop();
}

TEST_CASE("REST savepoint targets: absolute, '..', NUL and symlinks out refused, nothing written, "
          "relative under the root accepted") {
  fixture f;
  job_id id = f.submit_and_run();
  const auto root = f.state_dir / "savepoints";
  const auto outside = f.state_dir / "outside";
  std::filesystem::create_directories(root);
  std::filesystem::create_directories(outside);
  std::filesystem::create_directory_symlink(outside, root / "escape");
  f.api->set_savepoint_targets({confined_folder(root), false});
  const std::string path = "/jobs/" + id + "/savepoints";
  for (const std::string& target :
       {outside.string(), std::string("../outside"), std::string("a/../../outside"),
        std::string("escape"), std::string("escape/deeper"), std::string("bad\0name", 8)}) {
    INFO(target);
    auto refused = f.call("POST", path, json{{"target-directory", target}}.dump(), 400);
    CHECK_THAT(refused["errors"][0].get<std::string>(), Catch::Contains(root.string()));
  }
  f.call("POST", path, json{{"target-directory", 7}}.dump(), 400);
  CHECK(std::filesystem::is_empty(outside));
  CHECK(f.jobs->find(id)->coordinator()->core().stats().counts().triggered == 0);

  auto trig = f.call("POST", path, json{{"target-directory", "nightly/one"}}.dump(), 202);
  auto* master = f.jobs->find(id);
  for (auto* v : master->graph().all_execution_vertices())
    master->coordinator()->receive_ack({id, v->current_attempt(), 1, {}, {}});
  f.poll();
  auto done = f.call("GET", path + "/" + trig["request-id"].get<std::string>());
  const std::string location = done["operation"]["location"].get<std::string>();
  CHECK(location.rfind((root / "nightly" / "one").string(), 0) == 0);
  CHECK(std::filesystem::is_empty(outside));
}

TEST_CASE("REST savepoint targets: --allow-savepoint-anywhere accepts absolute targets") {
  fixture f;
  job_id id = f.submit_and_run();
  f.api->set_savepoint_targets({confined_folder(f.state_dir / "savepoints"), true});
  f.call("POST", "/jobs/" + id + "/savepoints",
         json{{"target-directory", (f.state_dir / "elsewhere").string()}}.dump(), 202);
  // Relative targets still resolve under the root, and still may not climb out of it.
  f.call("POST", "/jobs/" + id + "/savepoints", json{{"target-directory", "../x"}}.dump(), 400);
  // Without any root, a named target is refused.
  f.api->set_savepoint_targets({});
  f.call("POST", "/jobs/" + id + "/savepoints", json{{"target-directory", "x"}}.dump(), 400);
}

TEST_CASE("REST: a submission that cannot start is a 4xx with the reason, and no job is listed") {
  fixture f;
  const auto root = f.state_dir / "savepoints";
  f.api->set_savepoint_targets({confined_folder(root), false, confined_folder(f.state_dir)});
  write_keyed_savepoint(root / "at-256", keyed_job_text(256), 256);
  const auto error_of = [](const json& r) { return r["errors"][0].get<std::string>(); };

  // Missing, taken at another max parallelism: refused by the dispatcher before anything runs.
  auto missing = f.call("POST", "/jobs", keyed_job_text(128), 422, {{"fromSavepoint", "nothing-here"}});
  CHECK_THAT(error_of(missing), Catch::Contains("nothing-here"));
  auto other = f.call("POST", "/jobs", keyed_job_text(128), 422, {{"fromSavepoint", "at-256"}});
  CHECK_THAT(error_of(other), Catch::Contains("'count'") && Catch::Contains("max parallelism 256") &&
                                  Catch::Contains("max parallelism 128"));
  // Outside the savepoint root and the state folder: refused before any read.
  for (const std::string& source : {std::string("/etc"), std::string("../../etc"),
                                    std::string("bad\0x", 5)}) {
    INFO(source);
    auto refused = f.call("POST", "/jobs", keyed_job_text(256), 400, {{"fromSavepoint", source}});
    CHECK_THAT(error_of(refused), Catch::Contains("savepoint"));
  }
  CHECK(f.call("GET", "/jobs")["jobs"].empty());
  CHECK(f.deployer->deployed.empty());

  // At the max parallelism it was taken at, by a relative name or an absolute one in the root.
  auto relative = f.call("POST", "/jobs", keyed_job_text(256), 202, {{"fromSavepoint", "at-256"}});
  f.call("GET", "/jobs/" + relative["jobid"].get<std::string>());
  f.call("POST", "/jobs", keyed_job_text(256), 202, {{"fromSavepoint", (root / "at-256").string()}});
  CHECK(f.call("GET", "/jobs")["jobs"].size() == 2);
}

TEST_CASE("REST: a job's savepoint_dir lies under the savepoint root") {
  fixture f;
  const auto root = f.state_dir / "savepoints";
  f.api->set_savepoint_targets({confined_folder(root), false, confined_folder(f.state_dir)});
  const auto job_with_savepoint_dir = [](const std::string& dir) {
    std::string text = job_text;
    const std::string marker = "timeout_ms = 5000\n";
    text.insert(text.find(marker) + marker.size(), "savepoint_dir = \"" + dir + "\"\n");
    return text;
  };
  for (const std::string& dir : {std::string("/tmp/elsewhere"), std::string("../out")}) {
    INFO(dir);
    auto refused = f.call("POST", "/jobs", job_with_savepoint_dir(dir), 400);
    CHECK_THAT(refused["errors"][0].get<std::string>(),
               Catch::Contains("savepoint_dir") && Catch::Contains(root.string()));
  }
  CHECK(f.call("GET", "/jobs")["jobs"].empty());
  // A relative one is the folder of that name under the root.
  auto ok = f.call("POST", "/jobs", job_with_savepoint_dir("nightly"), 202);
  auto config = f.call("GET", "/jobs/" + ok["jobid"].get<std::string>() + "/checkpoints/config");
  CHECK(config["savepoint_dir"] == (root / "nightly").string());
  // With --allow-savepoint-anywhere an absolute one is taken as it is.
  f.api->set_savepoint_targets({confined_folder(root), true, confined_folder(f.state_dir)});
  f.call("POST", "/jobs", job_with_savepoint_dir((f.state_dir / "anywhere").string()), 202);
}

TEST_CASE("REST: a path or query that is not valid UTF-8 is a 400 without exception text") {
  fixture f;
  job_id id = f.submit_and_run();
  for (const std::string& path : {std::string("/jobs/\xff\xfe"), std::string("/jobs/") + id + "/\xc3",
                                 std::string("/\xed\xa0\x80"), std::string("/jobs/\xc0\xaf")}) {
    for (const char* method : {"GET", "POST", "PATCH", "PUT"}) {
      auto r = f.serve({method, path, {}, {}});
      INFO(method << " " << r.body);
      CHECK(r.status == 400);
      const json body = json::parse(r.body);
      CHECK(body["errors"][0] == "the request path is not valid UTF-8");
      CHECK_THAT(r.body, !Catch::Contains("exception"));
    }
  }
  // Text from outside that is echoed back (a query value) is made valid, not thrown on.
  auto r = f.serve({"PATCH", "/jobs/" + id, {{"mode", "\xff"}}, {}});
  CHECK(r.status == 400);
  CHECK_THAT(json::parse(r.body)["errors"][0].get<std::string>(), Catch::Contains("unknown mode"));
  CHECK(is_valid_utf8("plain /jobs/abc"));
  CHECK(is_valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // é € 😀
  CHECK_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));                 // past U+10FFFF
  CHECK_FALSE(is_valid_utf8("\xe0\x80\xaf"));                     // overlong
  CHECK_FALSE(is_valid_utf8("\xe2\x82"));                         // cut short
}

TEST_CASE("REST: a failed savepoint is not a failed checkpoint and does not fail the job") {
  fixture f;
  job_id id = f.submit_and_run();
  f.api->set_savepoint_targets({confined_folder(f.state_dir / "savepoints"), false});
  // Before it has an id: no target and no savepoint_dir.
  f.call("POST", "/jobs/" + id + "/savepoints", {}, 202);
  // With an id: a subtask declines it with a reason that counts toward tolerable failures for
  // checkpoints (the job tolerates none).
  f.call("POST", "/jobs/" + id + "/savepoints", json{{"target-directory", "sp"}}.dump(), 202);
  auto* master = f.jobs->find(id);
  const auto pending = master->coordinator()->core().pending_ids();
  REQUIRE(pending.size() == 1);
  master->coordinator()->receive_decline({id,
                                          master->graph().all_execution_vertices().front()->current_attempt(),
                                          *pending.begin(), checkpoint_failure_reason::checkpoint_declined,
                                          "disk trouble"});
  f.poll();
  auto counts = f.call("GET", "/jobs/" + id + "/checkpoints")["counts"];
  CHECK(counts["failed"] == 0);
  CHECK(counts["failed_savepoints"] == 2);
  CHECK(counts["total"] == 2);
  CHECK(master->coordinator()->core().failure_manager().continuous_failure_count() == 0);
  CHECK(f.call("GET", "/jobs/" + id)["state"] == "RUNNING");
  auto metrics = f.serve({"GET", "/metrics", {}, {}});
  CHECK_THAT(metrics.body, Catch::Contains("flink_jobmanager_job_numberOfFailedCheckpoints{job_id=\"" +
                                           id + "\",job_name=\"rest test\"} 0\n"));
}

TEST_CASE("REST: start-time is when the job was submitted, and an ended job's series leave "
          "/metrics ended_job_metrics_retention after it ended") {
  fixture f;
  const std::int64_t submitted_ms = f.clock->now_us() / 1000;
  job_id id = f.submit_and_run();
  auto details = f.call("GET", "/jobs/" + id);
  CHECK(details["start-time"] == submitted_ms);
  CHECK(details["end-time"] == -1);
  const std::string series = "flink_jobmanager_job_totalNumberOfCheckpoints{job_id=\"" + id;
  CHECK_THAT(f.serve({"GET", "/metrics", {}, {}}).body, Catch::Contains(series));

  f.clock->advance(std::chrono::seconds(3));
  f.call("PATCH", "/jobs/" + id, {}, 202);
  details = f.call("GET", "/jobs/" + id);
  CHECK(details["state"] == "CANCELED");
  CHECK(details["start-time"] == submitted_ms);
  CHECK(details["end-time"] == submitted_ms + 3000);
  const auto retention = coordinator_rest_api::ended_job_metrics_retention;
  f.clock->advance(retention - std::chrono::seconds(1));
  f.poll();
  CHECK_THAT(f.serve({"GET", "/metrics", {}, {}}).body, Catch::Contains(series));
  f.clock->advance(std::chrono::seconds(1));
  f.poll();
  const auto after = f.serve({"GET", "/metrics", {}, {}}).body;
  CHECK_THAT(after, !Catch::Contains(id));
  CHECK_THAT(after, Catch::Contains("snapflow_workers"));
  // Still listed, and its details still answer.
  CHECK(f.call("GET", "/jobs")["jobs"][0]["id"] == id);
}

TEST_CASE("REST: after a coordinator restart, GET /jobs lists the jobs that had ended") {
  fixture f;
  const std::int64_t submitted_ms = f.clock->now_us() / 1000;
  job_id id = f.submit_and_run();
  f.call("PATCH", "/jobs/" + id, {}, 202);
  f.poll();  // the end is recorded on the I/O executor
  // A new coordinator on the same state folder.
  auto workers = std::make_shared<worker_registry>();
  auto jobs = std::make_shared<dispatcher>(f.io.get_executor(), workers, f.deployer, f.gateway,
                                           dispatcher::options{f.state_dir, f.io.get_executor(), {}});
  CHECK(jobs->recover().empty());
  f.jobs = jobs;
  f.api = std::make_shared<coordinator_rest_api>(jobs);
  auto list = f.call("GET", "/jobs");
  REQUIRE(list["jobs"].size() == 1);
  CHECK(list["jobs"][0]["id"] == id);
  CHECK(list["jobs"][0]["name"] == "rest test");
  CHECK(list["jobs"][0]["status"] == "CANCELED");
  auto details = f.call("GET", "/jobs/" + id);
  CHECK(details["state"] == "CANCELED");
  CHECK(details["start-time"] == submitted_ms);
  CHECK(details["vertices"].empty());
  CHECK(f.call("GET", "/overview")["jobs-cancelled"] == 1);
  CHECK_THAT(f.call("GET", "/jobs/" + id + "/checkpoints", {}, 404)["errors"][0].get<std::string>(),
             Catch::Contains("ended (CANCELED) before this coordinator started"));
  f.call("PATCH", "/jobs/" + id, {}, 409);
  CHECK_THAT(f.serve({"GET", "/metrics", {}, {}}).body, !Catch::Contains(id));
}

TEST_CASE("REST: a running job whose checkpoints or counter reports stopped shows as stalled") {
  fixture f;
  auto io = std::make_shared<task_io_metrics>();
  f.api = std::make_shared<coordinator_rest_api>(f.jobs, io);
  // A checkpoint timeout beyond the test's 11 s: the one pending checkpoint never expires,
  // so the job stays RUNNING while nothing completes.
  std::string text = job_text;
  text.replace(text.find("timeout_ms = 5000"), 17, "timeout_ms = 60000");
  const job_id id = f.submit_and_run(text);
  const auto health = [&] { return f.call("GET", "/jobs/" + id)["health"]; };
  auto h = health();
  CHECK(h["status"] == "ok");
  CHECK(h["reasons"].empty());
  CHECK(h["last-checkpoint-age-ms"] == 0);

  // Counters every second keep it well; checkpoints are triggered but none completes.
  auto* master = f.jobs->find(id);
  const execution_attempt_id source = master->graph().all_execution_vertices()[0]->current_attempt();
  for (int s = 1; s <= 4; ++s) {
    f.clock->advance(std::chrono::seconds(1));
    io->report({id, source, 0, static_cast<std::uint64_t>(s)}, coordinator_clock::now_us());
    f.poll();
  }
  CHECK(health()["status"] == "ok");
  // Past 10 s (three 50 ms intervals are less) without a completed checkpoint, and 5 s
  // without counters: both reasons show.
  for (int s = 0; s < 7; ++s) {
    f.clock->advance(std::chrono::seconds(1));
    f.poll();
  }
  REQUIRE(master->status() == job_status::running);
  h = health();
  CHECK(h["status"] == "stalled");
  REQUIRE(h["reasons"].size() == 2);
  CHECK_THAT(h["reasons"][0].get<std::string>(), Catch::Contains("no checkpoint completed"));
  CHECK_THAT(h["reasons"][1].get<std::string>(), Catch::Contains("no record counters"));
  // Once cancelled it is simply not running.
  f.call("PATCH", "/jobs/" + id, {}, 202);
  CHECK(health()["status"] == "not running");
}

// ---- Restore modes: NO_CLAIM leaves the snapshot alone, CLAIM takes it over.

namespace {

namespace fs = std::filesystem;

// A job that retains `retained` checkpoints and keeps them when cancelled.
std::string claim_job_text(int retained) {
  return R"(
[job]
name = "claims"
parallelism = 1

[checkpointing]
interval_ms = 60000
retained = )" + std::to_string(retained) + R"(
retention = "retain_on_cancellation"

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
)";
}

// Triggers a checkpoint of job `id` and acknowledges it as an incremental one would: every
// subtask writes a file of its own; the first also names the shared files `shared` (writing
// the ones not in the job's shared/ folder yet). Returns the checkpoint's id.
checkpoint_id complete_checkpoint(fixture& f, const job_id& id,
                                  const std::vector<std::string>& shared = {}) {
  f.call("POST", "/jobs/" + id + "/checkpoints", {}, 202);
  auto* master = f.jobs->find(id);
  REQUIRE(master != nullptr);
  auto& core = master->coordinator()->core();
  REQUIRE(core.pending_ids().size() == 1);
  const checkpoint_id cid = core.pending_ids().front();
  const fs::path folder = core.find_pending(cid)->location();
  const fs::path shared_folder = f.state_dir / id / "shared";
  bool first = true;
  for (auto* v : master->graph().all_execution_vertices()) {
    subtask_state s;
    const auto add = [&](const fs::path& file, const std::string& name, handle_sharing sharing) {
      const std::string bytes = "state " + name + " of checkpoint " + std::to_string(cid);
      if (sharing != handle_sharing::shared_reused) {
        fs::create_directories(file.parent_path());
        std::ofstream(file, std::ios::binary) << bytes;
      }
      std::ifstream in(file, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      s.handles.push_back({name, text.str().size(), crc32c(text.str()), std::nullopt, sharing});
    };
    add(folder / ("own-" + std::to_string(v->id().vertex)), "own-" + std::to_string(v->id().vertex),
        handle_sharing::exclusive);
    for (const auto& name : first ? shared : std::vector<std::string>{})
      add(shared_folder / name, name,
          fs::exists(shared_folder / name) ? handle_sharing::shared_reused
                                           : handle_sharing::shared_new);
    first = false;
    master->coordinator()->receive_ack({id, v->current_attempt(), cid, s, {}});
  }
  f.poll();
  REQUIRE(core.latest_completed_id() == cid);
  return cid;
}

// Every file under `folder`: its bytes and modification time.
std::map<fs::path, std::pair<std::string, fs::file_time_type>> fingerprint(const fs::path& folder) {
  std::map<fs::path, std::pair<std::string, fs::file_time_type>> out;
  for (const auto& e : fs::recursive_directory_iterator(folder)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    out[e.path()] = {text.str(), fs::last_write_time(e.path())};
  }
  return out;
}

// An old job that retained chk-1 (shared a, b) and chk-2 (shared b, c) and was cancelled.
job_id old_job_with_checkpoints(fixture& f) {
  job_id old = f.submit_and_run(claim_job_text(2));
  CHECK(complete_checkpoint(f, old, {"a", "b"}) == 1);
  CHECK(complete_checkpoint(f, old, {"b", "c"}) == 2);
  REQUIRE(f.jobs->cancel(old));
  f.poll();
  return old;
}

void run_tasks(fixture& f, const job_id& id) {
  for (auto* v : f.jobs->find(id)->graph().all_execution_vertices())
    f.jobs->on_task_state(id, v->current_attempt(), execution_state::running, "");
  f.poll();
}

// The restore checkpoint id of the newest deployment of job `id`.
std::optional<checkpoint_id> deployed_restore(const fixture& f, const job_id& id) {
  for (auto it = f.deployer->deployed.rbegin(); it != f.deployer->deployed.rend(); ++it)
    if (it->job == id) return it->restore_checkpoint_id;
  return std::nullopt;
}

// A restarted coordinator's dispatcher on the same state folder, with a worker of its own.
std::shared_ptr<dispatcher> restarted_dispatcher(fixture& f) {
  auto workers = std::make_shared<worker_registry>();
  REQUIRE(workers->register_worker("w1", 2, "tcp://w1", 0));
  return std::make_shared<dispatcher>(f.io.get_executor(), workers, f.deployer, f.gateway,
                                      dispatcher::options{f.state_dir, f.io.get_executor(), {}});
}

// Fails job `id` and lets the restart strategy start it again.
void fail_and_restart(fixture& f, const job_id& id) {
  auto* master = f.jobs->find(id);
  const auto before = master->restarts();
  master->fail("a task failed");
  for (int i = 0; i < 20 && master->restarts() == before; ++i) {
    f.clock->advance(std::chrono::seconds(10));
    f.poll();
  }
  REQUIRE(master->restarts() == before + 1);
}

}  // namespace

TEST_CASE("REST claimMode: a bad value or one without fromSavepoint is a 400, CLAIM is refused "
          "outside the roots, for a live job's checkpoint and without checkpointing") {
  fixture f;
  const auto root = f.state_dir / "savepoints";
  f.api->set_savepoint_targets({confined_folder(root), true, confined_folder(f.state_dir)});
  write_keyed_savepoint(root / "at-256", keyed_job_text(256), 256);
  const auto error_of = [](const json& r) { return r["errors"][0].get<std::string>(); };
  for (const std::string bad : {"claimed", "", "NO-CLAIM", "LEGACY"}) {
    INFO(bad);
    auto r = f.call("POST", "/jobs", keyed_job_text(256), 400,
                    {{"fromSavepoint", "at-256"}, {"claimMode", bad}});
    CHECK_THAT(error_of(r), Catch::Contains("CLAIM, NO_CLAIM"));
  }
  auto alone = f.call("POST", "/jobs", keyed_job_text(256), 400, {{"claimMode", "CLAIM"}});
  CHECK_THAT(error_of(alone), Catch::Contains("fromSavepoint"));
  // --allow-savepoint-anywhere lets NO_CLAIM read from anywhere, never CLAIM move from there.
  write_keyed_savepoint(f.state_dir.parent_path() / (f.state_dir.filename().string() + "-out"),
                        keyed_job_text(256), 256);
  const fs::path outside = f.state_dir.parent_path() / (f.state_dir.filename().string() + "-out");
  auto out = f.call("POST", "/jobs", keyed_job_text(256), 400,
                    {{"fromSavepoint", outside.string()}, {"claimMode", "claim"}});
  CHECK_THAT(error_of(out), Catch::Contains("outside the allowed roots"));
  CHECK(fs::exists(outside / "_metadata"));
  f.call("POST", "/jobs", keyed_job_text(256), 202,
         {{"fromSavepoint", outside.string()}, {"claimMode", "no_claim"}});
  fs::remove_all(outside);
  // A checkpoint its running job still owns.
  job_id live = f.submit_and_run(claim_job_text(2));
  complete_checkpoint(f, live);
  const auto live_chk = (f.state_dir / live / "chk-1").string();
  auto owned = f.call("POST", "/jobs", claim_job_text(1), 422,
                      {{"fromSavepoint", live_chk}, {"claimMode", "CLAIM"}});
  CHECK_THAT(error_of(owned), Catch::Contains("still RUNNING"));
  CHECK(fs::exists(fs::path(live_chk) / "_metadata"));
  // A job that takes no checkpoints cannot own one.
  const std::string no_checkpoints = "[job]\nname = \"plain\"\nparallelism = 1\n\n"
                                     "[[operator]]\nuid = \"src\"\nkind = \"sequence_source\"\n"
                                     "params = { count = 10 }\n\n[[operator]]\nuid = \"sink\"\n"
                                     "kind = \"print_sink\"\ninput = \"src\"\n";
  auto plain = f.call("POST", "/jobs", no_checkpoints, 422,
                      {{"fromSavepoint", "at-256"}, {"claimMode", "CLAIM"}});
  CHECK_THAT(error_of(plain), Catch::Contains("NO_CLAIM"));
  CHECK(fs::exists(root / "at-256" / "_metadata"));
}

TEST_CASE("REST NO_CLAIM: the snapshot's files stay byte for byte and untouched through the new "
          "jobs' checkpoints, failures, cancellation and the old job's sweep") {
  fixture f;
  f.api->set_savepoint_targets({confined_folder(f.state_dir / "savepoints"), false,
                                confined_folder(f.state_dir)});
  const job_id old = old_job_with_checkpoints(f);
  const fs::path snapshot = f.state_dir / old / "chk-2";
  const auto before = fingerprint(f.state_dir / old);
  REQUIRE(before.size() >= 6);  // two folders' own files and metadata, three shared files

  // Two jobs from the same snapshot: the default mode, and NO_CLAIM named.
  auto first =
      f.call("POST", "/jobs", claim_job_text(1), 202, {{"fromSavepoint", snapshot.string()}});
  auto second = f.call("POST", "/jobs", claim_job_text(1), 202,
                       {{"fromSavepoint", snapshot.string()}, {"claimMode", "No_Claim"}});
  const job_id a = first["jobid"], b = second["jobid"];
  for (const job_id& id : {a, b}) {
    auto details = f.call("GET", "/jobs/" + id);
    CHECK(details["restored-from"]["claim-mode"] == "NO_CLAIM");
    CHECK(details["restored-from"]["path"] == snapshot.string());
    CHECK(deployed_restore(f, id) == 2);
    run_tasks(f, id);
  }
  // A failure before the first checkpoint restores from the snapshot again.
  fail_and_restart(f, b);
  CHECK(deployed_restore(f, b) == 2);
  run_tasks(f, b);
  // Checkpoints (more than retained: some are subsumed and deleted) name only the job's files.
  for (int i = 0; i < 3; ++i) complete_checkpoint(f, a, {"x" + std::to_string(i % 2)});
  for (const auto& c : f.jobs->find(a)->coordinator()->core().store().checkpoints())
    for (const auto& h : c.all_handles())
      CHECK(confined_folder(f.state_dir / a).lexically_contains(fs::path(h.path)));
  fail_and_restart(f, a);
  CHECK(deployed_restore(f, a) == f.jobs->find(a)->coordinator()->core().latest_completed_id());
  REQUIRE(f.jobs->cancel(a));
  REQUIRE(f.jobs->cancel(b));
  f.poll();
  CHECK(fingerprint(f.state_dir / old) == before);

  // A restarted coordinator sweeps the ended jobs' folders, the old one's among them.
  auto restarted = restarted_dispatcher(f);
  CHECK(restarted->recover().empty());
  f.poll();
  CHECK(fingerprint(f.state_dir / old) == before);
}

TEST_CASE("REST NO_CLAIM: a job resumed by a restarted coordinator before its first checkpoint "
          "restores from the snapshot again") {
  fixture f;
  const auto root = f.state_dir / "savepoints";
  f.api->set_savepoint_targets({confined_folder(root), false, confined_folder(f.state_dir)});
  write_keyed_savepoint(root / "at-256", keyed_job_text(256), 256);
  auto submitted = f.call("POST", "/jobs", keyed_job_text(256), 202, {{"fromSavepoint", "at-256"}});
  const job_id id = submitted["jobid"];
  CHECK(deployed_restore(f, id) == 7);
  f.deployer->deployed.clear();
  auto restarted = restarted_dispatcher(f);
  REQUIRE(restarted->recover() == std::vector<job_id>{id});
  f.poll();
  CHECK(deployed_restore(f, id) == 7);
  CHECK(restarted->find(id)->origin().mode == recovery_claim_mode::no_claim);
  // Gone before the job completed a checkpoint of its own: the resumed job fails, not empty.
  fs::remove_all(root / "at-256");
  auto again = restarted_dispatcher(f);
  REQUIRE(again->recover() == std::vector<job_id>{id});
  f.poll();
  CHECK(again->find(id)->status() == job_status::failed);
  CHECK_THAT(again->find(id)->failure_cause().value_or(""), Catch::Contains("at-256"));
}

TEST_CASE("REST CLAIM: the job takes a retained checkpoint over, restores from it until newer "
          "ones exist, then subsumes and deletes it") {
  fixture f;
  f.api->set_savepoint_targets({confined_folder(f.state_dir / "savepoints"), false,
                                confined_folder(f.state_dir)});
  const job_id old = old_job_with_checkpoints(f);
  const fs::path source = f.state_dir / old / "chk-1";
  auto submitted = f.call("POST", "/jobs", claim_job_text(1), 202,
                          {{"fromSavepoint", source.string()}, {"claimMode", "claim"}});
  const job_id id = submitted["jobid"];
  const fs::path job_dir = f.state_dir / id;
  auto details = f.call("GET", "/jobs/" + id);
  CHECK(details["restored-from"]["claim-mode"] == "CLAIM");

  // Moved: gone from the old job, which keeps chk-2 whole; a (used by chk-1 only) left it.
  CHECK_FALSE(fs::exists(source));
  CHECK(fs::exists(job_dir / "chk-1" / "_metadata"));
  const auto kept = checkpoint_storage::read_metadata(f.state_dir / old / "chk-2");
  REQUIRE(kept);
  for (const auto& h : kept->all_handles()) CHECK(checkpoint_storage::verify_state(h));
  CHECK_FALSE(fs::exists(f.state_dir / old / "shared" / "a"));
  CHECK(fs::exists(job_dir / "shared" / "a"));
  CHECK(fs::exists(job_dir / "shared" / "b"));
  // A second claim of the same snapshot finds nothing.
  f.call("POST", "/jobs", claim_job_text(1), 422,
         {{"fromSavepoint", source.string()}, {"claimMode", "CLAIM"}});

  CHECK(deployed_restore(f, id) == 1);
  run_tasks(f, id);
  fail_and_restart(f, id);
  CHECK(deployed_restore(f, id) == 1);  // still its only checkpoint
  run_tasks(f, id);
  const auto& store = f.jobs->find(id)->coordinator()->core().store();
  REQUIRE(store.checkpoints().size() == 1);
  CHECK(store.checkpoints().front().id == 1);

  // A newer checkpoint (reusing b) subsumes it: its folder and a go, b stays.
  const checkpoint_id next = complete_checkpoint(f, id, {"b", "y"});
  CHECK(next == 2);
  f.poll();
  CHECK_FALSE(fs::exists(job_dir / "chk-1"));
  CHECK_FALSE(fs::exists(job_dir / "shared" / "a"));
  CHECK(fs::exists(job_dir / "shared" / "b"));
  fail_and_restart(f, id);
  CHECK(deployed_restore(f, id) == 2);
}

TEST_CASE("REST CLAIM: a savepoint becomes the job's checkpoint and is deleted once subsumed") {
  fixture f;
  const auto root = f.state_dir / "savepoints";
  f.api->set_savepoint_targets({confined_folder(root), false, confined_folder(f.state_dir)});
  auto graph = parse_job_file(claim_job_text(1), "claims.toml");
  REQUIRE(graph);
  test::write_keyed_savepoint(root / "sp", graph.value(), "no keyed state", 128);
  auto submitted = f.call("POST", "/jobs", claim_job_text(1), 202,
                          {{"fromSavepoint", "sp"}, {"claimMode", "CLAIM"}});
  const job_id id = submitted["jobid"];
  CHECK_FALSE(fs::exists(root / "sp"));
  CHECK(fs::exists(f.state_dir / id / "chk-7" / "_metadata"));
  CHECK(deployed_restore(f, id) == 7);
  run_tasks(f, id);
  CHECK(complete_checkpoint(f, id) == 8);
  f.poll();
  CHECK_FALSE(fs::exists(f.state_dir / id / "chk-7"));
}
