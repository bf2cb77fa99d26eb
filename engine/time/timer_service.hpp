#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "common/result.hpp"
#include "engine/state/keyed_state_backend.hpp"
#include "engine/time/watermark.hpp"
#include "graph/user_function.hpp"

namespace snapflow {

// Keyed timers (Flink's InternalTimerService), kept IN the keyed state backend so that they are
// in every checkpoint and move with their key groups on a rescale, whichever backend holds them.
//
// A timer is (domain, time, key, namespace): one per distinct tuple, however often registered.
// In the backend each lives as an entry of the map state `event_timers_state` or
// `processing_timers_state` of its key, map key = the time (8 bytes, big endian, sign bit
// flipped so that bytes order like numbers) followed by the namespace, empty value. Beside it the
// service keeps an ordered index of every timer of its subtask, so that firing never scans the
// state; load() rebuilds the index from the backend after a restore.
//
// Firing is once and only once per checkpoint history: a timer is removed from the state before
// its callback runs, so a checkpoint taken after it fired does not hold it, and one taken before
// does (it fires again only from that checkpoint, whose later output a restore rolls back).
// Due timers fire in the order (time, key, namespace). Task thread only.
class timer_service {
 public:
  static constexpr std::string_view event_timers_state = "__timers/event";
  static constexpr std::string_view processing_timers_state = "__timers/processing";

  // Called with the backend's current key set to the timer's.
  using fire_function = std::function<result<void>(const fired_timer&)>;

  explicit timer_service(keyed_state_backend& backend) : backend_(backend) {}

  // Reads every timer the backend holds into the index (after a restore): one pass over the
  // keyed state.
  result<void> load();

  // For the backend's current key.
  void register_timer(time_domain domain, std::int64_t time, std::string_view ns);
  void delete_timer(time_domain domain, std::int64_t time, std::string_view ns);

  // Event time advanced to `w`: fires every event-time timer at or before it (timers registered
  // by a callback at or before `w` fire in the same call). The watermark never goes back.
  result<void> advance_watermark(std::int64_t w, const fire_function& fire);
  // Processing time is `now_ms`: fires every processing-time timer at or before it.
  result<void> advance_processing_time(std::int64_t now_ms, const fire_function& fire);

  std::int64_t current_watermark() const { return watermark_; }
  std::optional<std::int64_t> next_processing_timer() const;
  std::size_t size(time_domain domain) const { return index(domain).size(); }

  // The map key a timer is stored under (tests).
  static std::string encode_map_key(std::int64_t time, std::string_view ns);

 private:
  using entry = std::tuple<std::int64_t, std::uint64_t, std::string>;  // time, key, namespace
  // An entry to look up without copying its namespace (std::less<> compares the two).
  using entry_view = std::tuple<std::int64_t, std::uint64_t, std::string_view>;
  using entries = std::set<entry, std::less<>>;
  entries& index(time_domain d) { return d == time_domain::event_time ? event_ : processing_; }
  const entries& index(time_domain d) const {
    return d == time_domain::event_time ? event_ : processing_;
  }
  static std::string_view state_of(time_domain d) {
    return d == time_domain::event_time ? event_timers_state : processing_timers_state;
  }
  result<void> fire_until(time_domain domain, std::int64_t time, const fire_function& fire);

  keyed_state_backend& backend_;
  entries event_;
  entries processing_;
  std::int64_t watermark_ = min_watermark;
};

}  // namespace snapflow
