// Hostile and broken input sent to a real coordinator process while a valid worker runs a job:
// every case is refused and counted, logging stays rate-limited, and the valid worker's
// checkpoints keep completing.
#include <catch2/catch.hpp>
#include <optional>
#include <random>
#include <string>
#include <zmq.hpp>

#include "tests/cluster/cluster_support.hpp"
#include "tests/transport/frame_builder.hpp"
#include "transport/envelope.hpp"

using namespace snapflow;
using namespace snapflow::testing;

namespace {

constexpr std::size_t max_frame_bytes = 64 * 1024;

// A DEALER in the test process, speaking raw bytes to the coordinator. Receives are bounded by
// ZMQ_RCVTIMEO, so a missing answer fails the test instead of hanging it.
class raw_peer {
 public:
  raw_peer(zmq::context_t& context, const std::string& endpoint, const std::string& id = {},
           int receive_timeout_ms = 2000)
      : socket_(context, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, receive_timeout_ms);
    if (!id.empty()) socket_.set(zmq::sockopt::routing_id, id);
    socket_.connect(endpoint);
  }

  void send(const std::string& bytes) {
    REQUIRE(socket_.send(zmq::buffer(bytes), zmq::send_flags::none));
  }
  void send(const wire::message& m) { send(wire::encode(m)); }
  void send_multipart(const std::string& a, const std::string& b) {
    REQUIRE(socket_.send(zmq::buffer(a), zmq::send_flags::sndmore));
    REQUIRE(socket_.send(zmq::buffer(b), zmq::send_flags::none));
  }

  // The next message of type T, skipping others (heartbeats); nothing after a few timeouts.
  template <typename T>
  std::optional<T> receive() {
    for (int i = 0; i < 10; ++i) {
      zmq::message_t frame;
      if (!socket_.recv(frame)) return std::nullopt;
      auto decoded = wire::decode(frame.to_string_view());
      if (decoded && std::holds_alternative<T>(decoded.value()))
        return std::get<T>(decoded.value());
    }
    return std::nullopt;
  }

 private:
  zmq::socket_t socket_;
};

std::string random_bytes(std::size_t n) {
  std::mt19937 rng(42);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

std::uint64_t counter(const coordinator_process& c, const char* name) {
  return c.overview().value(name, std::uint64_t{0});
}

}  // namespace

TEST_CASE("bad input is refused and counted while a valid worker keeps being served") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state",
                                  {"--max-frame-bytes", std::to_string(max_frame_bytes)});
  auto good = start_worker(coordinator.control(), "good");
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(sources_job(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));
  const json details = coordinator.job(job);
  const json& source = details["vertices"][0];
  REQUIRE(source["subtasks"][0]["worker"] == "good");
  const execution_attempt_id good_attempt{
      {source["id"].get<vertex_id>(), source["subtasks"][0]["subtask"].get<std::uint32_t>()},
      source["subtasks"][0]["attempt"].get<std::uint32_t>()};

  const std::uint64_t bad_before = counter(coordinator, "bad-frames");
  const std::uint64_t refused_before = counter(coordinator, "refused-messages");
  zmq::context_t context(1);

  // Undecodable frames from one peer: random bytes, truncated msgpack, lying lengths, an
  // unknown message type, a multipart message.
  raw_peer garbage(context, coordinator.control());
  garbage.send(random_bytes(100));
  const std::string heartbeat = wire::encode(wire::heartbeat{"garbage", 1});
  garbage.send(heartbeat.substr(0, heartbeat.size() - 5));
  garbage.send(std::string("\xdb\xff\xff\xff\xf0", 5) + "abc");  // str32 of ~4 GiB
  garbage.send(std::string("\xdd\x7f\xff\xff\xff", 5));           // array32 of 2^31 items
  {
    wire::testing::frame_builder unknown;
    unknown.envelope("launch_missiles", 0);
    garbage.send(unknown.bytes());
  }
  garbage.send_multipart(heartbeat, heartbeat);
  {
    wire::testing::frame_builder lying_batch;  // a batch of 2^31 acknowledgements, none there
    lying_batch.envelope("acknowledge_checkpoint_batch", 1);
    lying_batch.str("acks").raw(std::string("\xdd\x7f\xff\xff\xff", 5));
    garbage.send(lying_batch.bytes());
  }
  constexpr std::uint64_t garbage_frames = 7;

  // A newer protocol version: counted as a bad frame and answered with a refusal that says why.
  raw_peer newer(context, coordinator.control());
  {
    wire::testing::frame_builder v2;
    v2.envelope("register_worker", 5, 2);
    v2.str("worker_id").str("newer").str("slots").uint(1).str("data_endpoint").str("x");
    v2.str("protocol_version").uint(2).str("pid").uint(1);
    newer.send(v2.bytes());
  }
  const auto refusal = newer.receive<wire::register_ack>();
  REQUIRE(refusal);
  CHECK_FALSE(refusal->accepted);
  CHECK_THAT(refusal->reason, Catch::Contains("protocol version 2 is not supported"));

  // A valid acknowledgement from a peer that never registered: refused, and told to register.
  raw_peer stranger(context, coordinator.control(), "stranger");
  stranger.send(wire::acknowledge_checkpoint{job, good_attempt, 1});
  CHECK(stranger.receive<wire::not_registered>());

  // A registered peer speaking for a subtask another worker owns, or for the coordinator.
  raw_peer intruder(context, coordinator.control(), "intruder");
  intruder.send(wire::register_worker{"intruder", 1, "tcp://127.0.0.1:1", 1, 1, 7});
  const auto accepted = intruder.receive<wire::register_ack>();
  REQUIRE(accepted);
  REQUIRE(accepted->accepted);
  intruder.send(wire::acknowledge_checkpoint{job, good_attempt, 1});
  intruder.send(wire::task_state_update{job, good_attempt, wire::task_state::failed, "forged"});
  intruder.send(wire::cancel_task{job, good_attempt});
  // A batch is refused entry by entry: two acknowledgements for good's attempt count twice.
  intruder.send(
      wire::acknowledge_checkpoint_batch{{{job, good_attempt, 1}, {job, good_attempt, 2}}});
  // stranger ack + intruder ack, update, cancel, and the batch's two entries
  constexpr std::uint64_t refused_messages = 6;

  // A frame over the limit arrives, is counted and refused, and the connection stays. One
  // beyond ZeroMQ's ceiling (twice the limit) makes ZeroMQ drop the connection before it is
  // buffered; the peer reconnects and is served.
  raw_peer big(context, coordinator.control(), "big", 100);
  big.send(std::string(max_frame_bytes + 1024, 'x'));
  REQUIRE(coordinator.process().wait_for_stderr("-byte frame limit", patience));
  big.send(std::string(2 * max_frame_bytes + 1, 'x'));
  constexpr std::uint64_t oversized_frames = 1;  // the second never arrives
  CHECK(eventually([&] {
    big.send(wire::heartbeat{"big", 1});
    return big.receive<wire::not_registered>().has_value();
  }));

  // A flood from one peer costs counters, not log lines.
  raw_peer flood(context, coordinator.control());
  constexpr std::uint64_t flood_frames = 2000;
  for (std::uint64_t i = 0; i < flood_frames; ++i) flood.send(random_bytes(32));

  const std::uint64_t expected_bad = garbage_frames + 1 + oversized_frames + flood_frames;
  REQUIRE(eventually(
      [&] { return counter(coordinator, "bad-frames") >= bad_before + expected_bad; }));
  CHECK(counter(coordinator, "refused-messages") >= refused_before + refused_messages);
  // One line per peer (garbage, newer, flood) at most in this short test, plus margin.
  CHECK(coordinator.process().count_in_stderr("bad frame from") <= 5);
  CHECK(coordinator.process().count_in_stderr("refused a message from") <= 6);

  // The valid worker never noticed: its job did not fail over, checkpoints still complete.
  const auto completed = coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, completed + 3));
  const json after = coordinator.job(job);
  CHECK(after["state"] == "RUNNING");
  CHECK(after["restarts"] == 0);
  CHECK(after["vertices"][0]["subtasks"][0]["worker"] == "good");
  CHECK_FALSE(good->exited());
}
