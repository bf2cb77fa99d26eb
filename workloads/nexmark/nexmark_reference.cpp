#include "workloads/nexmark/nexmark_reference.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace snapflow::nexmark {

namespace {

template <typename T, typename Visit>
void each(std::span<const event> events, Visit visit) {
  for (const auto& e : events)
    if (const auto* v = std::get_if<T>(&e)) visit(*v);
}

template <typename Row>
std::vector<Row> sorted(std::vector<Row> rows) {
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

std::int64_t tumbling_window_start(std::int64_t t, std::int64_t size) {
  const std::int64_t r = t % size;
  return r < 0 ? t - r - size : t - r;
}

std::vector<bid> q0(std::span<const event> events) {
  std::vector<bid> out;
  each<bid>(events, [&](const bid& b) { out.push_back(b); });
  return out;
}

std::int64_t q1_price(std::int64_t dollar_cents) { return dollar_cents * 908 / 1000; }

std::vector<bid> q1(std::span<const event> events) {
  std::vector<bid> out = q0(events);
  for (auto& b : out) b.price = q1_price(b.price);
  return out;
}

std::vector<q2_row> q2(std::span<const event> events) {
  std::vector<q2_row> out;
  each<bid>(events, [&](const bid& b) {
    if (b.auction % q2_auction_modulus == 0) out.push_back({b.auction, b.price});
  });
  return sorted(std::move(out));
}

std::vector<q3_row> q3(std::span<const event> events) {
  std::map<std::int64_t, const person*> sellers;
  each<person>(events, [&](const person& p) {
    if (p.state == "OR" || p.state == "ID" || p.state == "CA") sellers[p.id] = &p;
  });
  std::vector<q3_row> out;
  each<auction>(events, [&](const auction& a) {
    if (a.category != q3_category) return;
    if (auto it = sellers.find(a.seller); it != sellers.end())
      out.push_back({it->second->name, it->second->city, it->second->state, a.id});
  });
  return sorted(std::move(out));
}

std::vector<q4_row> q4(std::span<const event> events) {
  std::map<std::int64_t, const auction*> auctions;
  each<auction>(events, [&](const auction& a) { auctions[a.id] = &a; });
  std::map<std::int64_t, std::int64_t> winning;  // auction id -> highest valid price
  each<bid>(events, [&](const bid& b) {
    auto it = auctions.find(b.auction);
    if (it == auctions.end()) return;
    const auction& a = *it->second;
    if (b.date_time < a.date_time || b.date_time > a.expires || b.price < a.reserve) return;
    auto [w, fresh] = winning.try_emplace(a.id, b.price);
    if (!fresh) w->second = std::max(w->second, b.price);
  });
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> per_category;  // sum, count
  for (const auto& [id, price] : winning) {
    auto& [sum, count] = per_category[auctions.at(id)->category];
    sum += price;
    ++count;
  }
  std::vector<q4_row> out;
  for (const auto& [category, sc] : per_category)
    out.push_back({category, sc.first / sc.second});
  return out;
}

std::vector<q5_row> q5(std::span<const event> events) {
  std::map<std::int64_t, std::map<std::int64_t, std::int64_t>> counts;  // window -> auction -> n
  each<bid>(events, [&](const bid& b) {
    // Every window of 10 s starting on a 2 s boundary that holds the bid.
    const std::int64_t last = tumbling_window_start(b.date_time, q5_slide_ms);
    for (std::int64_t start = last; start > b.date_time - window_ms; start -= q5_slide_ms)
      ++counts[start][b.auction];
  });
  std::vector<q5_row> out;
  for (const auto& [start, per_auction] : counts) {
    std::int64_t most = 0;
    for (const auto& [a, n] : per_auction) most = std::max(most, n);
    for (const auto& [a, n] : per_auction)
      if (n == most) out.push_back({start, a, n});
  }
  return out;
}

std::vector<q7_row> q7(std::span<const event> events) {
  std::map<std::int64_t, std::int64_t> highest;  // window -> price
  each<bid>(events, [&](const bid& b) {
    auto [it, fresh] = highest.try_emplace(tumbling_window_start(b.date_time, window_ms), b.price);
    if (!fresh) it->second = std::max(it->second, b.price);
  });
  std::vector<q7_row> out;
  each<bid>(events, [&](const bid& b) {
    const std::int64_t start = tumbling_window_start(b.date_time, window_ms);
    if (b.price == highest.at(start))
      out.push_back({start, b.auction, b.price, b.bidder, b.date_time});
  });
  return sorted(std::move(out));
}

std::vector<q8_row> q8(std::span<const event> events) {
  std::set<std::pair<std::int64_t, std::int64_t>> sold;  // (window, seller)
  each<auction>(events, [&](const auction& a) {
    sold.insert({tumbling_window_start(a.date_time, window_ms), a.seller});
  });
  std::vector<q8_row> out;
  each<person>(events, [&](const person& p) {
    const std::int64_t start = tumbling_window_start(p.date_time, window_ms);
    if (sold.contains({start, p.id})) out.push_back({p.id, p.name, start});
  });
  return sorted(std::move(out));
}

}  // namespace snapflow::nexmark
