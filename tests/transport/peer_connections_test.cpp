// Mapping closed connections to their peers, whatever order frames and close reports arrive in.
#include <catch2/catch.hpp>

#include "transport/peer_connections.hpp"

using snapflow::transport::peer_connections;
using strings = std::vector<std::string>;

TEST_CASE("peer connections: a closed connection names the peer whose frames came on it") {
  peer_connections c;
  CHECK(c.frame_from("w1", 7).empty());
  CHECK(c.frame_from("w2", 8).empty());
  CHECK(c.frame_from("w1", 7).empty());
  CHECK(c.closed(8) == "w2");
  CHECK_FALSE(c.closed(8).has_value());  // reported once
  CHECK(c.closed(7) == "w1");
  CHECK(c.size() == 0);
  // A connection no frame came on names nobody; an unknown descriptor is ignored.
  CHECK_FALSE(c.closed(9).has_value());
  CHECK(c.frame_from("w3", -1).empty());
  CHECK(c.size() == 0);
}

TEST_CASE("peer connections: a descriptor reused before its close report arrives loses the old "
          "peer at once, and the late report does not touch the new one") {
  peer_connections c;
  CHECK(c.frame_from("w1", 7).empty());
  // w1's connection closed, the kernel gave 7 to w2's new connection, w2's frame came first.
  CHECK(c.frame_from("w2", 7) == strings{"w1"});
  CHECK_FALSE(c.closed(7).has_value());  // the report about w1's connection: stale
  CHECK(c.closed(7) == "w2");            // w2's own connection closing
}

TEST_CASE("peer connections: a peer that reconnects is not lost, and its old connection's "
          "report is skipped") {
  peer_connections c;
  CHECK(c.frame_from("w1", 7).empty());
  CHECK(c.frame_from("w1", 9).empty());  // reconnected on 9 before 7's close was reported
  CHECK_FALSE(c.closed(7).has_value());
  // 7 is free for another peer, and its close then names that peer.
  CHECK(c.frame_from("w2", 7).empty());
  CHECK(c.closed(7) == "w2");
  CHECK(c.closed(9) == "w1");
}

TEST_CASE("peer connections: a close reported before the reconnection names the peer") {
  peer_connections c;
  CHECK(c.frame_from("w1", 7).empty());
  CHECK(c.closed(7) == "w1");
  CHECK(c.frame_from("w1", 7).empty());  // back on a new connection that got the same number
  CHECK(c.closed(7) == "w1");
}

TEST_CASE("peer connections: a forgotten peer's later close report is skipped") {
  peer_connections c;
  CHECK(c.frame_from("w1", 7).empty());
  c.forget("w1");  // lost by its heartbeat timeout; its connection closes later
  CHECK(c.size() == 0);
  CHECK(c.frame_from("w2", 7).empty());  // 7 reused before that close was reported
  CHECK_FALSE(c.closed(7).has_value());
  CHECK(c.closed(7) == "w2");
}
