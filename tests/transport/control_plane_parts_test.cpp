// The sans-I/O pieces of the control-plane endpoints: outgoing queues, the rate limiter, the
// engine <-> wire conversions, the stub executor, CURVE key files.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <vector>

#include "engine/clock.hpp"
#include "transport/curve_keys.hpp"
#include "transport/outgoing_queues.hpp"
#include "transport/peer_names.hpp"
#include "transport/peer_rate_limiter.hpp"
#include "transport/stub_task_executor.hpp"
#include "transport/wire_conversions.hpp"

using namespace snapflow;
using namespace snapflow::transport;

namespace {

std::vector<std::string> drain(outgoing_queues& q, std::int64_t now_us) {
  std::vector<std::string> out;
  for (int i = 0; i < 1000; ++i) {
    auto f = q.pop(now_us);
    if (!f) break;
    out.push_back(f->peer + ":" + f->payload);
  }
  return out;
}

execution_attempt_id attempt_of(vertex_id v, std::uint32_t index, std::uint32_t n = 0) {
  return {{v, index}, n};
}

class recording_listener final : public task_executor_listener {
 public:
  std::vector<std::pair<execution_attempt_id, execution_state>> states;
  std::vector<checkpoint_ack> acks;
  std::vector<checkpoint_decline> declines;

  void task_state_changed(const job_id&, const execution_attempt_id& attempt,
                          execution_state state, const std::string&) override {
    states.emplace_back(attempt, state);
  }
  void acknowledge_checkpoint(const checkpoint_ack& ack) override { acks.push_back(ack); }
  void decline_checkpoint(const checkpoint_decline& d) override { declines.push_back(d); }
};

}  // namespace

TEST_CASE("outgoing queues hand out frames peer by peer in turn") {
  outgoing_queues q;
  REQUIRE(q.push("a", "1", 10));
  REQUIRE(q.push("a", "2", 10));
  REQUIRE(q.push("a", "3", 10));
  REQUIRE(q.push("b", "1", 10));
  REQUIRE(q.push("c", "1", 10));
  REQUIRE(q.push("c", "2", 10));
  CHECK(q.total() == 6);
  CHECK(drain(q, 0) == std::vector<std::string>{"a:1", "b:1", "c:1", "a:2", "c:2", "a:3"});
  CHECK(q.empty());
}

TEST_CASE("a peer's queue is bounded and dropping it forgets its frames") {
  outgoing_queues q;
  CHECK(q.push("a", "1", 2));
  CHECK(q.push("a", "2", 2));
  CHECK_FALSE(q.push("a", "3", 2));
  CHECK(q.push("b", "1", 2));
  CHECK(q.queued("a") == 2);
  q.drop("a");
  CHECK(q.queued("a") == 0);
  CHECK(drain(q, 0) == std::vector<std::string>{"b:1"});
}

TEST_CASE("a held-back peer is skipped until its time, others go first") {
  outgoing_queues q;
  REQUIRE(q.push("slow", "1", 10));
  REQUIRE(q.push("slow", "2", 10));
  REQUIRE(q.push("fast", "1", 10));
  REQUIRE(q.push("fast", "2", 10));
  auto first = q.pop(0);
  REQUIRE(first);
  CHECK(first->peer == "slow");
  q.hold_back(std::move(*first), 0, 100, 1000);
  CHECK(q.queued("slow") == 2);
  CHECK(drain(q, 50) == std::vector<std::string>{"fast:1", "fast:2"});
  CHECK(q.next_release_us() == 100);
  CHECK(drain(q, 100) == std::vector<std::string>{"slow:1", "slow:2"});
}

TEST_CASE("hold-backs of one peer double up to the maximum and reset after a send") {
  outgoing_queues q;
  REQUIRE(q.push("p", "x", 10));
  std::int64_t now = 0;
  std::vector<std::int64_t> holds;
  for (int i = 0; i < 6; ++i) {
    auto f = q.pop(now);
    REQUIRE(f);
    q.hold_back(std::move(*f), now, 10, 50);
    holds.push_back(*q.next_release_us() - now);
    now = *q.next_release_us();
  }
  CHECK(holds == std::vector<std::int64_t>{10, 20, 40, 50, 50, 50});
  auto f = q.pop(now);
  REQUIRE(f);
  q.sent("p");
  REQUIRE(q.push("p", "y", 10));
  auto g = q.pop(now);
  REQUIRE(g);
  q.hold_back(std::move(*g), now, 10, 50);
  CHECK(*q.next_release_us() - now == 10);
}

TEST_CASE("the rate limiter lets one event per peer per interval through and counts the rest") {
  peer_rate_limiter limiter(1000, 100);
  CHECK(limiter.allow("a", 0).allowed);
  CHECK_FALSE(limiter.allow("a", 10).allowed);
  CHECK_FALSE(limiter.allow("a", 999).allowed);
  CHECK(limiter.allow("b", 10).allowed);  // another peer has its own allowance
  const auto later = limiter.allow("a", 1000);
  CHECK(later.allowed);
  CHECK(later.suppressed == 2);
  CHECK(limiter.allow("a", 2500).suppressed == 0);
}

TEST_CASE("the rate limiter caps events in all and bounds the peers it remembers") {
  peer_rate_limiter limiter(1000, 3, 4);
  int allowed = 0;
  for (int i = 0; i < 100; ++i) allowed += limiter.allow("peer-" + std::to_string(i), 0).allowed;
  CHECK(allowed == 3);
  CHECK(limiter.peers() <= 4);
  // A new interval: quiet peers are forgotten to make room.
  CHECK(limiter.allow("newcomer", 5000).allowed);
  CHECK(limiter.peers() <= 4);
}

TEST_CASE("peer names from the wire are printable and bounded") {
  CHECK(printable_peer("worker-1") == "worker-1");
  CHECK(printable_peer(std::string("\0\x80\xf2", 3)) == "0x0080f2");
  CHECK(printable_peer(std::string(200, 'a')).size() < 40);
  CHECK(printable_peer("with space") == "0x77697468207370616365");
}

TEST_CASE("a deployment descriptor survives the trip to the wire and back") {
  task_deployment_descriptor d;
  d.job = "0123456789abcdef0123456789abcdef";
  d.attempt = attempt_of(2, 1, 3);
  d.job_graph_bytes = std::string("\x81\xa1g\x01", 4);
  d.subtask_endpoints = {{{0, 0}, "tcp://a:1"}, {{2, 1}, "tcp://b:2"}};
  d.restore_checkpoint_id = 42;
  d.restore_states[0] = subtask_state{{{"chk-42/x.state", 100, 7}}, 100};
  d.restore_states[3] = subtask_state{{}, 0};
  d.restore_states[5] = subtask_state{{{"chk-42/k.state", 9, 1}}, 9, keyed_state_scope{128, 32, 63}};
  d.checkpoint_dir = "state/job";
  CHECK(from_wire(to_wire(d)) == d);
  // Without CURVE no endpoint carries a key on the wire.
  for (const auto& e : to_wire(d).subtask_endpoints) CHECK_FALSE(e.public_key.has_value());

  // With CURVE each endpoint travels with its worker's key.
  d.subtask_public_keys = {{{0, 0}, std::string(40, 'a')}, {{2, 1}, std::string(40, 'b')}};
  const wire::deploy_task m = to_wire(d);
  REQUIRE(m.subtask_endpoints.size() == 2);
  CHECK(m.subtask_endpoints[1].public_key == std::string(40, 'b'));
  CHECK(from_wire(m) == d);
}

TEST_CASE("acknowledgements and declines survive the trip; unknown reasons become declined") {
  checkpoint_ack ack;
  ack.job = "j";
  ack.attempt = attempt_of(1, 2, 3);
  ack.id = 9;
  ack.state = subtask_state{{{"a", 1, 2}, {"b", 3, 4}}, 4};
  ack.metrics = {10, 20, 30, 40};
  CHECK(from_wire(to_wire(ack)) == ack);
  // A keyed subtask's scope travels in three optional fields, absent for non-keyed state.
  CHECK(to_wire(ack).max_parallelism == 0);
  ack.state.keyed = keyed_state_scope{256, 64, 127};
  CHECK(to_wire(ack).max_parallelism == 256);
  CHECK(from_wire(to_wire(ack)) == ack);

  checkpoint_decline d{"j", attempt_of(1, 0), 9,
                       checkpoint_failure_reason::checkpoint_declined_subsumed, "newer barrier"};
  CHECK(from_wire(to_wire(d)) == d);
  auto from_newer = to_wire(d);
  from_newer.reason = "checkpoint_declined_by_a_future_reason";
  CHECK(from_wire(from_newer).reason == checkpoint_failure_reason::checkpoint_declined);
}

TEST_CASE("an acknowledgement's shared state files keep their sharing; an unknown one reads as "
          "the checkpoint's own file") {
  checkpoint_ack ack;
  ack.job = "j";
  ack.attempt = attempt_of(1, 0);
  ack.id = 9;
  ack.state = subtask_state{{state_handle{"a.sst", 1, 2, std::nullopt, handle_sharing::shared_new},
                             state_handle{"b.sst", 3, 4, std::nullopt, handle_sharing::shared_reused},
                             state_handle{"own", 5, 6, std::nullopt}},
                            9};
  const auto m = to_wire(ack);
  CHECK(m.state_handles[0].sharing == "shared_new");
  CHECK(m.state_handles[1].sharing == "shared_reused");
  CHECK_FALSE(m.state_handles[2].sharing.has_value());
  CHECK(from_wire(m) == ack);
  auto from_newer = m;
  from_newer.state_handles[0].sharing = "shared_by_a_future_scheme";
  CHECK(from_wire(from_newer).state.handles[0].sharing == handle_sharing::exclusive);
}

TEST_CASE("trigger timestamps travel in milliseconds and savepoints keep their kind") {
  checkpoint_options savepoint{checkpoint_trigger_kind::savepoint, false, false, "sp/folder"};
  const auto m = to_wire("j", attempt_of(0, 0), 5, 1'700'000'000'123'456, savepoint);
  CHECK(m.timestamp_ms == 1'700'000'000'123);
  CHECK(m.is_savepoint);
  CHECK(m.savepoint_dir == "sp/folder");
  CHECK(m.mode == checkpointing_mode::at_least_once);
  CHECK(timestamp_us_from_wire(m) == 1'700'000'000'123'000);
  CHECK(options_from_wire(m) == savepoint);

  checkpoint_options manual{checkpoint_trigger_kind::manual, true, true, "chk-5"};
  const auto back = options_from_wire(to_wire("j", attempt_of(0, 0), 5, 0, manual));
  CHECK(back.kind == checkpoint_trigger_kind::periodic);  // periodic and manual look alike
  CHECK(back.exactly_once);
  CHECK(back.unaligned);
  CHECK(back.target_location == "chk-5");
}

TEST_CASE("task states map to the wire's names, and states it has no name for are not sent") {
  CHECK(to_wire(execution_state::running) == wire::task_state::running);
  CHECK(to_wire(execution_state::initializing) == wire::task_state::deploying);
  CHECK_FALSE(to_wire(execution_state::canceling));
  CHECK_FALSE(to_wire(execution_state::scheduled));
  for (auto s : {wire::task_state::deploying, wire::task_state::running, wire::task_state::finished,
                 wire::task_state::failed, wire::task_state::canceled})
    CHECK(to_wire(from_wire(s)) == s);
}

TEST_CASE("the stub executor runs at once and acknowledges every attempt of the job once") {
  auto listener = std::make_shared<recording_listener>();
  stub_task_executor stub(listener, "tcp://127.0.0.1:7000");
  CHECK(stub.data_endpoint() == "tcp://127.0.0.1:7000");
  task_deployment_descriptor d;
  d.job = "j";
  for (auto a : {attempt_of(0, 0), attempt_of(0, 1), attempt_of(1, 0)}) {
    d.attempt = a;
    stub.deploy(d);
  }
  d.job = "other";
  d.attempt = attempt_of(0, 0);
  stub.deploy(d);
  REQUIRE(listener->states.size() == 4);
  CHECK(listener->states[0].second == execution_state::running);

  // Two sources of job j on this worker: two triggers, but one ack per attempt.
  stub.trigger_checkpoint("j", attempt_of(0, 0), 1, 0, {});
  stub.trigger_checkpoint("j", attempt_of(0, 1), 1, 0, {});
  REQUIRE(listener->acks.size() == 3);
  for (const auto& ack : listener->acks) {
    CHECK(ack.job == "j");
    CHECK(ack.id == 1);
  }
  // An attempt that does not run here declines as not ready.
  stub.trigger_checkpoint("j", attempt_of(7, 0), 2, 0, {});
  REQUIRE(listener->declines.size() == 1);
  CHECK(listener->declines[0].reason ==
        checkpoint_failure_reason::checkpoint_declined_task_not_ready);

  stub.cancel("j", attempt_of(1, 0));
  stub.cancel("j", attempt_of(9, 9));  // never deployed: answered anyway
  CHECK(listener->states.back() ==
        std::pair{attempt_of(9, 9), execution_state::canceled});
  CHECK(stub.deployed() == 3);
  stub.cancel_all();
  CHECK(stub.deployed() == 0);
  CHECK(listener->states.size() == 4 + 2 + 3);
}

TEST_CASE("notifications travel with task counters; a peer's excess is cut to the newest") {
  task_io_counters c{"j", attempt_of(1, 2), 3, 4, {{5, 1'000}, {6, 2'000}}};
  CHECK(from_wire(to_wire(c)) == c);
  c.notified.clear();
  CHECK_FALSE(to_wire(c).notified);  // none: the field is left out, as older workers do
  CHECK(from_wire(to_wire(c)) == c);

  wire::task_io m{"j", attempt_of(1, 2), 0, 0, std::vector<wire::checkpoint_notified>{}};
  const auto last = static_cast<checkpoint_id>(max_notified_per_report) + 10;
  for (checkpoint_id id = 1; id <= last; ++id)
    m.notified->push_back({id, static_cast<std::int64_t>(id) * 10});
  const task_io_counters bounded = from_wire(m);
  REQUIRE(bounded.notified.size() == max_notified_per_report);
  CHECK(bounded.notified.front().id == 11);
  CHECK(bounded.notified.back().id == last);
}

TEST_CASE("the stub executor reports each notification it handled once, with its time") {
  auto listener = std::make_shared<recording_listener>();
  stub_task_executor stub(listener, "tcp://127.0.0.1:7000");
  task_deployment_descriptor d;
  d.job = "j";
  for (auto a : {attempt_of(0, 0), attempt_of(1, 0)}) {
    d.attempt = a;
    stub.deploy(d);
  }
  CHECK(stub.take_io_counters().empty());  // nothing notified yet: nothing to report
  const std::int64_t before_us = coordinator_clock::now_us();
  stub.notify_checkpoint_complete("j", attempt_of(0, 0), 3);
  stub.notify_checkpoint_complete("j", attempt_of(0, 0), 3);  // repeated
  stub.notify_checkpoint_complete("j", attempt_of(0, 0), 2);  // stale
  stub.notify_checkpoint_complete("j", attempt_of(0, 0), 4);
  stub.notify_checkpoint_complete("j", attempt_of(1, 0), 3);
  stub.notify_checkpoint_complete("j", attempt_of(9, 0), 3);  // not deployed here
  const std::int64_t after_us = coordinator_clock::now_us();

  const auto reported = stub.take_io_counters();
  REQUIRE(reported.size() == 2);
  CHECK(reported[0].attempt == attempt_of(0, 0));
  REQUIRE(reported[0].notified.size() == 2);
  CHECK(reported[0].notified[0].id == 3);
  CHECK(reported[0].notified[1].id == 4);
  CHECK(reported[1].attempt == attempt_of(1, 0));
  REQUIRE(reported[1].notified.size() == 1);
  for (const auto& r : reported) {
    CHECK(r.job == "j");
    for (const auto& n : r.notified) {
      CHECK(n.timestamp_us >= before_us);
      CHECK(n.timestamp_us <= after_us);
    }
  }
  CHECK(stub.take_io_counters().empty());  // each reported once
}

TEST_CASE("CURVE key pairs are written, read back and checked") {
  REQUIRE(curve_available());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("snapflow-keys-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  auto keys = generate_curve_key_pair();
  REQUIRE(keys);
  CHECK(is_z85_key(keys->public_key));
  CHECK(is_z85_key(keys->secret_key));
  CHECK(curve_public_key(keys->secret_key).value() == keys->public_key);
  REQUIRE(write_key_pair((dir / "node").string(), *keys));
  CHECK((std::filesystem::status(dir / "node.secret").permissions() &
         std::filesystem::perms::group_read) == std::filesystem::perms::none);
  CHECK(read_secret_key_file(dir / "node.secret").value() == *keys);
  CHECK(read_key_file(dir / "node.public").value() == keys->public_key);

  std::ofstream(dir / "allow") << "# comment\n\n  " << keys->public_key << "  \n";
  CHECK(read_allowlist(dir / "allow").value() == curve_allowlist{{keys->public_key, ""}});
  std::ofstream(dir / "bad") << keys->public_key << "\nnot-a-key\n";
  auto bad = read_allowlist(dir / "bad");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::Contains(":2: not a Z85"));

  // A key may be bound to one worker id; a second word or a conflicting binding is an error.
  auto other = generate_curve_key_pair();
  REQUIRE(other);
  std::ofstream(dir / "bound") << keys->public_key << "  worker-1\n"
                               << other->public_key << "\n"
                               << keys->public_key << " worker-1\n";
  CHECK(read_allowlist(dir / "bound").value() ==
        curve_allowlist{{keys->public_key, "worker-1"}, {other->public_key, ""}});
  std::ofstream(dir / "conflict") << keys->public_key << " worker-1\n"
                                  << keys->public_key << " worker-2\n";
  auto conflict = read_allowlist(dir / "conflict");
  REQUIRE_FALSE(conflict);
  CHECK_THAT(conflict.err().message, Catch::Contains(":2: the key is listed twice"));
  std::ofstream(dir / "words") << keys->public_key << " worker-1 extra\n";
  auto words = read_allowlist(dir / "words");
  REQUIRE_FALSE(words);
  CHECK_THAT(words.err().message, Catch::Contains(":1: expected a key and at most one worker"));
  CHECK_FALSE(read_allowlist(dir / "missing"));
  CHECK_FALSE(read_key_file(dir / "missing"));
  CHECK_FALSE(is_z85_key("short"));
  std::filesystem::remove_all(dir);
}
