#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/collector.hpp"
#include "engine/api/data_stream.hpp"
#include "engine/api/keyed_process_context.hpp"
#include "engine/api/processing_clock.hpp"
#include "engine/api/state_scope.hpp"
#include "engine/api/windowed_stream_fwd.hpp"
#include "graph/stream_environment.hpp"

namespace snapflow::api {

// A stream of T partitioned by a key K (Flink's KeyedStream<T, K>). The process function runs
// the key selector again on each value: the record carries only the key's 64-bit hash, and the
// state is scoped by the key itself (state_scope.hpp says why).
template <typename K, typename T>
class keyed_stream {
 public:
  keyed_stream(stream_environment& env, snapflow::keyed_stream raw,
               std::function<K(const T&)> selector)
      : env_(&env), raw_(std::move(raw)), selector_(std::move(selector)) {}

  // fn: void(const T&, keyed_process_context<K>&, collector<O>&). `clock` is the processing
  // time state TTL uses (tests inject a manual_clock).
  template <typename O, typename F>
  data_stream<O> process(F fn, std::string name = "process",
                         std::shared_ptr<const processing_clock> clock =
                             processing_clock::system()) {
    process_function raw_fn = [fn = std::move(fn), select = selector_, clock, name](
                                  const record& r, keyed_context& state, std::vector<record>& out) {
      const T value = decode_payload<T>(r, name);
      const K key = select(value);
      state_scope scope(state, encode(key), clock);
      keyed_process_context<K> context(key, scope, r);
      collector<O> c(out, r);
      fn(value, context, c);
    };
    return data_stream<O>(*env_, raw_.process(std::move(raw_fn), std::move(name)));
  }

  // With keyed timers (Flink's KeyedProcessFunction.onTimer): on_timer: void(std::int64_t time,
  // keyed_process_context<K>&, collector<O>&), called once per timer with its key's state. What
  // it collects for an event-time timer carries the timer's time as its event timestamp.
  template <typename O, typename F, typename G>
  data_stream<O> process(F fn, G on_timer, std::string name,
                         std::shared_ptr<const processing_clock> clock =
                             processing_clock::system()) {
    process_function raw_fn = [fn = std::move(fn), select = selector_, clock, name](
                                  const record& r, keyed_context& state, std::vector<record>& out) {
      const T value = decode_payload<T>(r, name);
      const K key = select(value);
      state_scope scope(state, encode(key), clock);
      keyed_process_context<K> context(key, scope, r);
      collector<O> c(out, r);
      fn(value, context, c);
    };
    timer_function raw_timer = [on_timer = std::move(on_timer), clock, name](
                                   const fired_timer& t, keyed_context& state,
                                   std::vector<record>& out) {
      const K key =
          decode_or_throw<K>(t.ns, [&] { return "the key of a timer of '" + name + "'"; });
      state_scope scope(state, t.ns, clock);
      // What the output records inherit: the timer's key hash; seq and value 0.
      const record origin{t.key, 0, 0, {}};
      keyed_process_context<K> context(key, scope, origin);
      collector<O> c(out, origin);
      on_timer(t.timestamp, context, c);
    };
    return data_stream<O>(*env_, raw_.process(timed_process_function{std::move(raw_fn),
                                                                      std::move(raw_timer)},
                                              std::move(name)));
  }

  // Event-time windows over this stream (window.hpp).
  template <typename A>
  windowed_stream<K, T, A> window(A assigner) {
    return windowed_stream<K, T, A>(*this, std::move(assigner));
  }

  stream_environment& environment() const { return *env_; }
  snapflow::keyed_stream raw() const { return raw_; }
  const std::function<K(const T&)>& selector() const { return selector_; }

 private:
  stream_environment* env_;
  snapflow::keyed_stream raw_;
  std::function<K(const T&)> selector_;
};

}  // namespace snapflow::api
