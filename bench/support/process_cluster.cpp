#include "bench/support/process_cluster.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <stdexcept>
#include <thread>

#include <httplib.h>

namespace snapflow::bench {

using namespace std::chrono_literals;
using json = nlohmann::json;

json rest_answer::json() const { return json::parse(body, nullptr, false); }

process_cluster::process_cluster(const process_cluster_options& o) {
  std::vector<std::string> coordinator_argv{
      o.coordinator_bin, "--bind", "tcp://127.0.0.1:*", "--rest-host", "127.0.0.1",
      "--rest-port", "0", "--state-dir", o.state_dir.string(), "--log-level", o.log_level};
  coordinator_argv.insert(coordinator_argv.end(), o.coordinator_args.begin(),
                          o.coordinator_args.end());
  coordinator_ = std::make_unique<testing::child_process>(std::move(coordinator_argv));
  if (!coordinator_->wait_for_stdout("\n", 20s))
    throw std::runtime_error("the coordinator did not start: " + coordinator_->stderr_text());
  const std::string line = coordinator_->stdout_text();
  const std::string control = testing::listening_field(line, "control");
  const std::string rest = testing::listening_field(line, "rest");
  const auto colon = rest.rfind(':');
  if (control.empty() || colon == std::string::npos)
    throw std::runtime_error("unexpected listening line: " + line);
  host_ = rest.substr(0, colon);
  port_ = std::stoi(rest.substr(colon + 1));
  for (int w = 0; w < o.workers; ++w) {
    std::vector<std::string> argv{o.worker_bin,   "--coordinator", control,
                                  "--id",         "bench-w" + std::to_string(w + 1),
                                  "--slots",      std::to_string(o.slots),
                                  "--executor",   "runtime",
                                  "--data-bind",  "tcp://127.0.0.1:*",
                                  "--log-level",  o.log_level};
    argv.insert(argv.end(), o.worker_args.begin(), o.worker_args.end());
    if (o.pin_workers) {
      const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
      argv.insert(argv.end(), {"--cpus", std::to_string(static_cast<unsigned>(w) % cpus)});
    }
    workers_.push_back(std::make_unique<testing::child_process>(std::move(argv)));
  }
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    const json overview = get("/overview");
    if (overview.is_object() && overview.value("taskmanagers", 0) == o.workers) break;
    for (const auto& w : workers_)
      if (w->exited()) throw std::runtime_error("a worker exited: " + w->stderr_text());
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("the workers did not register");
    std::this_thread::sleep_for(20ms);
  }
}

process_cluster::~process_cluster() {
  for (auto& w : workers_) w->send_signal(SIGTERM);
  coordinator_->send_signal(SIGTERM);
  for (auto& w : workers_) (void)w->wait_exit(10s);
  (void)coordinator_->wait_exit(10s);
}

json process_cluster::get(const std::string& path) const {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  auto r = client.Get(path.c_str());
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

rest_answer process_cluster::post(const std::string& path, const std::string& body,
                                  const std::string& content_type) const {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  auto r = client.Post(path.c_str(), body, content_type.c_str());
  if (!r) return {};
  return {r->status, r->body};
}

rest_answer process_cluster::patch(const std::string& path, const std::string& body) const {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  auto r = client.Patch(path.c_str(), body, "application/json");
  if (!r) return {};
  return {r->status, r->body};
}

double process_cluster::cpu_seconds() const {
  double total = coordinator_->cpu_seconds();
  for (const auto& w : workers_) total += w->cpu_seconds();
  return total;
}

}  // namespace snapflow::bench
