#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "workloads/nexmark/nexmark_events.hpp"

namespace snapflow::nexmark {

// Each query's result over a finite list of events, computed the plainest way: what a
// streaming job of the query must produce over the same events once its input has ended (every
// window closed, every auction expired). Rows come sorted, so results compare as multisets;
// q0 and q1 keep the input's order. Windows are aligned to the epoch and hold [start, end).

inline constexpr std::int64_t window_ms = 10'000;  // q5's size, q7's and q8's tumbling windows
inline constexpr std::int64_t q5_slide_ms = 2'000;
inline constexpr std::int64_t q3_category = 10;
inline constexpr std::int64_t q2_auction_modulus = 123;

struct q2_row {
  std::int64_t auction = 0;
  std::int64_t price = 0;
  auto operator<=>(const q2_row&) const = default;
  MSGPACK_DEFINE(auction, price);
};

struct q3_row {
  std::string name;
  std::string city;
  std::string state;
  std::int64_t auction = 0;
  auto operator<=>(const q3_row&) const = default;
  MSGPACK_DEFINE(name, city, state, auction);
};

struct q4_row {
  std::int64_t category = 0;
  std::int64_t average_price = 0;  // of the winning bids, truncated to a cent
  auto operator<=>(const q4_row&) const = default;
  MSGPACK_DEFINE(category, average_price);
};

struct q5_row {
  std::int64_t window_start = 0;
  std::int64_t auction = 0;
  std::int64_t bids = 0;
  auto operator<=>(const q5_row&) const = default;
  MSGPACK_DEFINE(window_start, auction, bids);
};

struct q7_row {
  std::int64_t window_start = 0;
  std::int64_t auction = 0;
  std::int64_t price = 0;
  std::int64_t bidder = 0;
  std::int64_t date_time = 0;
  auto operator<=>(const q7_row&) const = default;
  MSGPACK_DEFINE(window_start, auction, price, bidder, date_time);
};

struct q8_row {
  std::int64_t person = 0;
  std::string name;
  std::int64_t window_start = 0;
  auto operator<=>(const q8_row&) const = default;
  MSGPACK_DEFINE(person, name, window_start);
};

// The window of size `size` (aligned to the epoch) that holds `t`.
std::int64_t tumbling_window_start(std::int64_t t, std::int64_t size);

// q0, pass-through: every bid.
std::vector<bid> q0(std::span<const event> events);
// q1, currency conversion: every bid, its price in euro cents (price * 908 / 1000, truncated).
std::int64_t q1_price(std::int64_t dollar_cents);
std::vector<bid> q1(std::span<const event> events);
// q2, selection: the bids on auctions whose id is a multiple of 123.
std::vector<q2_row> q2(std::span<const event> events);
// q3, local item suggestion: sellers in OR, ID or CA of auctions in category 10 (a join of
// every person with every auction, whichever came first).
std::vector<q3_row> q3(std::span<const event> events);
// q4, average price per category: an auction's winning bid is its highest bid at or above the
// reserve made between its start and its expiry (both included); per category, the average of
// the winning prices.
std::vector<q4_row> q4(std::span<const event> events);
// q5, hot items: per sliding window (10 s, every 2 s), the auctions with the most bids.
std::vector<q5_row> q5(std::span<const event> events);
// q7, highest bid: per tumbling window of 10 s, the bids with the highest price.
std::vector<q7_row> q7(std::span<const event> events);
// q8, new users: people who registered and started an auction in the same 10 s window.
std::vector<q8_row> q8(std::span<const event> events);

}  // namespace snapflow::nexmark
