#include "examples/nexmark/nexmark_queries.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace snapflow::nexmark {

namespace {

// What q4's first stage keeps of an auction, with its best valid price so far (-1: none): one
// state entry, so a bid reads one entry and writes it only when it raises the price.
struct q4_auction {
  std::int64_t start = 0;
  std::int64_t expires = 0;
  std::int64_t reserve = 0;
  std::int64_t category = 0;
  std::int64_t best = -1;
  MSGPACK_DEFINE(start, expires, reserve, category, best);
};

// What it keeps of a bid that came before its auction.
struct q4_early_bid {
  std::int64_t date_time = 0;
  std::int64_t price = 0;
  MSGPACK_DEFINE(date_time, price);
};

// An auction's best valid price so far, from the first stage to the second.
struct q4_winning {
  std::int64_t auction = 0;
  std::int64_t category = 0;
  std::int64_t price = 0;
  MSGPACK_DEFINE(auction, category, price);
};

// Whether a bid at `date_time` of `price` counts for the auction (the reference's rule).
bool valid_for(const q4_auction& a, std::int64_t date_time, std::int64_t price) {
  return date_time >= a.start && date_time <= a.expires && price >= a.reserve;
}

void q4_on_auction(const auction& a, api::keyed_process_context<std::int64_t>& ctx,
                   api::collector<q4_winning>& out) {
  q4_auction kept{a.date_time, a.expires, a.reserve, a.category};
  auto early = ctx.get_list_state<q4_early_bid>("early");
  for (const auto& b : early.get())
    if (valid_for(kept, b.date_time, b.price)) kept.best = std::max(kept.best, b.price);
  early.clear();
  ctx.get_state<q4_auction>("auction").update(kept);
  if (kept.best >= 0) out.collect(q4_winning{ctx.key(), kept.category, kept.best});
}

void q4_on_bid(const bid& b, api::keyed_process_context<std::int64_t>& ctx,
               api::collector<q4_winning>& out) {
  auto state = ctx.get_state<q4_auction>("auction");
  auto kept = state.value();
  if (!kept) {
    ctx.get_list_state<q4_early_bid>("early").add(q4_early_bid{b.date_time, b.price});
    return;
  }
  if (!valid_for(*kept, b.date_time, b.price) || kept->best >= b.price) return;
  kept->best = b.price;
  state.update(*kept);
  out.collect(q4_winning{ctx.key(), kept->category, b.price});
}

// A category's running aggregate in q4's second stage: one state entry.
struct q4_category {
  std::int64_t sum = 0;
  std::int64_t count = 0;
  std::int64_t version = 0;
  MSGPACK_DEFINE(sum, count, version);
};

void q4_average(const q4_winning& w, api::keyed_process_context<std::int64_t>& ctx,
                api::collector<q4_update>& out) {
  auto prices = ctx.get_map_state<std::int64_t, std::int64_t>("prices");
  auto state = ctx.get_state<q4_category>("category");
  q4_category c = state.value_or(q4_category{});
  if (const auto old = prices.get(w.auction)) {
    c.sum += w.price - *old;
  } else {
    c.sum += w.price;
    ++c.count;
  }
  ++c.version;
  prices.put(w.auction, w.price);
  state.update(c);
  out.collect(q4_update{ctx.key(), c.sum / c.count, c.version});
}

bool q3_state(const person& p) { return p.state == "OR" || p.state == "ID" || p.state == "CA"; }

void q3_on_person(const person& p, api::keyed_process_context<std::int64_t>& ctx,
                  api::collector<q3_row>& out) {
  ctx.get_state<person>("person").update(p);
  auto waiting = ctx.get_list_state<std::int64_t>("waiting");
  for (const std::int64_t auction_id : waiting.get())
    out.collect(q3_row{p.name, p.city, p.state, auction_id});
  waiting.clear();
}

void q3_on_auction(const auction& a, api::keyed_process_context<std::int64_t>& ctx,
                   api::collector<q3_row>& out) {
  if (const auto p = ctx.get_state<person>("person").value()) {
    out.collect(q3_row{p->name, p->city, p->state, a.id});
    return;
  }
  ctx.get_list_state<std::int64_t>("waiting").add(a.id);
}

using person_window = std::pair<std::int64_t, std::int64_t>;  // (person id, window start)

// q8's state per (person, window): the person's name once seen, whether one of their auctions
// was seen, and whether the row went out.
void q8_emit_once(api::keyed_process_context<person_window>& ctx, api::collector<q8_row>& out) {
  auto name = ctx.get_state<std::string>("name");
  auto sold = ctx.get_state<bool>("sold");
  auto emitted = ctx.get_state<bool>("emitted");
  if (!name.value() || !sold.value_or(false) || emitted.value_or(false)) return;
  emitted.update(true);
  out.collect(q8_row{ctx.key().first, *name.value(), ctx.key().second});
}

void q8_on_person(const person& p, api::keyed_process_context<person_window>& ctx,
                  api::collector<q8_row>& out) {
  ctx.get_state<std::string>("name").update(p.name);
  q8_emit_once(ctx, out);
}

void q8_on_auction(const auction&, api::keyed_process_context<person_window>& ctx,
                   api::collector<q8_row>& out) {
  ctx.get_state<bool>("sold").update(true);
  q8_emit_once(ctx, out);
}

// q5 and q7's bids on event time (nexmark_queries.hpp says why no out-of-orderness is needed).
// No idleness either: a split left out as idle could make its next bids late.
api::data_stream<bid> timed_bids(api::data_stream<nexmark_event> events, std::string name) {
  return bids(events).assign_timestamps_and_watermarks(
      [](const bid& b) { return b.date_time; }, std::chrono::milliseconds(0),
      std::chrono::milliseconds(0), nullptr, std::move(name));
}

// The max timestamp of the window of size `size` that starts at `start`: where its results
// are stamped, and where the second stages' timers fire.
std::int64_t window_end_time(std::int64_t start, std::int64_t size) { return start + size - 1; }

// q5's second stage, keyed by window start: the highest count so far and its auctions.
void q5_on_count(const q5_row& r, api::keyed_process_context<std::int64_t>& ctx,
                 api::collector<q5_row>&) {
  auto most = ctx.get_state<std::int64_t>("most");
  auto auctions = ctx.get_list_state<std::int64_t>("auctions");
  const auto kept = most.value();
  if (kept && *kept > r.bids) return;
  if (!kept || *kept < r.bids) {
    most.update(r.bids);
    auctions.clear();
    ctx.register_event_time_timer(window_end_time(r.window_start, window_ms));
  }
  auctions.add(r.auction);
}

void q5_on_window_end(std::int64_t, api::keyed_process_context<std::int64_t>& ctx,
                      api::collector<q5_row>& out) {
  auto most = ctx.get_state<std::int64_t>("most");
  auto auctions = ctx.get_list_state<std::int64_t>("auctions");
  if (const auto n = most.value())
    for (const std::int64_t a : auctions.get()) out.collect(q5_row{ctx.key(), a, *n});
  most.clear();
  auctions.clear();
}

// q7's bids of the highest price in a window (of one auction in the first stage, of all in
// the second); price -1 before the first bid.
struct q7_best {
  std::int64_t window_start = 0;
  std::int64_t price = -1;
  std::vector<q7_row> bids;
  MSGPACK_DEFINE(window_start, price, bids);
};

// Adds `rows` of `price` to `best`: they replace its bids when higher, join them on a tie.
void q7_offer(q7_best& best, std::int64_t price, const std::vector<q7_row>& rows) {
  if (price < best.price) return;
  if (price > best.price) {
    best.price = price;
    best.bids.clear();
  }
  best.bids.insert(best.bids.end(), rows.begin(), rows.end());
}

q7_best q7_add(q7_best best, const bid& b) {
  const std::int64_t start = tumbling_window_start(b.date_time, window_ms);
  q7_offer(best, b.price, {q7_row{start, b.auction, b.price, b.bidder, b.date_time}});
  return best;
}

// Sessions merge accumulators; tumbling windows never do, but the aggregate takes a merge.
q7_best q7_merge(q7_best a, const q7_best& b) {
  q7_offer(a, b.price, b.bids);
  return a;
}

// q7's second stage, keyed by window start: the best bids of all auctions so far.
void q7_on_best(const q7_best& b, api::keyed_process_context<std::int64_t>& ctx,
                api::collector<q7_row>&) {
  auto price = ctx.get_state<std::int64_t>("price");
  auto best = ctx.get_list_state<q7_row>("bids");
  const auto kept = price.value();
  if (kept && *kept > b.price) return;
  if (!kept || *kept < b.price) {
    price.update(b.price);
    best.clear();
    ctx.register_event_time_timer(window_end_time(b.window_start, window_ms));
  }
  best.add_all(b.bids);
}

void q7_on_window_end(std::int64_t, api::keyed_process_context<std::int64_t>& ctx,
                      api::collector<q7_row>& out) {
  auto best = ctx.get_list_state<q7_row>("bids");
  for (const auto& row : best.get()) out.collect(row);
  ctx.get_state<std::int64_t>("price").clear();
  best.clear();
}

}  // namespace

api::data_stream<bid> q0_job(api::data_stream<nexmark_event> events) {
  return bids(events).map([](const bid& b) { return b; }, "q0-pass");
}

api::data_stream<bid> q1_job(api::data_stream<nexmark_event> events) {
  return bids(events).map(
      [](bid b) {
        b.price = q1_price(b.price);
        return b;
      },
      "q1-convert");
}

api::data_stream<q2_row> q2_job(api::data_stream<nexmark_event> events) {
  return bids(events)
      .filter([](const bid& b) { return b.auction % q2_auction_modulus == 0; }, "q2-select")
      .map([](const bid& b) { return q2_row{b.auction, b.price}; }, "q2-project");
}

api::data_stream<q3_row> q3_job(api::data_stream<nexmark_event> events) {
  auto sellers = persons(events).filter(q3_state, "q3-states");
  auto items = auctions(events).filter(
      [](const auction& a) { return a.category == q3_category; }, "q3-category");
  auto joined = sellers.connect(items)
                    .key_by([](const person& p) { return p.id; },
                            [](const auction& a) { return a.seller; })
                    .process<q3_row>(q3_on_person, q3_on_auction, "q3-join");
  joined.uid("q3-join");
  return joined;
}

api::data_stream<q4_update> q4_job(api::data_stream<nexmark_event> events) {
  auto winning = auctions(events)
                     .connect(bids(events))
                     .key_by([](const auction& a) { return a.id; },
                             [](const bid& b) { return b.auction; })
                     .process<q4_winning>(q4_on_auction, q4_on_bid, "q4-winning");
  winning.uid("q4-winning");
  auto averages = winning.key_by([](const q4_winning& w) { return w.category; })
                      .process<q4_update>(q4_average, "q4-average");
  averages.uid("q4-average");
  return averages;
}

api::data_stream<q5_row> q5_job(api::data_stream<nexmark_event> events) {
  using std::chrono::milliseconds;
  auto counts =
      timed_bids(events, "q5-event-time")
          .key_by([](const bid& b) { return b.auction; })
          .window(api::sliding_event_time_windows(milliseconds(window_ms),
                                                  milliseconds(q5_slide_ms)))
          .aggregate(
              std::int64_t{0}, [](std::int64_t n, const bid&) { return n + 1; },
              [](std::int64_t a, std::int64_t b) { return a + b; },
              [](const std::int64_t& auction, const api::time_window& w, const std::int64_t& n) {
                return q5_row{w.start, auction, n};
              },
              "q5-count");
  counts.window.uid("q5-count");
  auto top = counts.results.key_by([](const q5_row& r) { return r.window_start; })
                 .process<q5_row>(q5_on_count, q5_on_window_end, "q5-top");
  top.uid("q5-top");
  return top;
}

api::data_stream<q7_row> q7_job(api::data_stream<nexmark_event> events) {
  auto per_auction =
      timed_bids(events, "q7-event-time")
          .key_by([](const bid& b) { return b.auction; })
          .window(api::tumbling_event_time_windows(std::chrono::milliseconds(window_ms)))
          .aggregate(
              q7_best{}, q7_add, q7_merge,
              [](const std::int64_t&, const api::time_window& w, const q7_best& best) {
                q7_best out = best;
                out.window_start = w.start;
                return out;
              },
              "q7-auction-max");
  per_auction.window.uid("q7-auction-max");
  auto top = per_auction.results.key_by([](const q7_best& b) { return b.window_start; })
                 .process<q7_row>(q7_on_best, q7_on_window_end, "q7-max");
  top.uid("q7-max");
  return top;
}

api::data_stream<q8_row> q8_job(api::data_stream<nexmark_event> events) {
  auto joined =
      persons(events)
          .connect(auctions(events))
          .key_by(
              [](const person& p) {
                return person_window{p.id, tumbling_window_start(p.date_time, window_ms)};
              },
              [](const auction& a) {
                return person_window{a.seller, tumbling_window_start(a.date_time, window_ms)};
              })
          .process<q8_row>(q8_on_person, q8_on_auction, "q8-join");
  joined.uid("q8-join");
  return joined;
}

}  // namespace snapflow::nexmark
