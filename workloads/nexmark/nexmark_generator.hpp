#pragma once

#include <cstdint>

#include "workloads/nexmark/nexmark_events.hpp"

namespace snapflow::nexmark {

// What the generator makes. The defaults are the Nexmark suite's: per 50 events 1 person, 3
// auctions and 46 bids; 1,000 active people; 100 auctions in flight; half the bids on a hot
// auction, a quarter by a hot bidder, a quarter of the auctions by a hot seller.
struct generator_config {
  std::uint64_t seed = 1;
  // Event time of event 0, and the event-time rate: event n is stamped
  // base_time_ms + n / events_per_second seconds. Independent of how fast events are made.
  std::int64_t base_time_ms = 1'700'000'000'000;
  std::int64_t events_per_second = 10'000;
  std::uint32_t person_proportion = 1;
  std::uint32_t auction_proportion = 3;
  std::uint32_t bid_proportion = 46;
  std::int64_t active_people = 1'000;
  std::int64_t in_flight_auctions = 100;
  std::int64_t hot_auction_ratio = 2;
  std::int64_t hot_bidder_ratio = 4;
  std::int64_t hot_seller_ratio = 4;
  // Average encoded sizes: each event's `extra` pads it to about this many bytes.
  std::uint32_t avg_person_bytes = 200;
  std::uint32_t avg_auction_bytes = 500;
  std::uint32_t avg_bid_bytes = 100;

  std::uint32_t total_proportion() const {
    return person_proportion + auction_proportion + bid_proportion;
  }
};

enum class event_kind { person, auction, bid };

// Nexmark's events as a pure function of the event number: event n is the same whichever
// source split makes it and however often it is made, so p splits can share the stream
// (split k makes the numbers n with n % p == k) and a restored source resumes at a number.
// Ids start at first_person_id and first_auction_id; a bid names a person or an auction at
// most a few ids ahead of the newest one (Nexmark's lead), so joins see either side first.
class generator {
 public:
  static constexpr std::int64_t first_person_id = 1000;
  static constexpr std::int64_t first_auction_id = 1000;
  static constexpr std::int64_t first_category_id = 10;
  static constexpr std::int64_t categories = 5;
  static constexpr std::int64_t person_id_lead = 10;
  static constexpr std::int64_t auction_id_lead = 10;

  // Throws std::invalid_argument for a config no stream can follow (a zero rate or proportion).
  explicit generator(generator_config config);

  const generator_config& config() const { return config_; }
  event_kind kind_of(std::uint64_t n) const;
  std::int64_t timestamp_of(std::uint64_t n) const;
  event at(std::uint64_t n) const;

 private:
  class draw;

  // The newest person and auction at event n, counted from 0.
  std::int64_t last_person(std::uint64_t n) const;
  std::int64_t last_auction(std::uint64_t n) const;
  // One of the active people or in-flight auctions, a few ahead of the newest included.
  std::int64_t some_person(std::uint64_t n, draw& d) const;
  std::int64_t some_auction(std::uint64_t n, draw& d) const;

  person make_person(std::uint64_t n, draw& d) const;
  auction make_auction(std::uint64_t n, draw& d) const;
  bid make_bid(std::uint64_t n, draw& d) const;

  generator_config config_;
};

}  // namespace snapflow::nexmark
