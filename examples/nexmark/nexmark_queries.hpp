#pragma once

#include <cstdint>

#include <msgpack.hpp>

#include "engine/api/typed_api.hpp"
#include "examples/nexmark/nexmark_source.hpp"
#include "workloads/nexmark/nexmark_reference.hpp"

namespace snapflow::nexmark {

// Nexmark's queries as typed jobs: each takes the event stream (nexmark_source) and returns
// its result stream. Rows are workloads/nexmark's reference rows, so a job's output compares
// with the reference computation over the same events (nexmark_reference.hpp says what each
// query means). Stateful operators get uids of their own (`q3-join`, `q4-winning`,
// `q4-average`, `q5-count`, `q5-top`, `q7-auction-max`, `q7-max`, `q8-join`) so a restored job
// finds its state.

// q0, pass-through: every bid.
api::data_stream<bid> q0_job(api::data_stream<nexmark_event> events);
// q1, currency conversion: every bid, its price in euro cents.
api::data_stream<bid> q1_job(api::data_stream<nexmark_event> events);
// q2, selection: (auction, price) of the bids on auctions whose id is a multiple of 123.
api::data_stream<q2_row> q2_job(api::data_stream<nexmark_event> events);
// q3, local item suggestion: an incremental join of people (in OR, ID or CA) and auctions (in
// category 10) by seller, in a keyed co-process keyed by person id. A person is kept once seen;
// an auction whose seller has not arrived yet waits in a list for it. Each match is emitted
// once, whichever side came first, so the output's multiset equals the reference's.
api::data_stream<q3_row> q3_job(api::data_stream<nexmark_event> events);

// q4's output: a category's average winning price after its `version`-th change. The latest
// version of each category is the query's result once the input ended; versions count up from
// 1 with no gap, which makes lost or repeated updates visible in an exactly-once sink's output.
struct q4_update {
  std::int64_t category = 0;
  std::int64_t average_price = 0;
  std::int64_t version = 0;
  auto operator<=>(const q4_update&) const = default;
  MSGPACK_DEFINE(category, average_price, version);
};

// q4, average price per category, without event-time windows: an auction's winning bid is its
// highest bid at or above the reserve whose time lies in [start, expires], decided from the
// times the events carry (not from a clock), so the result once the input ended is exactly the
// reference's. Two keyed stages: per auction (a co-process of auctions and bids; bids that
// arrive before their auction wait in a list) the best valid price so far, then per category
// each auction's best price, their sum and count. Every change of a category's average is
// emitted as a q4_update.
api::data_stream<q4_update> q4_job(api::data_stream<nexmark_event> events);

// q5 and q7 run on event time: each bid's time is its `date_time`, watermarks come per source
// split with no out-of-orderness (a split's events come in number order, and their times never
// go back), and windows fire when the watermark passes their end. The source's end of input is
// the end of event time, so once the input ended every window has fired and the output is
// exactly the reference's. Late bids cannot occur; were there any, they would be dropped.

// q5, hot items: per sliding window of 10 s every 2 s, the auctions with the most bids (all of
// them on a tie). Two keyed stages: bids per auction counted in sliding windows (`q5-count`,
// each count at its window's max timestamp), then per window start the highest count and its
// auctions (`q5-top`), emitted by an event-time timer at the window's max timestamp: once the
// watermark passed it, every subtask of the first stage has sent that window's counts.
api::data_stream<q5_row> q5_job(api::data_stream<nexmark_event> events);

// q7, highest bid: per tumbling window of 10 s, the bids with the highest price (all of them on
// a tie). Two keyed stages: per auction and window its best bids (`q7-auction-max`, a window
// aggregate), then per window start the best of those (`q7-max`), emitted by an event-time
// timer at the window's max timestamp.
api::data_stream<q7_row> q7_job(api::data_stream<nexmark_event> events);

// q8, new users: people who registered and started an auction in the same 10 s tumbling
// window, as an incremental join instead of a window join: persons and auctions keyed by
// (person id, window start) into a keyed co-process that emits the person once, when both
// sides have been seen. Without timers its state is never dropped (a window join frees it when
// the window closes), but its output, once the input ended, is exactly the reference's.
api::data_stream<q8_row> q8_job(api::data_stream<nexmark_event> events);

}  // namespace snapflow::nexmark
