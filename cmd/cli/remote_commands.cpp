// The subcommands that talk to a running coordinator over its REST API.
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>


#include "cmd/cli/commands.hpp"
#include "cmd/cli/rest_client.hpp"
#include "graph/recovery_claim_mode.hpp"
#include "transport/curve_keys.hpp"

namespace snapflow::cli {

using nlohmann::json;

namespace {

int fail(const std::string& message) {
  std::cerr << "snapflow: " << message << "\n";
  return 1;
}

std::string us_text(double us) {
  std::ostringstream os;
  os.precision(3);
  if (us >= 1000)
    os << us / 1000 << " ms";
  else
    os << us << " us";
  return os.str();
}

// Waits for an asynchronous operation (checkpoint, savepoint) to finish.
result<json> await_operation(const rest_client& client, const std::string& path) {
  for (int i = 0; i < 6000; ++i) {
    auto r = client.get(path);
    if (!r) return r;
    if ((*r)["status"]["id"] == "COMPLETED") return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return error{"gave up waiting for " + path};
}

}  // namespace

int run_submit(const common_options& c, const std::string& file,
               const std::optional<std::string>& from_savepoint,
               const std::optional<std::string>& claim_mode) {
  std::optional<recovery_claim_mode> claim;
  if (claim_mode) {
    claim = parse_recovery_claim_mode(*claim_mode);
    if (!claim) return fail("'" + *claim_mode + "' is not a claim mode: claim or no-claim");
    if (!from_savepoint) return fail("--claim-mode needs --from-savepoint");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail("cannot read job file " + file);
  std::stringstream text;
  text << in.rdbuf();
  rest_client client(c.coordinator, c.rest);
  std::string path = "/jobs?name=" + query_value(file);
  if (from_savepoint) path += "&fromSavepoint=" + query_value(*from_savepoint);
  if (claim) path += "&claimMode=" + std::string(to_string(*claim));
  auto r = client.post(path, text.str(), "application/toml");
  if (!r) return fail(r.err().message);
  if (c.json)
    std::cout << r->dump(2) << "\n";
  else
    std::cout << (*r)["jobid"].get<std::string>() << "\n";
  return 0;
}

int run_list(const common_options& c) {
  rest_client client(c.coordinator, c.rest);
  auto r = client.get("/jobs");
  if (!r) return fail(r.err().message);
  if (c.json) {
    std::cout << r->dump(2) << "\n";
    return 0;
  }
  if ((*r)["jobs"].empty()) std::cout << "no jobs\n";
  for (const auto& j : (*r)["jobs"])
    std::cout << j["id"].get<std::string>() << "  " << j["status"].get<std::string>() << "  "
              << j["name"].get<std::string>() << "\n";
  return 0;
}

int run_status(const common_options& c, const std::string& job) {
  rest_client client(c.coordinator, c.rest);
  auto r = client.get("/jobs/" + job);
  if (!r) return fail(r.err().message);
  if (c.json) {
    std::cout << r->dump(2) << "\n";
    return 0;
  }
  const json& j = *r;
  std::cout << "job " << j["jid"].get<std::string>() << " '" << j["name"].get<std::string>()
            << "': " << j["state"].get<std::string>() << ", restarts " << j["restarts"] << "\n";
  if (j.contains("failure-cause")) std::cout << "cause: " << j["failure-cause"].get<std::string>() << "\n";
  if (j.value("waiting-for-slots", false))
    std::cout << "waiting for slots: " << j["slots-needed"] << " needed\n";
  if (j.contains("waiting-reason"))
    std::cout << "waiting: " << j["waiting-reason"].get<std::string>() << "\n";
  for (const auto& v : j["vertices"])
    std::cout << "  " << v["uid"].get<std::string>() << " (" << v["kind"].get<std::string>()
              << ", parallelism " << v["parallelism"] << "): " << v["status"].get<std::string>()
              << "\n";
  return 0;
}

int run_checkpoints(const common_options& c, const std::string& job) {
  rest_client client(c.coordinator, c.rest);
  auto r = client.get("/jobs/" + job + "/checkpoints");
  if (!r) return fail(r.err().message);
  if (c.json) {
    std::cout << r->dump(2) << "\n";
    return 0;
  }
  const json& j = *r;
  const auto& counts = j["counts"];
  std::cout << "completed " << counts["completed"] << ", failed " << counts["failed"]
            << ", in progress " << counts["in_progress"] << ", restored " << counts["restored"]
            << "\n";
  const auto& e2e = j["summary"]["end_to_end_duration_us"];
  std::cout << "end to end: p50 " << us_text(e2e["p50"].get<double>()) << ", p99 "
            << us_text(e2e["p99"].get<double>()) << ", max " << us_text(e2e["max"].get<double>())
            << "\n\n";
  std::printf("%8s  %-11s  %-10s  %9s  %12s  %12s\n", "id", "status", "type", "acks", "duration",
              "state size");
  for (const auto& h : j["history"]) {
    std::string acks = std::to_string(h["num_acknowledged_subtasks"].get<int>()) + "/" +
                       std::to_string(h["num_subtasks"].get<int>());
    std::printf("%8lld  %-11s  %-10s  %9s  %12s  %12llu\n", h["id"].get<long long>(),
                h["status"].get<std::string>().c_str(),
                h["checkpoint_type"].get<std::string>().c_str(), acks.c_str(),
                us_text(h["end_to_end_duration_us"].get<double>()).c_str(),
                h["state_size"].get<unsigned long long>());
  }
  return 0;
}

int run_checkpoint(const common_options& c, const std::string& job, bool savepoint,
                   const std::string& folder, bool cancel_after) {
  rest_client client(c.coordinator, c.rest);
  json body = json::object();
  if (!folder.empty()) body["target-directory"] = folder;
  if (cancel_after) body["cancel-job"] = true;
  const std::string base = "/jobs/" + job + (savepoint ? "/savepoints" : "/checkpoints");
  auto started = client.post(base, body.dump());
  if (!started) return fail(started.err().message);
  auto done = await_operation(client, base + "/" + (*started)["request-id"].get<std::string>());
  if (!done) return fail(done.err().message);
  if (c.json) {
    std::cout << done->dump(2) << "\n";
  }
  const json& op = (*done)["operation"];
  if (op.contains("failure-cause"))
    return fail(std::string(savepoint ? "savepoint" : "checkpoint") + " failed: " +
                op["failure-cause"]["class"].get<std::string>() + ": " +
                op["failure-cause"]["stack-trace"].get<std::string>());
  if (!c.json)
    std::cout << (savepoint ? "savepoint " : "checkpoint ") << op["checkpointId"] << " completed: "
              << op["location"].get<std::string>() << "\n";
  return 0;
}

int run_cancel(const common_options& c, const std::string& job,
               const std::optional<std::string>& savepoint_folder) {
  if (savepoint_folder) return run_checkpoint(c, job, true, *savepoint_folder, true);
  rest_client client(c.coordinator, c.rest);
  auto r = client.patch("/jobs/" + job + "?mode=cancel");
  if (!r) return fail(r.err().message);
  if (!c.json) std::cout << "cancelling job " << job << "\n";
  return 0;
}

int run_set_interval(const common_options& c, const std::string& job, long long interval_ms) {
  rest_client client(c.coordinator, c.rest);
  auto r = client.patch("/jobs/" + job + "/checkpoints/config",
                        json{{"interval", interval_ms}}.dump());
  if (!r) return fail(r.err().message);
  if (c.json)
    std::cout << r->dump(2) << "\n";
  else
    std::cout << "checkpoint interval of job " << job << " is now " << interval_ms << " ms\n";
  return 0;
}

int run_keygen(const std::string& prefix) {
  // The same key files the coordinator and workers read (transport/curve_keys).
  auto keys = transport::generate_curve_key_pair();
  if (!keys) return fail(keys.err().message);
  if (prefix.empty()) {
    std::cout << "public " << keys->public_key << "\nsecret " << keys->secret_key << "\n";
    return 0;
  }
  if (auto written = transport::write_key_pair(prefix, *keys); !written)
    return fail(written.err().message);
  std::cout << "wrote " << prefix << ".public and " << prefix << ".secret\n";
  return 0;
}

}  // namespace snapflow::cli
