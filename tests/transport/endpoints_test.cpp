// The coordinator and worker endpoints in one process over loopback TCP, with a fake job side:
// the round trip through both endpoints, and a worker that stops reading.
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "tests/transport/socket_test_support.hpp"
#include "transport/coordinator_endpoint.hpp"
#include "transport/envelope.hpp"
#include "transport/stub_task_executor.hpp"
#include "transport/worker_endpoint.hpp"

using namespace std::chrono_literals;
using namespace snapflow;
using namespace snapflow::transport;
using snapflow::transport::testing::io_guard;

namespace {

const job_id job = "0123456789abcdef0123456789abcdef";

// The job side, reduced to recording what the endpoint reports.
class fake_jobs final : public worker_event_handler {
 public:
  worker_registry registry;
  std::vector<worker_id> registered;
  std::vector<worker_id> lost;
  std::vector<std::pair<execution_attempt_id, execution_state>> states;
  std::vector<checkpoint_ack> acks;
  std::map<execution_attempt_id, worker_id> owners;

  worker_registry& workers() override { return registry; }
  void worker_registered(const worker_id& w, bool) override { registered.push_back(w); }
  void worker_lost(const worker_id& w) override { lost.push_back(w); }
  void task_state_changed(const job_id&, const execution_attempt_id& a, execution_state s,
                          const std::string&) override {
    states.emplace_back(a, s);
  }
  std::optional<worker_id> owner_of(const job_id& j,
                                    const execution_attempt_id& a) const override {
    auto it = owners.find(a);
    if (j != job || it == owners.end()) return std::nullopt;
    return it->second;
  }
  void acknowledge_checkpoint(checkpoint_ack ack) override { acks.push_back(std::move(ack)); }
  void decline_checkpoint(const checkpoint_decline&) override {}
  void source_exhausted(const job_id&, const execution_attempt_id& a,
                        checkpoint_id last_barrier) override {
    exhausted.emplace_back(a, last_barrier);
  }

  void task_io_reported(const task_io_counters& c) override { io.push_back(c); }

  std::vector<std::pair<execution_attempt_id, checkpoint_id>> exhausted;
  std::vector<task_io_counters> io;
};

// The stub, plus a record of the finish calls the coordinator sends.
class finishing_executor final : public task_executor {
 public:
  explicit finishing_executor(std::shared_ptr<task_executor_listener> listener)
      : stub_(std::move(listener), "tcp://finishing") {}

  void deploy(const task_deployment_descriptor& d) override { stub_.deploy(d); }
  void cancel(const job_id& j, const execution_attempt_id& a) override { stub_.cancel(j, a); }
  void trigger_checkpoint(const job_id& j, const execution_attempt_id& a, checkpoint_id id,
                          std::int64_t ts, const checkpoint_options& o) override {
    stub_.trigger_checkpoint(j, a, id, ts, o);
  }
  void notify_checkpoint_complete(const job_id& j, const execution_attempt_id& a,
                                  checkpoint_id id) override {
    stub_.notify_checkpoint_complete(j, a, id);
  }
  void notify_checkpoint_aborted(const job_id& j, const execution_attempt_id& a,
                                 checkpoint_id id, checkpoint_id latest) override {
    stub_.notify_checkpoint_aborted(j, a, id, latest);
  }
  void finish(const job_id&, const execution_attempt_id& a) override { finished.push_back(a); }
  void cancel_all() override { stub_.cancel_all(); }
  std::string data_endpoint() const override { return stub_.data_endpoint(); }
  std::vector<task_io_counters> take_io_counters() override { return io; }

  std::vector<execution_attempt_id> finished;
  std::vector<task_io_counters> io;  // what every heartbeat reports

 private:
  stub_task_executor stub_;
};

struct cluster {
  zmq::context_t context{1};  // outlives the io_context, whose coroutines own sockets
  asio::io_context io;
  std::shared_ptr<fake_jobs> jobs = std::make_shared<fake_jobs>();
  std::shared_ptr<coordinator_endpoint> coordinator;
  std::vector<std::shared_ptr<worker_endpoint>> workers;

  explicit cluster(coordinator_endpoint_options o = {}) {
    o.bind_address = "tcp://127.0.0.1:*";
    coordinator = std::make_shared<coordinator_endpoint>(io.get_executor(), context, o);
    coordinator->set_handler(jobs);
    REQUIRE_FALSE(coordinator->start());
  }
  ~cluster() {
    coordinator->stop();
    for (auto& w : workers) w->stop();
    io.restart();
    io.poll();
  }
  worker_endpoint& add_worker(const std::string& id,
                              std::shared_ptr<finishing_executor>* executor = nullptr) {
    worker_endpoint_options o;
    o.coordinator_address = coordinator->endpoint();
    o.worker_id = id;
    auto w = std::make_shared<worker_endpoint>(io.get_executor(), context, o);
    if (executor) {
      *executor = std::make_shared<finishing_executor>(w->listener());
      w->set_executor(*executor);
    } else {
      w->set_executor(std::make_shared<stub_task_executor>(w->listener(), "tcp://" + id));
    }
    REQUIRE_FALSE(w->start({}));
    workers.push_back(w);
    return *w;
  }
  void deploy(const worker_id& w, const execution_attempt_id& a, std::string graph = "g") {
    jobs->owners[a] = w;
    task_deployment_descriptor d;
    d.job = job;
    d.attempt = a;
    d.job_graph_bytes = std::move(graph);
    coordinator->deploy(w, d);
  }
};

execution_attempt_id attempt_of(std::uint32_t index) { return {{0, index}, 0}; }

}  // namespace

TEST_CASE("a trigger reaches the owning worker and its acknowledgement comes back") {
  cluster c;
  io_guard guard(c.io, 20s);
  auto& w1 = c.add_worker("w1");
  auto& w2 = c.add_worker("w2");
  guard.run_until([&] { return w1.registered() && w2.registered(); });
  CHECK(c.jobs->registry.workers().size() == 2);

  c.deploy("w1", attempt_of(0));
  c.deploy("w2", attempt_of(1));
  guard.run_until([&] { return c.jobs->states.size() == 2; });
  CHECK(c.jobs->states[0].second == execution_state::running);

  auto gateway = c.coordinator->checkpoint_gateway(job);
  for (checkpoint_id id = 1; id <= 20; ++id) {
    gateway->trigger_checkpoint(attempt_of(0), id, 0, {});
    gateway->trigger_checkpoint(attempt_of(1), id, 0, {});
    guard.run_until([&] { return c.jobs->acks.size() == 2 * static_cast<std::size_t>(id); });
  }
  CHECK(c.coordinator->counters().refused_messages == 0);
  CHECK(c.coordinator->counters().bad_frames == 0);
}

TEST_CASE("a worker that stops reading is declared lost and the others are still served") {
  coordinator_endpoint_options o;
  o.socket_send_hwm = 2;
  o.max_queued_frames_per_worker = 8;
  o.heartbeat_timeout = 60s;  // only the overflow may declare it lost
  cluster c(o);
  io_guard guard(c.io, 60s);
  auto& w1 = c.add_worker("w1");

  // "sleepy" registers by hand and then never reads.
  zmq::socket_t sleepy(c.context, zmq::socket_type::dealer);
  sleepy.set(zmq::sockopt::linger, 0);
  sleepy.set(zmq::sockopt::routing_id, "sleepy");
  sleepy.set(zmq::sockopt::rcvhwm, 1);
  sleepy.connect(c.coordinator->endpoint());
  const std::string hello = wire::encode(wire::register_worker{"sleepy", 1, "x", 1, 1, 1});
  REQUIRE(sleepy.send(zmq::buffer(hello), zmq::send_flags::none));
  guard.run_until([&] { return w1.registered() && c.jobs->registered.size() == 2; });
  c.deploy("w1", attempt_of(0));
  guard.run_until([&] { return c.jobs->states.size() == 1; });

  // Deployments pile up at sleepy until its queue overflows; meanwhile w1 keeps answering.
  auto gateway = c.coordinator->checkpoint_gateway(job);
  const std::string big(64 * 1024, 'x');
  checkpoint_id id = 0;
  for (int round = 0; round < 10'000 && c.jobs->lost.empty(); ++round) {
    c.deploy("sleepy", attempt_of(100), big);
    gateway->trigger_checkpoint(attempt_of(0), ++id, 0, {});
    guard.run_until([&] { return c.jobs->acks.size() == static_cast<std::size_t>(id); });
  }
  REQUIRE(c.jobs->lost == std::vector<worker_id>{"sleepy"});
  CHECK(c.coordinator->counters().workers_lost == 1);
  CHECK(c.jobs->registry.find("sleepy") == nullptr);
  const std::size_t acks = c.jobs->acks.size();
  for (int i = 0; i < 5; ++i) gateway->trigger_checkpoint(attempt_of(0), ++id, 0, {});
  guard.run_until([&] { return c.jobs->acks.size() == acks + 5; });
  CHECK(c.jobs->lost.size() == 1);
}

TEST_CASE("a source's exhaustion reaches the job side and finish reaches the executor") {
  cluster c;
  io_guard guard(c.io, 20s);
  std::shared_ptr<finishing_executor> executor;
  auto& w1 = c.add_worker("w1", &executor);
  auto& w2 = c.add_worker("w2");
  guard.run_until([&] { return w1.registered() && w2.registered(); });
  c.deploy("w1", attempt_of(0));
  c.deploy("w2", attempt_of(1));
  guard.run_until([&] { return c.jobs->states.size() == 2; });

  // From the endpoint's own thread, and from a task thread of its own.
  auto listener = w1.listener();
  listener->source_exhausted(job, attempt_of(0), 7);
  std::thread task([&] { listener->source_exhausted(job, attempt_of(0), 8); });
  task.join();
  guard.run_until([&] { return c.jobs->exhausted.size() == 2; });
  CHECK(c.jobs->exhausted[0] == std::pair{attempt_of(0), checkpoint_id{7}});
  CHECK(c.jobs->exhausted[1] == std::pair{attempt_of(0), checkpoint_id{8}});

  // w1 speaking for w2's source is refused.
  const auto refused = c.coordinator->counters().refused_messages;
  listener->source_exhausted(job, attempt_of(1), 9);
  guard.run_until([&] { return c.coordinator->counters().refused_messages == refused + 1; });
  CHECK(c.jobs->exhausted.size() == 2);

  c.coordinator->finish("w1", job, attempt_of(0));
  guard.run_until([&] { return executor->finished.size() == 1; });
  CHECK(executor->finished[0] == attempt_of(0));
}

TEST_CASE("record counters ride on heartbeats, the final ones before the task's end") {
  cluster c;
  io_guard guard(c.io, 20s);
  std::shared_ptr<finishing_executor> executor;
  auto& w1 = c.add_worker("w1", &executor);
  auto& w2 = c.add_worker("w2");
  guard.run_until([&] { return w1.registered() && w2.registered(); });
  c.deploy("w1", attempt_of(0));
  c.deploy("w2", attempt_of(1));
  guard.run_until([&] { return c.jobs->states.size() == 2; });

  // Its own attempt, w2's attempt and an earlier deployment of its own: only the first counts.
  executor->io = {{job, attempt_of(0), 5, 7},
                  {job, attempt_of(1), 1, 1},
                  {job, execution_attempt_id{{0, 0}, 9}, 1, 1}};
  w1.listener()->task_state_changed(job, attempt_of(0), execution_state::finished, "");
  guard.run_until([&] { return c.jobs->states.size() == 3; });
  // The heartbeat went out first on the same connection, so it has been handled already.
  REQUIRE_FALSE(c.jobs->io.empty());
  for (const auto& reported : c.jobs->io) CHECK(reported == task_io_counters{job, attempt_of(0), 5, 7});
}
