// The reference computations checked by hand on a few events each: the streaming queries are
// held against them, so they must be right themselves.
#include <catch2/catch.hpp>

#include "workloads/nexmark/nexmark_generator.hpp"
#include "workloads/nexmark/nexmark_reference.hpp"

using namespace snapflow::nexmark;

namespace {

person make_person(std::int64_t id, std::string state, std::int64_t t) {
  person p;
  p.id = id;
  p.name = "p" + std::to_string(id);
  p.city = "c" + std::to_string(id);
  p.state = std::move(state);
  p.date_time = t;
  return p;
}

auction make_auction(std::int64_t id, std::int64_t seller, std::int64_t category, std::int64_t t,
                     std::int64_t expires, std::int64_t reserve) {
  auction a;
  a.id = id;
  a.seller = seller;
  a.category = category;
  a.date_time = t;
  a.expires = expires;
  a.reserve = reserve;
  return a;
}

bid make_bid(std::int64_t auction, std::int64_t price, std::int64_t t, std::int64_t bidder = 1) {
  bid b;
  b.auction = auction;
  b.price = price;
  b.date_time = t;
  b.bidder = bidder;
  return b;
}

}  // namespace

TEST_CASE("nexmark reference: windows are aligned to the epoch") {
  CHECK(tumbling_window_start(0, 10'000) == 0);
  CHECK(tumbling_window_start(9'999, 10'000) == 0);
  CHECK(tumbling_window_start(10'000, 10'000) == 10'000);
  CHECK(tumbling_window_start(-1, 10'000) == -10'000);
}

TEST_CASE("nexmark reference: q0, q1 and q2 keep, convert and select bids") {
  const std::vector<event> events = {make_person(1, "OR", 0), make_bid(246, 1000, 1),
                                     make_bid(247, 2001, 2), make_bid(123, 5, 3)};
  CHECK(q0(events).size() == 3);
  const auto converted = q1(events);
  REQUIRE(converted.size() == 3);
  CHECK(converted[0].price == 908);
  CHECK(converted[1].price == 1816);  // 2001 * 0.908 = 1816.9, truncated
  CHECK(converted[2].price == 4);
  CHECK(q2(events) == std::vector<q2_row>{{123, 5}, {246, 1000}});
}

TEST_CASE("nexmark reference: q3 joins sellers in OR, ID and CA with their category 10 "
          "auctions, whichever came first") {
  const std::vector<event> events = {
      make_auction(100, 1, 10, 0, 10, 0),  // before its seller
      make_person(1, "OR", 1),
      make_person(2, "WA", 2),
      make_auction(101, 2, 10, 3, 10, 0),  // seller in WA
      make_auction(102, 1, 11, 4, 10, 0),  // category 11
      make_person(3, "CA", 5),
      make_auction(103, 3, 10, 6, 10, 0),
  };
  CHECK(q3(events) == std::vector<q3_row>{{"p1", "c1", "OR", 100}, {"p3", "c3", "CA", 103}});
}

TEST_CASE("nexmark reference: q4 averages the winning bids per category") {
  const std::vector<event> events = {
      make_auction(1, 9, 10, 100, 200, 50),
      make_bid(1, 40, 150),   // below the reserve
      make_bid(1, 70, 150),
      make_bid(1, 90, 200),   // at the expiry: still valid
      make_bid(1, 500, 201),  // too late
      make_auction(2, 9, 10, 100, 200, 0),
      make_bid(2, 30, 99),    // too early
      make_bid(2, 10, 100),
      make_auction(3, 9, 11, 0, 10, 0),  // no bid: not counted
  };
  // Category 10: winners 90 and 10, average 50.
  CHECK(q4(events) == std::vector<q4_row>{{10, 50}});
}

TEST_CASE("nexmark reference: q5 finds the auctions with most bids per sliding window") {
  const std::vector<event> events = {make_bid(1, 1, 1'000), make_bid(1, 1, 3'000),
                                     make_bid(2, 1, 3'500), make_bid(2, 1, 11'000)};
  const auto rows = q5(events);
  // Windows starting -8000..0 hold the bid at 1 s; the one at 3 s is in -6000..2000, and so on.
  CHECK(std::count(rows.begin(), rows.end(), q5_row{0, 1, 2}) == 1);
  CHECK(std::count(rows.begin(), rows.end(), q5_row{-8'000, 1, 1}) == 1);
  // [2 s, 12 s): auction 2 has two bids, auction 1 one.
  CHECK(std::count(rows.begin(), rows.end(), q5_row{2'000, 2, 2}) == 1);
  CHECK(std::count(rows.begin(), rows.end(), q5_row{2'000, 1, 1}) == 0);
  CHECK(std::count(rows.begin(), rows.end(), q5_row{-6'000, 1, 2}) == 1);  // [-6 s, 4 s)
  CHECK(std::count(rows.begin(), rows.end(), q5_row{-6'000, 2, 1}) == 0);
  CHECK(std::count(rows.begin(), rows.end(), q5_row{4'000, 2, 1}) == 1);  // only 11 s
  CHECK(std::count(rows.begin(), rows.end(), q5_row{10'000, 2, 1}) == 1);
  for (const auto& r : rows) CHECK(r.window_start % q5_slide_ms == 0);
}

TEST_CASE("nexmark reference: q7 keeps each tumbling window's highest bids, ties included") {
  const std::vector<event> events = {make_bid(1, 5, 1, 7), make_bid(2, 9, 2, 8),
                                     make_bid(3, 9, 9'999, 9), make_bid(4, 1, 10'000, 10)};
  CHECK(q7(events) == std::vector<q7_row>{{0, 2, 9, 8, 2}, {0, 3, 9, 9, 9'999},
                                          {10'000, 4, 1, 10, 10'000}});
}

TEST_CASE("nexmark reference: q8 finds people who started an auction in the window they "
          "registered in") {
  const std::vector<event> events = {
      make_person(1, "OR", 1'000), make_auction(10, 1, 10, 9'999, 20'000, 0),
      make_person(2, "OR", 9'000), make_auction(11, 2, 10, 10'000, 20'000, 0),  // next window
      make_person(3, "OR", 25'000), make_auction(12, 3, 10, 21'000, 30'000, 0),
      make_auction(13, 3, 10, 22'000, 30'000, 0)};
  CHECK(q8(events) == std::vector<q8_row>{{1, "p1", 0}, {3, "p3", 20'000}});
}

TEST_CASE("nexmark reference: over generated events every query finds rows") {
  const generator g({.seed = 42});
  std::vector<event> events;
  for (std::uint64_t n = 0; n < 200'000; ++n) events.push_back(g.at(n));
  CHECK(q0(events).size() == 184'000);
  CHECK(!q2(events).empty());
  CHECK(!q3(events).empty());
  CHECK(q4(events).size() == generator::categories);
  CHECK(!q5(events).empty());
  CHECK(!q7(events).empty());
  CHECK(!q8(events).empty());
}
