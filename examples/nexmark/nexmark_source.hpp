#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <msgpack.hpp>

#include "engine/api/typed_api.hpp"
#include "workloads/nexmark/nexmark_events.hpp"
#include "workloads/nexmark/nexmark_generator.hpp"

namespace snapflow::nexmark {

// One Nexmark event on a typed stream: its number and exactly one of the three kinds (the
// shape of the Nexmark suite's Event, whose other two fields are null). msgpack-c has no
// std::variant adaptor, so the kinds travel as optionals.
struct nexmark_event {
  std::int64_t number = 0;
  std::optional<person> new_person;
  std::optional<auction> new_auction;
  std::optional<bid> new_bid;

  MSGPACK_DEFINE(number, new_person, new_auction, new_bid);
};

nexmark_event make_nexmark_event(const generator& g, std::int64_t number);

struct source_options {
  generator_config config;
  std::int64_t events = 1'000'000;  // event numbers 0 .. events - 1
  // Events per second per source subtask; 0 = as fast as the job takes them.
  std::int64_t rate_per_subtask = 0;
  // The runtime source kind that emits the numbers: sequence_source or a kind that emits like
  // one (tests wrap it to hold the source mid-run).
  std::string kind = "sequence_source";
  std::string uid = "nexmark-source";
};

// Nexmark's events by number: a source of the numbers 0 .. events - 1 (split over its subtasks
// as sequence_source splits them, so it rescales and restores by number) and the generator
// after it, in the source's subtasks. Throws std::invalid_argument for a config the generator
// refuses or a negative count or rate.
api::data_stream<nexmark_event> nexmark_source(api::typed_environment& typed,
                                               const source_options& options);

// One kind out of the event stream.
api::data_stream<person> persons(api::data_stream<nexmark_event> events);
api::data_stream<auction> auctions(api::data_stream<nexmark_event> events);
api::data_stream<bid> bids(api::data_stream<nexmark_event> events);

}  // namespace snapflow::nexmark
