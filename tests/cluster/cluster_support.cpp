#include "tests/cluster/cluster_support.hpp"

#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <httplib.h>

namespace snapflow::testing {

namespace {

http_result to_result(const httplib::Result& r) {
  http_result out;
  if (!r) return out;
  out.status = r->status;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

}  // namespace


bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

http_result rest_client::get(const std::string& path) const {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  return to_result(client.Get(path.c_str()));
}

http_result rest_client::post(const std::string& path, const std::string& body) const {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  return to_result(client.Post(path.c_str(), body, "application/toml"));
}

http_result rest_client::patch(const std::string& path) const {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  return to_result(client.Patch(path.c_str()));
}

coordinator_process::coordinator_process(const std::filesystem::path& state_dir,
                                         std::vector<std::string> extra_args,
                                         const std::string& bind, int heartbeat_timeout) {
  std::vector<std::string> argv{SNAPFLOW_COORDINATOR_BIN,
                                "--bind",
                                bind,
                                "--rest-port",
                                "0",
                                "--state-dir",
                                state_dir.string(),
                                "--heartbeat-interval-ms",
                                std::to_string(heartbeat_interval_ms),
                                "--heartbeat-timeout-ms",
                                std::to_string(heartbeat_timeout)};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  process_ = std::make_unique<child_process>(std::move(argv));
  if (!process_->wait_for_stdout("\n", patience))
    throw std::runtime_error("the coordinator did not start: " + process_->stderr_text());
  const std::string line = process_->stdout_text();
  control_ = listening_field(line, "control");
  const std::string rest = listening_field(line, "rest");
  const auto colon = rest.rfind(':');
  if (control_.empty() || colon == std::string::npos)
    throw std::runtime_error("unexpected listening line: " + line);
  rest_ = std::make_unique<rest_client>(rest.substr(0, colon), std::stoi(rest.substr(colon + 1)));
}

json coordinator_process::overview() const { return rest_->get("/overview").body; }

bool coordinator_process::wait_for_workers(std::size_t n, std::chrono::milliseconds within) const {
  return eventually(
      [&] {
        const json o = overview();
        return o.is_object() && o.value("taskmanagers", std::size_t{0}) == n;
      },
      within);
}

std::string coordinator_process::submit(const std::string& toml) const {
  const http_result r = rest_->post("/jobs", toml);
  if (r.status != 202 || !r.body.contains("jobid"))
    throw std::runtime_error("submit failed: " + std::to_string(r.status) + " " + r.body.dump());
  return r.body["jobid"].get<std::string>();
}

json coordinator_process::checkpoints(const std::string& job) const {
  return rest_->get("/jobs/" + job + "/checkpoints").body;
}

json coordinator_process::job(const std::string& job) const {
  return rest_->get("/jobs/" + job).body;
}

bool coordinator_process::wait_for_completed_checkpoints(const std::string& job, std::int64_t n,
                                                         std::chrono::milliseconds within) const {
  return eventually(
      [&] {
        const json c = checkpoints(job);
        return c.is_object() && c.contains("counts") &&
               c["counts"].value("completed", std::int64_t{0}) >= n;
      },
      within);
}

std::string coordinator_process::savepoint_and_cancel(
    const std::string& job, const std::string& target, std::chrono::milliseconds within,
    const std::function<std::string()>& context) const {
  const auto more = [&] { return context ? context() : std::string(); };
  const http_result trigger = rest_->post(
      "/jobs/" + job + "/savepoints", json{{"target-directory", target}, {"cancel-job", true}}.dump());
  INFO("trigger: " << trigger.status << " " << trigger.body.dump());
  REQUIRE(trigger.status == 202);
  const std::string status_path =
      "/jobs/" + job + "/savepoints/" + trigger.body["request-id"].get<std::string>();
  json operation;
  const bool completed = eventually(
      [&] {
        const http_result r = rest_->get(status_path);
        if (r.status != 200 || r.body["status"].value("id", "") != "COMPLETED") return false;
        operation = r.body["operation"];
        return true;
      },
      within);
  INFO("savepoint: " << operation.dump() << more());
  REQUIRE(completed);
  REQUIRE(operation.contains("location"));
  REQUIRE_FALSE(operation.contains("failure-cause"));
  const bool canceled =
      eventually([&] { return this->job(job).value("state", "") == "CANCELED"; }, 60s);
  INFO("job: " << this->job(job).dump());
  REQUIRE(canceled);
  return operation["location"].get<std::string>();
}

std::unique_ptr<child_process> start_worker(const std::string& control, const std::string& id,
                                            std::vector<std::string> extra_args,
                                            const std::string& binary) {
  std::vector<std::string> argv{binary,
                                "--coordinator",
                                control,
                                "--id",
                                id,
                                "--slots",
                                "1",
                                "--heartbeat-interval-ms",
                                std::to_string(heartbeat_interval_ms),
                                "--heartbeat-timeout-ms",
                                std::to_string(heartbeat_timeout_ms)};
  // These tests exercise the control plane: they keep the stub executor, which the worker no
  // longer defaults to, unless they ask for another.
  if (std::find(extra_args.begin(), extra_args.end(), "--executor") == extra_args.end())
    argv.insert(argv.end(), {"--executor", "stub"});
  if (std::find(extra_args.begin(), extra_args.end(), "--data-root") == extra_args.end())
    argv.insert(argv.end(), {"--data-root", test_data_root()});
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return std::make_unique<child_process>(std::move(argv));
}

std::string test_data_root() { return std::filesystem::temp_directory_path().string(); }

std::string sources_job(int parallelism) {
  return "[job]\n"
         "name = \"stub sources\"\n"
         "parallelism = " +
         std::to_string(parallelism) +
         "\n"
         "[checkpointing]\n"
         "interval_ms = 50\n"
         "timeout_ms = 5000\n"
         "[[operator]]\n"
         "uid = \"source\"\n"
         "kind = \"sequence_source\"\n"
         "params = { count = 1000000 }\n"
         "[[operator]]\n"
         "uid = \"sink\"\n"
         "kind = \"print_sink\"\n"
         "input = \"source\"\n";
}

void stop_cleanly(coordinator_process& coordinator,
                  std::initializer_list<child_process*> workers) {
  for (child_process* w : workers) w->send_signal(SIGTERM);
  coordinator.process().send_signal(SIGTERM);
  for (child_process* w : workers) CHECK(w->wait_exit(patience) == 0);
  CHECK(coordinator.process().wait_exit(patience) == 0);
}

}  // namespace snapflow::testing
