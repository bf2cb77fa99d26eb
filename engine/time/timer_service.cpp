#include "engine/time/timer_service.hpp"

#include <utility>

namespace snapflow {

namespace {

constexpr std::uint64_t sign_bit = std::uint64_t{1} << 63;

std::optional<std::pair<std::int64_t, std::string>> decode_map_key(std::string_view k) {
  if (k.size() < 8) return std::nullopt;
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < 8; ++i) u = (u << 8) | static_cast<unsigned char>(k[i]);
  return std::pair{static_cast<std::int64_t>(u ^ sign_bit), std::string(k.substr(8))};
}

}  // namespace

std::string timer_service::encode_map_key(std::int64_t time, std::string_view ns) {
  std::string out;
  out.reserve(8 + ns.size());
  const std::uint64_t u = static_cast<std::uint64_t>(time) ^ sign_bit;
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  out.append(ns);
  return out;
}

result<void> timer_service::load() {
  event_.clear();
  processing_.clear();
  auto snapshot = backend_.snapshot_now();
  if (!snapshot) return snapshot.err();
  for (const auto& [group, state] : snapshot->key_groups) {
    for (time_domain d : {time_domain::event_time, time_domain::processing_time}) {
      auto it = state.maps.find(state_of(d));
      if (it == state.maps.end()) continue;
      for (const auto& [key, entries] : it->second)
        for (const auto& [map_key, _] : entries) {
          auto t = decode_map_key(map_key);
          if (!t)
            return error{"restored timer state of key group " + std::to_string(group) +
                         " holds an entry of " + std::to_string(map_key.size()) +
                         " bytes, shorter than a timer's time"};
          index(d).emplace(t->first, key, std::move(t->second));
        }
    }
  }
  return success();
}

void timer_service::register_timer(time_domain domain, std::int64_t time, std::string_view ns) {
  auto& q = index(domain);
  const std::uint64_t key = backend_.current_key();
  // Registering a timer again is common (a window's elements each ask for its end): found
  // without copying the namespace, and nothing written.
  if (q.find(entry_view{time, key, ns}) != q.end()) return;
  q.emplace(time, key, std::string(ns));
  backend_.map_put_bytes(state_of(domain), encode_map_key(time, ns), "");
}

void timer_service::delete_timer(time_domain domain, std::int64_t time, std::string_view ns) {
  auto& q = index(domain);
  const auto it = q.find(entry_view{time, backend_.current_key(), ns});
  if (it == q.end()) return;
  q.erase(it);
  backend_.map_remove(state_of(domain), encode_map_key(time, ns));
}

result<void> timer_service::fire_until(time_domain domain, std::int64_t time,
                                       const fire_function& fire) {
  auto& q = index(domain);
  while (!q.empty() && std::get<0>(*q.begin()) <= time) {
    auto node = q.extract(q.begin());
    auto& [t, key, ns] = node.value();
    backend_.set_current_key(key);
    // Out of the state before the callback: a checkpoint from now on does not hold it.
    backend_.map_remove(state_of(domain), encode_map_key(t, ns));
    fired_timer fired{t, domain, std::move(ns), key};
    if (auto r = fire(fired); !r) return r;
  }
  return success();
}

result<void> timer_service::advance_watermark(std::int64_t w, const fire_function& fire) {
  if (w <= watermark_) return success();
  watermark_ = w;
  return fire_until(time_domain::event_time, w, fire);
}

result<void> timer_service::advance_processing_time(std::int64_t now_ms,
                                                    const fire_function& fire) {
  return fire_until(time_domain::processing_time, now_ms, fire);
}

std::optional<std::int64_t> timer_service::next_processing_timer() const {
  if (processing_.empty()) return std::nullopt;
  return std::get<0>(*processing_.begin());
}

}  // namespace snapflow
