#include "workloads/nexmark/nexmark_generator.hpp"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string_view>

namespace snapflow::nexmark {

namespace {

constexpr std::array<std::string_view, 12> first_names = {
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter",
    "Walter", "Ada"};
constexpr std::array<std::string_view, 10> last_names = {
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
    "Lovelace"};
// Query 3 looks for sellers in OR, ID and CA.
constexpr std::array<std::string_view, 6> us_states = {"AZ", "CA", "ID", "OR", "WA", "WY"};
constexpr std::array<std::string_view, 10> us_cities = {
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
    "Seattle", "Kent", "Cheyenne"};
constexpr std::array<std::string_view, 4> hot_channels = {"Google", "Facebook", "Baidu", "Apple"};
constexpr std::int64_t other_channels = 10'000;

// splitmix64's finaliser: a well-mixed 64-bit value from any input.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

// The random draws of one event: a splitmix64 sequence seeded from (seed, event number), so
// an event's content depends on nothing else.
class generator::draw {
 public:
  draw(std::uint64_t seed, std::uint64_t n) : state_(mix(seed) ^ mix(n + 0x9e3779b97f4a7c15ULL)) {}

  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix(state_);
  }
  // Uniform in [0, bound), bound > 0 (multiply-shift: no modulo bias worth the name).
  std::int64_t below(std::int64_t bound) {
    return static_cast<std::int64_t>(
        (static_cast<unsigned __int128>(next()) * static_cast<std::uint64_t>(bound)) >> 64);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  template <std::size_t N>
  std::string_view pick(const std::array<std::string_view, N>& from) {
    return from[static_cast<std::size_t>(below(static_cast<std::int64_t>(N)))];
  }
  // Lowercase letters, `length` of them.
  std::string letters(std::size_t length) {
    std::string out(length, 'a');
    std::uint64_t bits = 0;
    for (std::size_t i = 0; i < length; ++i) {
      if (i % 12 == 0) bits = next();
      out[i] = static_cast<char>('a' + (bits % 26));
      bits /= 26;
    }
    return out;
  }
  // Cents between 1 dollar and a million, log-uniform: most prices are small.
  std::int64_t price() { return static_cast<std::int64_t>(std::llround(std::pow(10.0, unit() * 6.0) * 100.0)); }

 private:
  std::uint64_t state_;
};

generator::generator(generator_config config) : config_(config) {
  if (config_.events_per_second <= 0)
    throw std::invalid_argument("nexmark: events_per_second must be positive");
  if (config_.person_proportion == 0 || config_.auction_proportion == 0 ||
      config_.bid_proportion == 0)
    throw std::invalid_argument("nexmark: every event kind needs a positive proportion");
  if (config_.active_people <= 0 || config_.in_flight_auctions <= 0 ||
      config_.hot_auction_ratio <= 0 || config_.hot_bidder_ratio <= 0 ||
      config_.hot_seller_ratio <= 0)
    throw std::invalid_argument("nexmark: people, auctions in flight and hot ratios must be "
                                "positive");
}

event_kind generator::kind_of(std::uint64_t n) const {
  const std::uint64_t offset = n % config_.total_proportion();
  if (offset < config_.person_proportion) return event_kind::person;
  if (offset < config_.person_proportion + config_.auction_proportion) return event_kind::auction;
  return event_kind::bid;
}

std::int64_t generator::timestamp_of(std::uint64_t n) const {
  // In microseconds first: rates above 1,000 per second still spread over the milliseconds.
  const auto us = static_cast<unsigned __int128>(n) * 1'000'000u /
                  static_cast<std::uint64_t>(config_.events_per_second);
  return config_.base_time_ms + static_cast<std::int64_t>(us / 1000u);
}

std::int64_t generator::last_person(std::uint64_t n) const {
  // Each group of total_proportion events starts with its people.
  const auto epoch = static_cast<std::int64_t>(n / config_.total_proportion());
  const auto offset = static_cast<std::int64_t>(n % config_.total_proportion());
  const auto people = static_cast<std::int64_t>(config_.person_proportion);
  return epoch * people + std::min(offset, people - 1);
}

std::int64_t generator::last_auction(std::uint64_t n) const {
  auto epoch = static_cast<std::int64_t>(n / config_.total_proportion());
  auto offset = static_cast<std::int64_t>(n % config_.total_proportion());
  const auto people = static_cast<std::int64_t>(config_.person_proportion);
  const auto auctions = static_cast<std::int64_t>(config_.auction_proportion);
  if (offset < people) {
    --epoch;  // a person: the newest auction is the previous group's last (-1 before any)
    offset = auctions - 1;
  } else if (offset >= people + auctions) {
    offset = auctions - 1;  // a bid: this group's last auction
  } else {
    offset -= people;  // an auction: itself
  }
  return epoch * auctions + offset;
}

std::int64_t generator::some_person(std::uint64_t n, draw& d) const {
  const std::int64_t people = last_person(n) + 1;
  const std::int64_t active = std::min(people, config_.active_people);
  return people - active + d.below(active + person_id_lead);
}

std::int64_t generator::some_auction(std::uint64_t n, draw& d) const {
  const std::int64_t newest = std::max<std::int64_t>(last_auction(n), 0);
  const std::int64_t oldest = std::max<std::int64_t>(newest - config_.in_flight_auctions, 0);
  return oldest + d.below(newest - oldest + 1 + auction_id_lead);
}

event generator::at(std::uint64_t n) const {
  draw d(config_.seed, n);
  switch (kind_of(n)) {
    case event_kind::person: return make_person(n, d);
    case event_kind::auction: return make_auction(n, d);
    case event_kind::bid: break;
  }
  return make_bid(n, d);
}

person generator::make_person(std::uint64_t n, draw& d) const {
  person p;
  p.id = last_person(n) + first_person_id;
  // The draws of one field are taken one statement each, in a fixed order: the operands of a
  // `+` are evaluated in an order the compiler chooses, so draws inside one expression would
  // make the event depend on the compiler. (The order is the one GCC chose when the draws
  // were inline, so events stay what they were; bench/peers/flink's port follows it.)
  const std::string_view last_name = d.pick(last_names);
  const std::string_view first_name = d.pick(first_names);
  p.name = std::string(first_name) + " " + std::string(last_name);
  const std::string domain = d.letters(5);
  const std::string user = d.letters(7);
  p.email_address = user + "@" + domain + ".com";
  std::int64_t card[4];
  for (int i = 3; i >= 0; --i) card[i] = 1000 + d.below(9000);
  p.credit_card = std::to_string(card[0]) + " " + std::to_string(card[1]) + " " +
                  std::to_string(card[2]) + " " + std::to_string(card[3]);
  p.city = d.pick(us_cities);
  p.state = d.pick(us_states);
  p.date_time = timestamp_of(n);
  // `extra` pads the event to about the configured size.
  const std::size_t used = 8 + p.name.size() + p.email_address.size() + p.credit_card.size() +
                           p.city.size() + p.state.size() + 8;
  if (used < config_.avg_person_bytes)
    p.extra = d.letters(config_.avg_person_bytes - used);
  return p;
}

auction generator::make_auction(std::uint64_t n, draw& d) const {
  auction a;
  a.id = last_auction(n) + first_auction_id;
  // A hot seller is the newest multiple of the ratio: few people sell most.
  const std::int64_t seller = d.below(config_.hot_seller_ratio) > 0
                                  ? (last_person(n) / config_.hot_seller_ratio) *
                                        config_.hot_seller_ratio
                                  : some_person(n, d);
  a.seller = seller + first_person_id;
  a.category = first_category_id + d.below(categories);
  a.item_name = d.letters(20);
  a.description = d.letters(100);
  a.initial_bid = d.price();
  a.reserve = a.initial_bid + d.price();
  a.date_time = timestamp_of(n);
  // Open about as long as it takes for in_flight_auctions more auctions to start, on average.
  const std::uint64_t ahead =
      static_cast<std::uint64_t>(config_.in_flight_auctions) * config_.total_proportion() /
      config_.auction_proportion;
  const std::int64_t horizon_ms = timestamp_of(n + ahead) - a.date_time;
  a.expires = a.date_time + 1 + d.below(std::max<std::int64_t>(2 * horizon_ms, 1));
  const std::size_t used = 8 + a.item_name.size() + a.description.size() + 8 * 6;
  if (used < config_.avg_auction_bytes)
    a.extra = d.letters(config_.avg_auction_bytes - used);
  return a;
}

bid generator::make_bid(std::uint64_t n, draw& d) const {
  bid b;
  const std::int64_t auction = d.below(config_.hot_auction_ratio) > 0
                                   ? (std::max<std::int64_t>(last_auction(n), 0) /
                                      config_.hot_auction_ratio) *
                                         config_.hot_auction_ratio
                                   : some_auction(n, d);
  b.auction = auction + first_auction_id;
  const std::int64_t bidder = d.below(config_.hot_bidder_ratio) > 0
                                  ? (last_person(n) / config_.hot_bidder_ratio) *
                                            config_.hot_bidder_ratio +
                                        1
                                  : some_person(n, d);
  b.bidder = bidder + first_person_id;
  b.price = d.price();
  if (d.below(10) > 0) {
    b.channel = d.pick(hot_channels);
    b.url = "https://www.nexmark.com/" + b.channel + "/item.htm?query=1";
  } else {
    const std::int64_t channel = d.below(other_channels);
    b.channel = "channel-" + std::to_string(channel);
    const std::string second = d.letters(5);  // one draw a statement, as in make_person
    const std::string first = d.letters(5);
    b.url = "https://www.nexmark.com/" + first + "/" + second +
            "/item.htm?query=1&channel_id=" + std::to_string(channel);
  }
  b.date_time = timestamp_of(n);
  const std::size_t used = 8 * 4 + b.channel.size() + b.url.size();
  if (used < config_.avg_bid_bytes)
    b.extra = d.letters(config_.avg_bid_bytes - used);
  return b;
}

}  // namespace snapflow::nexmark
