// The data plane with CURVE: channels between workers are encrypted, and a worker's data
// endpoint lets in only the keys its deployed channels name as their producers'.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include <zmq.hpp>

#include "transport/curve_keys.hpp"
#include "transport/data/data_frame.hpp"
#include "transport/data/data_zap_handler.hpp"
#include "transport/data/network_data_plane.hpp"

using namespace snapflow;
using namespace snapflow::data;
using namespace std::chrono_literals;

namespace {

channel_key key(std::uint32_t producer, std::uint32_t consumer) {
  return channel_key{"job-1", 1, producer, 2, consumer, 0};
}

element_batch batch_of(std::int64_t first, std::size_t n) {
  element_batch b;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t seq = first + static_cast<std::int64_t>(i);
    b.emplace_back(record{static_cast<std::uint64_t>(seq % 7), seq, seq, {}});
  }
  return b;
}

transport::curve_key_pair new_keys() {
  auto keys = transport::generate_curve_key_pair();
  REQUIRE(keys);
  return *keys;
}

std::shared_ptr<network_data_plane> curve_plane(const transport::curve_key_pair& keys,
                                                int unvouched_wait_ms = 10'000) {
  data_plane_options o;
  o.curve = keys;
  o.curve_unvouched_wait_ms = unvouched_wait_ms;
  auto plane = network_data_plane::create("tcp://127.0.0.1:*", o);
  REQUIRE(plane);
  return *plane;
}

// Polls `condition` until it holds or `within` passes; the pause only paces the polling.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds within = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

std::optional<element_batch> take(input_channel& in, task_wakeup& wakeup,
                                  std::chrono::milliseconds within = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    const auto seen = wakeup.generation();
    if (auto b = in.try_take()) return b;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    wakeup.wait(seen, deadline);
  }
}

bool is(const std::optional<element_batch>& got, const element_batch& want) {
  return got.has_value() && *got == want;
}

// A raw DEALER that speaks the data plane's frames, with CURVE (`keys`, verifying
// `server_key`) or without (no keys).
struct raw_client {
  raw_client(zmq::context_t& context, const std::string& endpoint,
             const std::optional<transport::curve_key_pair>& keys = std::nullopt,
             const std::string& server_key = {})
      : socket(context, zmq::socket_type::dealer) {
    socket.set(zmq::sockopt::linger, 0);
    if (keys) REQUIRE_FALSE(transport::apply_curve_client(socket, {*keys, server_key}));
    socket.connect(endpoint);
  }
  void send(const channel_key& k, std::uint64_t seq, element_batch batch, bool priority = false) {
    REQUIRE(socket.send(zmq::buffer(encode(data_frame{k, seq, std::move(batch), priority})),
                        zmq::send_flags::dontwait));
  }
  zmq::socket_t socket;
};

}  // namespace

TEST_CASE("with CURVE, records cross an encrypted channel between two workers' data planes") {
  REQUIRE(transport::curve_available());
  const auto keys_a = new_keys();
  const auto keys_b = new_keys();
  auto a = curve_plane(keys_a);
  auto b = curve_plane(keys_b);

  // The producer first: its handshake waits at b's ZAP handler until b's deployment names a's
  // key (deployments reach workers in no fixed order).
  auto out = a->open_output(key(0, 0), {b->data_endpoint(), keys_b.public_key});
  REQUIRE(out->send(batch_of(0, 3)));
  auto in = b->open_input(key(0, 0), {a->data_endpoint(), keys_a.public_key});
  auto wakeup = std::make_shared<task_wakeup>();
  in->set_wakeup(wakeup);
  CHECK(is(take(*in, *wakeup), batch_of(0, 3)));
  REQUIRE(out->send(element_batch{end_of_input{}}));
  CHECK(is(take(*in, *wakeup), element_batch{end_of_input{}}));

  const data_plane_counters c = b->counters();
  CHECK(c.frames_received == 2);
  CHECK(c.handshakes_refused == 0);
  CHECK(c.wrong_key_frames == 0);
}

TEST_CASE("a data plane with CURVE refuses peers without a key, and one without CURVE peers "
          "with one") {
  REQUIRE(transport::curve_available());
  const auto keys = new_keys();
  auto secured = curve_plane(keys);
  auto plain = network_data_plane::create("tcp://127.0.0.1:*").value();

  const auto no_key = secured->refuse_peer(channel_peer{"tcp://127.0.0.1:1"});
  REQUIRE(no_key);
  CHECK_THAT(*no_key, Catch::Contains("requires CURVE"));
  const auto bad_key = secured->refuse_peer(channel_peer{"tcp://127.0.0.1:1", "short"});
  REQUIRE(bad_key);
  CHECK_THAT(*bad_key, Catch::Contains("not a Z85 CURVE key"));
  CHECK_FALSE(secured->refuse_peer(channel_peer{"tcp://127.0.0.1:1", keys.public_key}));

  const auto keyed = plain->refuse_peer(channel_peer{"tcp://127.0.0.1:1", keys.public_key});
  REQUIRE(keyed);
  CHECK_THAT(*keyed, Catch::Contains("without CURVE"));
  CHECK_FALSE(plain->refuse_peer(channel_peer{"tcp://127.0.0.1:1"}));
}

TEST_CASE("with CURVE, a client without a key or with a key nobody vouched for gets nothing "
          "in") {
  REQUIRE(transport::curve_available());
  const auto keys_a = new_keys();
  const auto keys_b = new_keys();
  const auto stranger = new_keys();
  auto a = curve_plane(keys_a);
  auto b = curve_plane(keys_b, 100);  // strangers are denied after 100 ms
  auto in = b->open_input(key(0, 0), {a->data_endpoint(), keys_a.public_key});
  auto wakeup = std::make_shared<task_wakeup>();
  in->set_wakeup(wakeup);

  zmq::context_t context(1);
  // No CURVE: the handshake fails on the mechanism.
  raw_client plain(context, b->data_endpoint());
  plain.send(key(0, 0), 0, batch_of(100, 1));
  REQUIRE(eventually([&] { return b->counters().handshakes_refused >= 1; }));
  // CURVE with a key no channel on b names: ZAP denies it once its wait is over.
  raw_client unknown(context, b->data_endpoint(), stranger, keys_b.public_key);
  unknown.send(key(0, 0), 0, batch_of(200, 1));
  REQUIRE(eventually([&] { return b->counters().keys_denied == 1; }));
  REQUIRE(eventually([&] { return b->counters().handshakes_refused >= 2; }));

  // The real producer's batches are the only ones that arrive.
  auto out = a->open_output(key(0, 0), {b->data_endpoint(), keys_b.public_key});
  REQUIRE(out->send(batch_of(0, 2)));
  CHECK(is(take(*in, *wakeup), batch_of(0, 2)));
  const data_plane_counters c = b->counters();
  CHECK(c.frames_received == 1);
  CHECK(c.handshakes_refused >= 2);  // the keyless client may have tried again meanwhile
  CHECK(c.keys_denied == 1);
  CHECK(c.bad_frames == 0);
}

TEST_CASE("with CURVE, a vouched key cannot feed a channel whose producer has another key") {
  REQUIRE(transport::curve_available());
  const auto keys_a = new_keys();
  const auto keys_b = new_keys();
  const auto keys_c = new_keys();
  auto a = curve_plane(keys_a);
  auto b = curve_plane(keys_b);
  // c produces for channel (1, 0) on b, so its key gets in; channel (0, 0) is a's.
  auto from_c = b->open_input(key(1, 0), {"tcp://127.0.0.1:1", keys_c.public_key});
  auto from_a = b->open_input(key(0, 0), {a->data_endpoint(), keys_a.public_key});
  auto wakeup = std::make_shared<task_wakeup>();
  from_a->set_wakeup(wakeup);

  zmq::context_t context(1);
  raw_client c(context, b->data_endpoint(), keys_c, keys_b.public_key);
  c.send(key(0, 0), 0, batch_of(500, 1));
  REQUIRE(eventually([&] { return b->counters().wrong_key_frames == 1; }));

  auto out = a->open_output(key(0, 0), {b->data_endpoint(), keys_b.public_key});
  REQUIRE(out->send(batch_of(0, 1)));
  CHECK(is(take(*from_a, *wakeup), batch_of(0, 1)));
  CHECK(b->counters().handshakes_refused == 0);
}

TEST_CASE("the data ZAP handler holds an unknown key's handshake until a deployment vouches for "
          "it, and denies it when none does in time") {
  REQUIRE(transport::curve_available());
  const auto server_keys = new_keys();
  const auto client_keys = new_keys();
  zmq::context_t context(1);
  data_zap_handler zap(context, 60s);
  REQUIRE_FALSE(zap.start());
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  REQUIRE_FALSE(transport::apply_curve_server(server, {server_keys, {}}));
  server.bind("tcp://127.0.0.1:*");
  const std::string endpoint = server.get(zmq::sockopt::last_endpoint);

  raw_client client(context, endpoint, client_keys, server_keys.public_key);
  REQUIRE(client.socket.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait));
  REQUIRE(eventually([&] { return zap.waiting() == 1; }));
  CHECK(zap.accepted() == 0);
  zap.vouch(client_keys.public_key);
  server.set(zmq::sockopt::rcvtimeo, 10'000);
  zmq::message_t id;
  zmq::message_t payload;
  REQUIRE(server.recv(id));
  REQUIRE(server.recv(payload));
  CHECK(payload.to_string() == "hello");
  CHECK(std::string(zmq_msg_gets(payload.handle(), "User-Id")) == client_keys.public_key);
  CHECK(zap.accepted() == 1);
  CHECK(zap.waiting() == 0);

  // Withdrawn as often as vouched for: the key is a stranger again.
  zap.vouch(client_keys.public_key);
  zap.withdraw(client_keys.public_key);
  CHECK(zap.vouched(client_keys.public_key));
  zap.withdraw(client_keys.public_key);
  CHECK_FALSE(zap.vouched(client_keys.public_key));

  // A second handler with a short wait (its own context) denies a key nobody vouches for.
  zmq::context_t other_context(1);
  data_zap_handler strict(other_context, 50ms);
  REQUIRE_FALSE(strict.start());
  zmq::socket_t other(other_context, zmq::socket_type::router);
  other.set(zmq::sockopt::linger, 0);
  REQUIRE_FALSE(transport::apply_curve_server(other, {server_keys, {}}));
  other.bind("tcp://127.0.0.1:*");
  raw_client refused(other_context, other.get(zmq::sockopt::last_endpoint), client_keys,
                     server_keys.public_key);
  REQUIRE(eventually([&] { return strict.denied() == 1; }));
  CHECK(strict.accepted() == 0);
  other.close();
  strict.stop();
  server.close();
  zap.stop();
}

TEST_CASE("with CURVE, a priority barrier crosses from the channel's producer, and one from "
          "another vouched key is dropped") {
  REQUIRE(transport::curve_available());
  const auto keys_a = new_keys();
  const auto keys_b = new_keys();
  const auto keys_c = new_keys();
  auto a = curve_plane(keys_a);
  auto b = curve_plane(keys_b);
  auto from_c = b->open_input(key(1, 0), {"tcp://127.0.0.1:1", keys_c.public_key});
  auto from_a = b->open_input(key(0, 0), {a->data_endpoint(), keys_a.public_key});
  auto wakeup = std::make_shared<task_wakeup>();
  from_a->set_wakeup(wakeup);

  checkpoint_barrier barrier;
  barrier.id = 3;
  barrier.options.unaligned = true;
  zmq::context_t context(1);
  raw_client c(context, b->data_endpoint(), keys_c, keys_b.public_key);
  c.send(key(0, 0), 0, element_batch{barrier}, true);
  REQUIRE(eventually([&] { return b->counters().wrong_key_frames == 1; }));
  CHECK_FALSE(from_a->has_priority_barrier());

  auto out = a->open_output(key(0, 0), {b->data_endpoint(), keys_b.public_key});
  REQUIRE(out->send(batch_of(0, 1)));
  REQUIRE(out->send_priority(element_batch{barrier}));
  REQUIRE(eventually([&] { return from_a->has_priority_barrier(); }));
  auto found = from_a->take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->barrier == barrier);
  REQUIRE(found->ahead.size() == 1);
  CHECK(found->ahead[0] == batch_of(0, 1));
  CHECK(is(take(*from_a, *wakeup), batch_of(0, 1)));
  CHECK(b->counters().wrong_key_frames == 1);
}
