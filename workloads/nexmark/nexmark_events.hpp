#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include <msgpack.hpp>

namespace snapflow::nexmark {

// Nexmark's online auction (Tucker et al., as Apache Beam and the Nexmark suite for Flink
// generate it): people register, put items up for auction, and bid on them. Times are event
// time in milliseconds since the epoch; prices are in cents. The msgpack adaptors let typed
// streams carry the events between workers. They are positional (msgpack arrays, fields by
// position as Flink's POJO serializer writes them): as maps, the field names would take about
// a third of a bid's bytes, and each decode would look every field up by name.

struct person {
  std::int64_t id = 0;
  std::string name;
  std::string email_address;
  std::string credit_card;
  std::string city;
  std::string state;
  std::int64_t date_time = 0;
  std::string extra;  // padding up to the configured average event size

  bool operator==(const person&) const = default;
  MSGPACK_DEFINE(id, name, email_address, credit_card, city, state, date_time, extra);
};

struct auction {
  std::int64_t id = 0;
  std::string item_name;
  std::string description;
  std::int64_t initial_bid = 0;
  std::int64_t reserve = 0;
  std::int64_t date_time = 0;
  std::int64_t expires = 0;
  std::int64_t seller = 0;  // a person id
  std::int64_t category = 0;
  std::string extra;

  bool operator==(const auction&) const = default;
  MSGPACK_DEFINE(id, item_name, description, initial_bid, reserve, date_time, expires, seller,
                 category, extra);
};

struct bid {
  std::int64_t auction = 0;  // an auction id
  std::int64_t bidder = 0;   // a person id
  std::int64_t price = 0;
  std::string channel;
  std::string url;
  std::int64_t date_time = 0;
  std::string extra;

  bool operator==(const bid&) const = default;
  MSGPACK_DEFINE(auction, bidder, price, channel, url, date_time, extra);
};

using event = std::variant<person, auction, bid>;

// The event's time, whichever kind it is.
inline std::int64_t event_time(const event& e) {
  return std::visit([](const auto& v) { return v.date_time; }, e);
}

}  // namespace snapflow::nexmark
