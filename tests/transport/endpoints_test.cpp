// The coordinator and worker endpoints in one process over loopback TCP, with a fake job side:
// the round trip through both endpoints, and a worker that stops reading.
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <atomic>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "tests/transport/frame_builder.hpp"
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
    log.push_back("state " + std::to_string(a.subtask.index));
  }
  std::optional<worker_id> owner_of(const job_id& j,
                                    const execution_attempt_id& a) const override {
    auto it = owners.find(a);
    if (j != job || it == owners.end()) return std::nullopt;
    return it->second;
  }
  void acknowledge_checkpoint(checkpoint_ack ack) override {
    if (faulty_acks > 0) {
      --faulty_acks;
      throw std::runtime_error("a fault in the job side");
    }
    log.push_back("ack " + std::to_string(ack.attempt.subtask.index) + " " +
                  std::to_string(ack.id));
    acks.push_back(std::move(ack));
  }
  void decline_checkpoint(const checkpoint_decline&) override {}
  void source_exhausted(const job_id&, const execution_attempt_id& a,
                        checkpoint_id last_barrier) override {
    exhausted.emplace_back(a, last_barrier);
  }

  void task_io_reported(const task_io_counters& c) override { io.push_back(c); }

  std::vector<std::pair<execution_attempt_id, checkpoint_id>> exhausted;
  std::vector<task_io_counters> io;
  std::vector<std::string> log;  // state changes and acknowledgements, in arrival order
  int faulty_acks = 0;            // this many acknowledgements throw instead
};

// The stub, plus a record of the finish calls the coordinator sends; with `faulty_trigger` > 0
// its trigger of that number (counting from 1) throws instead, a fault an endpoint must survive.
class finishing_executor final : public task_executor {
 public:
  explicit finishing_executor(std::shared_ptr<task_executor_listener> listener,
                              int faulty_trigger = 0)
      : stub_(std::move(listener), "tcp://finishing"), faulty_trigger_(faulty_trigger) {}

  void deploy(const task_deployment_descriptor& d) override { stub_.deploy(d); }
  void cancel(const job_id& j, const execution_attempt_id& a) override { stub_.cancel(j, a); }
  void trigger_checkpoint(const job_id& j, const execution_attempt_id& a, checkpoint_id id,
                          std::int64_t ts, const checkpoint_options& o) override {
    if (++triggers_ == faulty_trigger_) throw std::runtime_error("a fault in the executor");
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
  const int faulty_trigger_;
  int triggers_ = 0;
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
  // With `executor`, a finishing_executor (with `faulty_trigger`) instead of the stub.
  worker_endpoint& add_worker(const std::string& id,
                              std::shared_ptr<finishing_executor>* executor = nullptr,
                              int faulty_trigger = 0) {
    worker_endpoint_options o;
    o.coordinator_address = coordinator->endpoint();
    o.worker_id = id;
    auto w = std::make_shared<worker_endpoint>(io.get_executor(), context, o);
    if (executor) {
      *executor = std::make_shared<finishing_executor>(w->listener(), faulty_trigger);
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

namespace {

// A worker speaking raw frames from the test thread: registers by hand, reads without blocking.
class raw_worker {
 public:
  raw_worker(zmq::context_t& context, const std::string& endpoint, const std::string& id,
             std::uint64_t max_batch_bytes)
      : socket_(context, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::routing_id, id);
    socket_.connect(endpoint);
    wire::register_worker hello{id, 1, "tcp://" + id, wire::current_protocol_version, 1, 1};
    hello.max_batch_bytes = max_batch_bytes;
    send(hello);
  }
  void send(const wire::message& m) { send_raw(wire::encode(m)); }
  void send_raw(const std::string& frame) {
    REQUIRE(socket_.send(zmq::buffer(frame), zmq::send_flags::none));
  }
  // Every message that has arrived, heartbeats and register_ack left out.
  void poll() {
    zmq::message_t frame;
    while (socket_.recv(frame, zmq::recv_flags::dontwait)) {
      auto decoded = wire::decode(frame.to_string_view());
      REQUIRE(decoded.ok());
      if (std::holds_alternative<wire::heartbeat>(decoded.value())) continue;
      if (std::holds_alternative<wire::register_ack>(decoded.value())) continue;
      received.push_back(std::move(decoded).value());
    }
  }
  std::vector<wire::message> received;

 private:
  zmq::socket_t socket_;
};

// Keeps an io_context waking every millisecond while it lives, so that run_until also sees what
// arrives on a raw socket outside the context. Not a pace: only a chance to look.
class poll_tick {
 public:
  explicit poll_tick(asio::io_context& io) : timer_(std::make_shared<asio::steady_timer>(io)) {
    arm(timer_);
  }
  ~poll_tick() { timer_->cancel(); }

 private:
  static void arm(std::shared_ptr<asio::steady_timer> timer) {
    timer->expires_after(1ms);
    timer->async_wait([timer](const std::error_code& error) {
      if (!error) arm(timer);
    });
  }
  std::shared_ptr<asio::steady_timer> timer_;
};

// Heartbeats so rare that none falls into a test: every frame counted is one the test made.
coordinator_endpoint_options quiet() {
  coordinator_endpoint_options o;
  o.heartbeat_interval = 30s;
  o.heartbeat_timeout = 120s;
  return o;
}

}  // namespace

TEST_CASE("a checkpoint's triggers, acks and notifications take one frame per worker each way") {
  cluster c(quiet());
  io_guard guard(c.io, 20s);
  auto& w1 = c.add_worker("w1");
  auto& w2 = c.add_worker("w2");
  guard.run_until([&] { return w1.registered() && w2.registered(); });
  for (std::uint32_t i = 0; i < 5; ++i) c.deploy("w1", attempt_of(i));
  for (std::uint32_t i = 5; i < 8; ++i) c.deploy("w2", attempt_of(i));
  guard.run_until([&] { return c.jobs->states.size() == 8; });

  auto gateway = c.coordinator->checkpoint_gateway(job);
  for (checkpoint_id id = 1; id <= 3; ++id) {
    const auto sent = c.coordinator->counters().frames_sent;
    const auto received = c.coordinator->counters().frames_received;
    const auto w1_received = w1.counters().frames_received;
    gateway->hold();
    for (std::uint32_t i = 0; i < 8; ++i) gateway->trigger_checkpoint(attempt_of(i), id, 0, {});
    gateway->flush();
    CHECK(c.coordinator->counters().frames_sent == sent + 2);
    guard.run_until([&] { return c.jobs->acks.size() == 8 * static_cast<std::size_t>(id); });
    CHECK(w1.counters().frames_received == w1_received + 1);
    CHECK(c.coordinator->counters().frames_received == received + 2);  // one ack batch each

    const auto notified_sent = c.coordinator->counters().frames_sent;
    gateway->hold();
    for (std::uint32_t i = 0; i < 8; ++i) gateway->notify_checkpoint_complete(attempt_of(i), id, 0);
    gateway->flush();
    CHECK(c.coordinator->counters().frames_sent == notified_sent + 2);
    guard.run_until([&] { return w1.counters().frames_received == w1_received + 2; });
  }
  CHECK(c.coordinator->counters().refused_messages == 0);
  CHECK(c.coordinator->counters().stale_messages == 0);
  CHECK(c.coordinator->counters().bad_frames == 0);
}

TEST_CASE("a worker that does not read batches gets one message per attempt") {
  cluster c(quiet());
  io_guard guard(c.io, 20s);
  raw_worker old(c.context, c.coordinator->endpoint(), "old", 0);
  poll_tick tick(c.io);
  guard.run_until([&] { return c.jobs->registered.size() == 1; });
  c.jobs->owners[attempt_of(0)] = "old";
  c.jobs->owners[attempt_of(1)] = "old";

  auto gateway = c.coordinator->checkpoint_gateway(job);
  gateway->hold();
  gateway->trigger_checkpoint(attempt_of(0), 4, 0, {});
  gateway->trigger_checkpoint(attempt_of(1), 4, 0, {});
  gateway->notify_checkpoint_aborted(attempt_of(0), 4, 3);
  gateway->flush();
  guard.run_until([&] {
    old.poll();
    return old.received.size() == 3;
  });
  CHECK(std::get<wire::trigger_checkpoint>(old.received[0]).attempt == attempt_of(0));
  CHECK(std::get<wire::trigger_checkpoint>(old.received[1]).attempt == attempt_of(1));
  CHECK(std::get<wire::notify_checkpoint_aborted>(old.received[2]) ==
        wire::notify_checkpoint_aborted{job, attempt_of(0), 4, 3});
}

TEST_CASE("held triggers go out before a later message; outside a run nothing is held") {
  cluster c(quiet());
  io_guard guard(c.io, 20s);
  raw_worker w(c.context, c.coordinator->endpoint(), "w", 1 << 20);
  poll_tick tick(c.io);
  guard.run_until([&] { return c.jobs->registered.size() == 1; });
  for (std::uint32_t i = 0; i < 3; ++i) c.jobs->owners[attempt_of(i)] = "w";

  auto gateway = c.coordinator->checkpoint_gateway(job);
  gateway->hold();
  for (std::uint32_t i = 0; i < 3; ++i) gateway->trigger_checkpoint(attempt_of(i), 9, 0, {});
  // A single attempt's notification is the single message, not a batch of one.
  gateway->notify_checkpoint_complete(attempt_of(2), 8, 0);
  c.coordinator->cancel("w", job, attempt_of(0));  // must not overtake what is held
  gateway->flush();
  guard.run_until([&] {
    w.poll();
    return w.received.size() == 3;
  });
  const auto& batch = std::get<wire::trigger_checkpoint_batch>(w.received[0]);
  CHECK(batch.checkpoint == 9);
  CHECK(batch.attempts ==
        std::vector<execution_attempt_id>{attempt_of(0), attempt_of(1), attempt_of(2)});
  CHECK(std::get<wire::notify_checkpoint_complete>(w.received[1]) ==
        wire::notify_checkpoint_complete{job, attempt_of(2), 8});
  CHECK(std::holds_alternative<wire::cancel_task>(w.received[2]));

  // Outside a run a trigger goes at once, in the call (the writer is idle).
  const auto sent = c.coordinator->counters().frames_sent;
  gateway->trigger_checkpoint(attempt_of(1), 10, 0, {});
  CHECK(c.coordinator->counters().frames_sent == sent + 1);

  // A run that is never flushed still sends what it held, within the turn.
  gateway->hold();
  gateway->trigger_checkpoint(attempt_of(2), 11, 0, {});
  CHECK(c.coordinator->counters().frames_sent == sent + 1);
  guard.run_until([&] {
    w.poll();
    return w.received.size() == 5;
  });
  CHECK(std::get<wire::trigger_checkpoint>(w.received[3]).checkpoint == 10);
  CHECK(std::get<wire::trigger_checkpoint>(w.received[4]).checkpoint == 11);
  gateway->flush();
}

TEST_CASE("each entry of an acknowledgement batch is checked on its own") {
  cluster c(quiet());
  io_guard guard(c.io, 20s);
  auto& w1 = c.add_worker("w1");
  raw_worker w(c.context, c.coordinator->endpoint(), "w", 1 << 20);
  guard.run_until([&] { return w1.registered() && c.jobs->registered.size() == 2; });
  c.jobs->owners[attempt_of(0)] = "w";
  c.jobs->owners[attempt_of(1)] = "w";
  c.jobs->owners[attempt_of(2)] = "w1";

  const auto before = c.coordinator->counters();
  wire::acknowledge_checkpoint_batch batch;
  batch.acks.push_back({job, attempt_of(0), 5});
  batch.acks.push_back({job, attempt_of(2), 5});                    // w1's: refused
  batch.acks.push_back({"some-other-job", attempt_of(0), 5});       // unknown job: stale
  batch.acks.push_back({job, execution_attempt_id{{0, 1}, 7}, 5});  // not current: stale
  batch.acks.push_back({job, attempt_of(1), 5, {{"chk-5/s", 3, 9}}, 3});
  w.send(batch);
  guard.run_until([&] {
    return c.coordinator->counters().frames_received == before.frames_received + 1;
  });
  CHECK(c.coordinator->counters().refused_messages == before.refused_messages + 1);
  CHECK(c.coordinator->counters().stale_messages == before.stale_messages + 2);
  CHECK(c.coordinator->counters().bad_frames == before.bad_frames);
  REQUIRE(c.jobs->acks.size() == 2);
  CHECK(c.jobs->acks[0].attempt == attempt_of(0));
  CHECK(c.jobs->acks[1].attempt == attempt_of(1));
  CHECK(c.jobs->acks[1].state.state_size == 3);

  // A batch naming more entries than the frame holds is one bad frame; the peer is still served.
  wire::testing::frame_builder lying;
  lying.envelope("acknowledge_checkpoint_batch", 1);
  lying.str("acks").raw(std::string("\xdd\x7f\xff\xff\xff", 5));  // 2 Gi entries
  w.send_raw(lying.bytes());
  w.send(wire::acknowledge_checkpoint{job, attempt_of(1), 6});
  guard.run_until([&] { return c.jobs->acks.size() == 3; });
  CHECK(c.coordinator->counters().bad_frames == before.bad_frames + 1);
}

TEST_CASE("batches to a worker stay within the size it said it reads") {
  cluster c(quiet());
  io_guard guard(c.io, 20s);
  // 256 fixed + the job id + 64 per attempt: three attempts fit in 512 bytes, a fourth not.
  raw_worker w(c.context, c.coordinator->endpoint(), "w", 512);
  poll_tick tick(c.io);
  guard.run_until([&] { return c.jobs->registered.size() == 1; });
  for (std::uint32_t i = 0; i < 10; ++i) c.jobs->owners[attempt_of(i)] = "w";

  auto gateway = c.coordinator->checkpoint_gateway(job);
  gateway->hold();
  for (std::uint32_t i = 0; i < 10; ++i) gateway->trigger_checkpoint(attempt_of(i), 3, 0, {});
  gateway->flush();
  guard.run_until([&] {
    w.poll();
    return w.received.size() == 4;
  });
  std::vector<execution_attempt_id> triggered;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& batch = std::get<wire::trigger_checkpoint_batch>(w.received[i]);
    CHECK(batch.attempts.size() == 3);
    CHECK(wire::encode(batch).size() <= 512);
    triggered.insert(triggered.end(), batch.attempts.begin(), batch.attempts.end());
  }
  triggered.push_back(std::get<wire::trigger_checkpoint>(w.received[3]).attempt);
  for (std::uint32_t i = 0; i < 10; ++i) CHECK(triggered[i] == attempt_of(i));
}

// Acknowledgements made on task threads go onto the worker's socket from that thread when
// nothing is queued ahead of them; otherwise behind what is (protocol order per task).

namespace {

// Worker w1, registered, as the owner of attempts 0 .. tasks - 1. They are not deployed: the
// tests' own threads play the tasks and report through the worker's listener.
worker_endpoint& registered_owner(cluster& c, io_guard& guard, std::uint32_t tasks) {
  auto& w1 = c.add_worker("w1");
  guard.run_until([&] { return w1.registered(); });
  for (std::uint32_t t = 0; t < tasks; ++t) c.jobs->owners[attempt_of(t)] = "w1";
  return w1;
}

}  // namespace

TEST_CASE("an acknowledgement from a task thread goes out from that thread, never ahead of a "
          "report made before it") {
  cluster c;
  io_guard guard(c.io, 20s);
  auto& w1 = registered_owner(c, guard, 1);
  auto listener = w1.listener();

  // A task thread reports RUNNING and acknowledges at once: the report is queued for the
  // control thread, so the acknowledgement must wait behind it.
  std::thread task([&] {
    listener->task_state_changed(job, attempt_of(0), execution_state::running, "");
    listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(0), 1, {}, {}});
  });
  guard.run_until([&] { return c.jobs->acks.size() == 1; });
  task.join();
  REQUIRE(c.jobs->log == std::vector<std::string>{"state 0", "ack 0 1"});

  // Now nothing is queued: the next one is sent by the task thread itself.
  const auto before = w1.counters();
  std::thread([&] {
    listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(0), 2, {}, {}});
  }).join();
  guard.run_until([&] { return c.jobs->acks.size() == 2; });
  CHECK(c.jobs->acks[1].id == 2);
  CHECK(w1.counters().direct_acks == before.direct_acks + 1);
  CHECK(w1.counters().frames_sent == before.frames_sent + 1);
  CHECK(c.coordinator->counters().refused_messages == 0);
}

TEST_CASE("an acknowledgement made on the endpoint's own thread goes out at once, never ahead "
          "of a report queued before it") {
  cluster c;
  io_guard guard(c.io, 20s);
  auto& w1 = registered_owner(c, guard, 1);
  auto listener = w1.listener();

  // A task thread's report is queued (its flush posted, not run yet); an acknowledgement made on
  // this thread, which runs the endpoint's io_context, must wait behind it.
  std::thread([&] {
    listener->task_state_changed(job, attempt_of(0), execution_state::running, "");
  }).join();
  listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(0), 1, {}, {}});
  guard.run_until([&] { return c.jobs->acks.size() == 1; });
  REQUIRE(c.jobs->log == std::vector<std::string>{"state 0", "ack 0 1"});

  // Nothing queued now: the next one is on the socket before this call returns, sent from
  // here rather than by a task thread or a posted flush.
  const auto before = w1.counters();
  listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(0), 2, {}, {}});
  CHECK(w1.counters().frames_sent == before.frames_sent + 1);
  guard.run_until([&] { return c.jobs->acks.size() == 2; });
  CHECK(c.jobs->acks[1].id == 2);
  CHECK(w1.counters().direct_acks == before.direct_acks);
  CHECK(c.coordinator->counters().refused_messages == 0);
}

TEST_CASE("acknowledgements from many task threads at once all arrive once, each task's in "
          "order") {
  cluster c;
  io_guard guard(c.io, 30s);
  constexpr std::uint32_t tasks = 4;
  constexpr checkpoint_id per_task = 250;
  auto& w1 = registered_owner(c, guard, tasks);
  auto listener = w1.listener();

  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < tasks; ++t)
    threads.emplace_back([&, t] {
      // A state report now and then, which takes the control thread's way: the
      // acknowledgements after it must not overtake it.
      for (checkpoint_id id = 1; id <= per_task; ++id) {
        if (id % 50 == 0)
          listener->task_state_changed(job, attempt_of(t), execution_state::running, "");
        listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(t), id, {}, {}});
      }
    });
  guard.run_until([&] { return c.jobs->acks.size() == tasks * per_task; });
  for (auto& t : threads) t.join();

  std::map<std::uint32_t, checkpoint_id> last;
  std::map<std::uint32_t, int> states_seen;
  for (const auto& entry : c.jobs->log) {
    std::istringstream in(entry);
    std::string kind;
    std::uint32_t task = 0;
    in >> kind >> task;
    if (kind == "state") {
      // Its report came after acknowledgement 50 * n - 1 and before 50 * n.
      ++states_seen[task];
      CHECK(last[task] == static_cast<checkpoint_id>(50 * states_seen[task] - 1));
      continue;
    }
    checkpoint_id id = 0;
    in >> id;
    CHECK(id == last[task] + 1);
    last[task] = id;
  }
  for (std::uint32_t t = 0; t < tasks; ++t) {
    CHECK(last[t] == per_task);
    CHECK(states_seen[t] == static_cast<int>(per_task / 50));
  }
  CHECK(w1.dropped_task_reports() == 0);
  CHECK(c.coordinator->counters().refused_messages == 0);
}

TEST_CASE("a worker endpoint stopped and destroyed while task threads acknowledge stays safe, "
          "and what arrived is in order") {
  // The senders fill the coordinator's receive pipe, and the test stops driving the coordinator
  // for moments a live one does not. libzmq 4.3 aborts (stream_engine_base out_event: !_io_error)
  // when a ZMTP ping falls due on a connection whose peer closed while that pipe was full and
  // unread; pings every 7.5 s keep them clear of those moments.
  coordinator_endpoint_options o;
  o.connection_timeout = 30s;
  cluster c(o);
  io_guard guard(c.io, 30s);
  constexpr std::uint32_t tasks = 3;
  auto& w1 = registered_owner(c, guard, tasks);
  auto listener = w1.listener();  // outlives the endpoint, as a task's would

  std::atomic<bool> stop_tasks{false};
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < tasks; ++t)
    threads.emplace_back([&, t] {
      // Bounded: at most this many, or until told to stop. All tasks together stay under the
      // inbox's and the outgoing queue's 65536 frames, so nothing is dropped before the stop.
      for (checkpoint_id id = 1; id <= 20000 && !stop_tasks.load(); ++id)
        listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(t), id, {}, {}});
    });
  // Some go out, then the socket is closed under the senders' feet and the endpoint goes.
  guard.run_until([&] { return c.jobs->acks.size() >= 300; });
  w1.stop();
  for (int i = 0; i < 100; ++i) c.io.poll();
  c.workers.clear();  // the last reference: the endpoint is destroyed while tasks still call
  for (int i = 0; i < 100; ++i) c.io.poll();
  stop_tasks = true;
  for (auto& t : threads) t.join();
  // The coordinator reads what the closed connection left, and then sees it closed.
  guard.run_until([&] { return c.coordinator->counters().workers_lost == 1; });

  std::map<std::uint32_t, checkpoint_id> last;
  for (const auto& ack : c.jobs->acks) {
    // What arrived of each task is a prefix of what it sent: nothing lost before the stop,
    // duplicated or reordered.
    CHECK(ack.id == last[ack.attempt.subtask.index] + 1);
    last[ack.attempt.subtask.index] = ack.id;
  }
  CHECK(c.coordinator->counters().refused_messages == 0);
}

// Nothing a frame's handling calls throws by design; if something does, neither endpoint may go
// deaf while it looks alive.

namespace {

// Worker w1, registered, whose `faulty_trigger`-th trigger throws.
worker_endpoint* faulty_worker(cluster& c, io_guard& guard, int faulty_trigger) {
  std::shared_ptr<finishing_executor> executor;
  auto& w = c.add_worker("w1", &executor, faulty_trigger);
  guard.run_until([&] { return w.registered(); });
  return &w;
}

}  // namespace

TEST_CASE("a worker whose handling of a frame throws starts over on a fresh connection and is "
          "served again") {
  cluster c;
  io_guard guard(c.io, 20s);
  auto w1 = faulty_worker(c, guard, 1);
  c.deploy("w1", attempt_of(0));
  guard.run_until([&] { return c.jobs->states.size() == 1; });

  auto gateway = c.coordinator->checkpoint_gateway(job);
  gateway->trigger_checkpoint(attempt_of(0), 1, 0, {});  // throws in the worker
  guard.run_until([&] { return w1->counters().reconnects == 1 && w1->registered(); });
  CHECK(w1->counters().registrations == 2);
  CHECK(c.jobs->acks.empty());

  c.deploy("w1", attempt_of(0));  // its tasks were cancelled: the attempt runs there again
  guard.run_until([&] { return c.jobs->states.size() == 2; });
  gateway->trigger_checkpoint(attempt_of(0), 2, 0, {});
  guard.run_until([&] { return c.jobs->acks.size() == 1; });
  CHECK(c.jobs->acks[0].id == 2);
}

TEST_CASE("a worker whose handling of a trigger batch throws midway sends nothing of it on its "
          "next session") {
  cluster c;
  io_guard guard(c.io, 20s);
  auto w1 = faulty_worker(c, guard, 2);  // the batch's first attempt acknowledges, then a fault
  c.deploy("w1", attempt_of(0));
  c.deploy("w1", attempt_of(1));
  guard.run_until([&] { return c.jobs->states.size() == 2; });

  auto gateway = c.coordinator->checkpoint_gateway(job);
  gateway->hold();
  gateway->trigger_checkpoint(attempt_of(0), 1, 0, {});
  gateway->trigger_checkpoint(attempt_of(1), 1, 0, {});
  gateway->flush();  // one trigger_checkpoint_batch frame
  guard.run_until([&] { return w1->counters().reconnects == 1 && w1->registered(); });
  CHECK(w1->dropped_task_reports() >= 1);  // attempt 0's acknowledgement, made before the fault

  // The next session works, and checkpoint 1's acknowledgement never turns up in it.
  c.deploy("w1", attempt_of(0));
  c.deploy("w1", attempt_of(1));
  guard.run_until([&] { return c.jobs->states.size() == 4; });
  gateway->hold();
  gateway->trigger_checkpoint(attempt_of(0), 2, 0, {});
  gateway->trigger_checkpoint(attempt_of(1), 2, 0, {});
  gateway->flush();
  guard.run_until([&] { return c.jobs->acks.size() == 2; });
  for (const auto& ack : c.jobs->acks) CHECK(ack.id == 2);
}

TEST_CASE("a coordinator whose handling of a frame throws logs it and reads on") {
  cluster c;
  io_guard guard(c.io, 20s);
  auto& w1 = registered_owner(c, guard, 1);
  c.jobs->faulty_acks = 1;
  auto listener = w1.listener();
  listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(0), 1, {}, {}});  // throws
  listener->acknowledge_checkpoint(checkpoint_ack{job, attempt_of(0), 2, {}, {}});
  guard.run_until([&] { return c.jobs->acks.size() == 1; });
  CHECK(c.jobs->acks[0].id == 2);
  CHECK(c.jobs->faulty_acks == 0);
  CHECK(w1.registered());
}
