#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "engine/api/list_state.hpp"
#include "engine/api/map_state.hpp"
#include "engine/api/reducing_state.hpp"
#include "engine/api/state_scope.hpp"
#include "engine/api/value_state.hpp"
#include "graph/record.hpp"

namespace snapflow::api {

// What a typed keyed process function sees besides its input: the current key and the typed
// state scoped to it (Flink's KeyedProcessFunction.Context plus getRuntimeContext().getState).
// State handles are cheap: take them per record. A name must keep its type across the job's
// versions: restoring a state under another type fails the task with a decode error.
template <typename K>
class keyed_process_context {
 public:
  using ttl = std::optional<std::chrono::milliseconds>;

  keyed_process_context(const K& key, state_scope& scope, const record& input)
      : key_(key), scope_(scope), input_(input) {}

  const K& key() const { return key_; }
  // Processing time of the state's clock, in milliseconds.
  std::int64_t now_ms() const { return scope_.now_ms(); }
  // The record the input value arrived in (its seq and hashed key).
  const record& input_record() const { return input_; }
  // Event time (docs/event-time.md): the input's timestamp (no_timestamp without an assigner,
  // and in on_timer), the operator's watermark, and timers of this key. A timer fires once, in
  // on_timer (the process overload that takes one), with this key's state; registering the same
  // time twice makes one timer. Throws std::logic_error in a function without on_timer.
  std::int64_t timestamp() const { return input_.timestamp; }
  std::int64_t current_watermark() const { return scope_.context().current_watermark(); }
  std::int64_t current_processing_time() const { return scope_.context().processing_time_ms(); }
  void register_event_time_timer(std::int64_t t) {
    scope_.context().register_event_time_timer(t, scope_.encoded_key());
  }
  void register_processing_time_timer(std::int64_t t) {
    scope_.context().register_processing_time_timer(t, scope_.encoded_key());
  }
  void delete_event_time_timer(std::int64_t t) {
    scope_.context().delete_event_time_timer(t, scope_.encoded_key());
  }
  void delete_processing_time_timer(std::int64_t t) {
    scope_.context().delete_processing_time_timer(t, scope_.encoded_key());
  }

  template <typename V>
  api::value_state<V> get_state(std::string name, ttl time_to_live = std::nullopt) {
    return api::value_state<V>(scope_, std::move(name), time_to_live);
  }
  template <typename V>
  api::list_state<V> get_list_state(std::string name, ttl time_to_live = std::nullopt) {
    return api::list_state<V>(scope_, std::move(name), time_to_live);
  }
  template <typename UK, typename UV>
  api::map_state<UK, UV> get_map_state(std::string name, ttl time_to_live = std::nullopt) {
    return api::map_state<UK, UV>(scope_, std::move(name), time_to_live);
  }
  template <typename V>
  api::reducing_state<V> get_reducing_state(
      std::string name, typename api::reducing_state<V>::reduce_function reduce,
      ttl time_to_live = std::nullopt) {
    return api::reducing_state<V>(scope_, std::move(name), std::move(reduce), time_to_live);
  }

 private:
  const K& key_;
  state_scope& scope_;
  const record& input_;
};

}  // namespace snapflow::api
