#include "examples/nexmark/nexmark_source.hpp"

#include <memory>
#include <stdexcept>

namespace snapflow::nexmark {

nexmark_event make_nexmark_event(const generator& g, std::int64_t number) {
  nexmark_event e;
  e.number = number;
  event made = g.at(static_cast<std::uint64_t>(number));
  if (auto* p = std::get_if<person>(&made)) e.new_person = std::move(*p);
  else if (auto* a = std::get_if<auction>(&made)) e.new_auction = std::move(*a);
  else e.new_bid = std::move(std::get<bid>(made));
  return e;
}

api::data_stream<nexmark_event> nexmark_source(api::typed_environment& typed,
                                               const source_options& options) {
  if (options.events < 0) throw std::invalid_argument("nexmark: events must be >= 0");
  if (options.rate_per_subtask < 0)
    throw std::invalid_argument("nexmark: rate_per_subtask must be >= 0");
  // Built here, once: a config the generator refuses fails the job's declaration, not a task.
  auto g = std::make_shared<const generator>(options.config);
  auto numbers = typed.env().add_source(
      options.kind, {{"count", std::to_string(options.events)},
                     {"rate", std::to_string(options.rate_per_subtask)}});
  numbers.uid(options.uid);
  auto events = typed.from_sequence(
      numbers, [g](std::int64_t n) { return make_nexmark_event(*g, n); }, "nexmark-generate");
  events.uid(options.uid + "-generate");
  return events;
}

namespace {

template <typename T, typename Field>
api::data_stream<T> only(api::data_stream<nexmark_event> events, Field field, std::string name) {
  return events.flat_map<T>(
      [field](const nexmark_event& e, api::collector<T>& out) {
        if (const auto& v = e.*field) out.collect(*v);
      },
      std::move(name));
}

}  // namespace

api::data_stream<person> persons(api::data_stream<nexmark_event> events) {
  return only<person>(events, &nexmark_event::new_person, "persons");
}
api::data_stream<auction> auctions(api::data_stream<nexmark_event> events) {
  return only<auction>(events, &nexmark_event::new_auction, "auctions");
}
api::data_stream<bid> bids(api::data_stream<nexmark_event> events) {
  return only<bid>(events, &nexmark_event::new_bid, "bids");
}

}  // namespace snapflow::nexmark
