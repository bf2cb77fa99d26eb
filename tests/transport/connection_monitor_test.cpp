// The connection monitor must never keep the socket it watched from going away: a worker that
// starts over closes its control socket and opens another under the same routing id, and the
// coordinator's ROUTER (handover off) ignores the new connection while the old one is open.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <zmq.hpp>

#include "transport/connection_monitor.hpp"

using snapflow::transport::connection_monitor;
using snapflow::transport::handshake_event;
using namespace std::chrono_literals;

namespace {

template <typename Done>
bool within(std::chrono::milliseconds bound, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// The next message the ROUTER gets, as [routing id, payload], within `bound`.
bool receive(zmq::socket_t& router, std::string& peer, std::string& payload,
             std::chrono::milliseconds bound) {
  return within(bound, [&] {
    zmq::message_t id;
    if (!router.recv(id, zmq::recv_flags::dontwait)) return false;
    zmq::message_t body;
    REQUIRE(router.recv(body, zmq::recv_flags::none));
    peer = id.to_string();
    payload = body.to_string();
    return true;
  });
}

}  // namespace

TEST_CASE("connection monitor: a watched socket closed after stop() closes its connection, so the "
          "same routing id connects again, round after round") {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::router_handover, false);
  router.bind("tcp://127.0.0.1:*");
  const std::string address = router.get(zmq::sockopt::last_endpoint);
  std::atomic<int> closed{0};
  connection_monitor router_monitor;
  REQUIRE_FALSE(router_monitor.start(
      context, router, [](const handshake_event&) {}, [&](int) { ++closed; }));

  // Each round is a worker's reconnection: the closed socket's connection must close, or the
  // ROUTER never hears the next one (a blocked ZeroMQ reaper keeps every later socket open too).
  for (int round = 0; round < 40; ++round) {
    INFO("round " << round);
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::routing_id, "w1");
    connection_monitor monitor;
    REQUIRE_FALSE(monitor.start(context, dealer, [](const handshake_event&) {}));
    dealer.connect(address);
    const std::string hello = "hello " + std::to_string(round);
    dealer.send(zmq::buffer(hello), zmq::send_flags::none);
    std::string peer;
    std::string payload;
    REQUIRE(receive(router, peer, payload, 10s));
    CHECK(peer == "w1");
    CHECK(payload == hello);
    monitor.stop();
    dealer.close();
    // The ROUTER processes the close when it is called: poll it meanwhile.
    const bool connection_closed = within(10s, [&] {
      (void)router.get(zmq::sockopt::events);
      return closed.load() == round + 1;
    });
    REQUIRE(connection_closed);
  }
  router_monitor.stop();
}

TEST_CASE("connection monitor: stop() is idempotent and the destructor stops a running one") {
  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  {
    connection_monitor monitor;
    monitor.stop();  // never started
    REQUIRE_FALSE(monitor.start(context, dealer, [](const handshake_event&) {}));
    monitor.stop();
    monitor.stop();
    REQUIRE_FALSE(monitor.start(context, dealer, [](const handshake_event&) {}));
  }  // the destructor stops it
  dealer.close();
  context.close();  // returns only once every socket is gone: nothing may still hold one
}
