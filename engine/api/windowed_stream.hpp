#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "engine/api/codec.hpp"
#include "engine/api/collector.hpp"
#include "engine/api/data_stream.hpp"
#include "engine/api/keyed_process_context.hpp"
#include "engine/api/keyed_stream.hpp"
#include "engine/api/map_state.hpp"
#include "engine/api/processing_clock.hpp"
#include "engine/api/state_scope.hpp"
#include "engine/api/time_window.hpp"

namespace snapflow::api {

// One window's contents in keyed state: its end (the start is the map key) and the accumulator.
template <typename ACC>
struct window_slot {
  std::int64_t end = 0;
  ACC acc{};
  MSGPACK_DEFINE(end, acc);
};

// What a window operator produces: the windows' results, and the records that came too late for
// every window they belong to (Flink's sideOutputLateData), each a stream of its own.
// `window` is the window operator itself (its uid, its parallelism: set the two streams' to the
// same, they read it forward).
template <typename O, typename T>
struct window_output {
  data_stream<O> results;
  data_stream<T> late;
  snapflow::data_stream window;
};

// A keyed stream cut into event-time windows (Flink's WindowedStream) by assigner A
// (time_window.hpp). Window contents live in the key's state (a map state by window start), a
// window fires by an event-time timer at its max timestamp, and so both survive checkpoints,
// restores and rescales. A record whose windows all ended more than the allowed lateness before
// the watermark goes to the late stream; one within the lateness is added and its window fires
// again at once with the updated result. State of a window goes once the watermark passed its
// end plus the lateness. Results carry the window's max timestamp as event time.
template <typename K, typename T, typename A>
class windowed_stream {
 public:
  windowed_stream(keyed_stream<K, T> input, A assigner)
      : input_(std::move(input)), assigner_(std::move(assigner)) {}

  windowed_stream& allowed_lateness(std::chrono::milliseconds lateness) {
    if (lateness.count() < 0) throw std::invalid_argument("allowed lateness must not be negative");
    lateness_ms_ = lateness.count();
    return *this;
  }

  // Incremental aggregation: add: ACC(ACC, const T&); merge: ACC(ACC, ACC) (sessions merge
  // windows; unused otherwise); result: O(const K&, const time_window&, const ACC&).
  template <typename ACC, typename Add, typename Merge, typename Result>
  auto aggregate(ACC init, Add add, Merge merge, Result result, std::string name = "window") {
    using O = std::decay_t<std::invoke_result_t<Result&, const K&, const time_window&, const ACC&>>;
    auto emit = [result = std::move(result)](const K& key, const time_window& w, const ACC& acc,
                                              std::vector<O>& out) {
      out.push_back(result(key, w, acc));
    };
    return build<ACC, O>(std::move(init), std::move(add), std::move(merge), std::move(emit),
                         std::move(name));
  }

  // reduce: T(const T&, const T&); one result per window: the reduced value.
  template <typename R>
  window_output<T, T> reduce(R fn, std::string name = "window") {
    using ACC = std::vector<T>;  // empty or the running value
    auto add = [fn](ACC acc, const T& v) {
      if (acc.empty()) return ACC{v};
      return ACC{fn(acc.front(), v)};
    };
    auto merge = [fn](ACC a, ACC b) {
      if (a.empty()) return b;
      if (b.empty()) return a;
      return ACC{fn(a.front(), b.front())};
    };
    auto emit = [](const K&, const time_window&, const ACC& acc, std::vector<T>& out) {
      if (!acc.empty()) out.push_back(acc.front());
    };
    return build<ACC, T>(ACC{}, std::move(add), std::move(merge), std::move(emit),
                         std::move(name));
  }

  // fn: void(const K&, const time_window&, const std::vector<T>&, collector-like
  // std::vector<O>&): every element of the window at once (Flink's ProcessWindowFunction); the
  // window keeps them all in state.
  template <typename O, typename F>
  window_output<O, T> process(F fn, std::string name = "window") {
    using ACC = std::vector<T>;
    auto add = [](ACC acc, const T& v) {
      acc.push_back(v);
      return acc;
    };
    auto merge = [](ACC a, ACC b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    auto emit = [fn = std::move(fn)](const K& key, const time_window& w, const ACC& acc,
                                     std::vector<O>& out) { fn(key, w, acc, out); };
    return build<ACC, O>(ACC{}, std::move(add), std::move(merge), std::move(emit),
                         std::move(name));
  }

 private:
  // Late records leave the operator tagged in record.value (the payload still holds the T) and
  // are split from the results by two forward filters.
  static constexpr std::int64_t result_tag = 0;
  static constexpr std::int64_t late_tag = 1;

  template <typename ACC, typename O, typename Add, typename Merge, typename Emit>
  window_output<O, T> build(ACC init, Add add, Merge merge, Emit emit, std::string name) {
    struct shared_fns {
      A assigner;
      std::int64_t lateness;
      ACC init;
      Add add;
      Merge merge;
      Emit emit;
      std::string name;
    };
    auto fns = std::make_shared<const shared_fns>(
        shared_fns{assigner_, lateness_ms_, std::move(init), std::move(add), std::move(merge),
                   std::move(emit), name});
    const std::string state_name = "window/" + name;

    // Results of window `w` as records at its max timestamp.
    auto fire = [fns](const K& key, std::uint64_t key_hash, const time_window& w, const ACC& acc,
                      std::vector<record>& out) {
      std::vector<O> values;
      fns->emit(key, w, acc, values);
      for (const auto& v : values) {
        record r{key_hash, 0, result_tag, encode(v)};
        r.timestamp = w.max_timestamp();
        out.push_back(std::move(r));
      }
    };

    auto clock = processing_clock::system();
    auto select = input_.selector();
    process_function on_element = [fns, fire, state_name, select, clock](
                                      const record& input, keyed_context& state,
                                      std::vector<record>& out) {
      const T value = decode_payload<T>(input, fns->name);
      const K key = select(value);
      state_scope scope(state, encode(key), clock);
      keyed_process_context<K> ctx(key, scope, input);
      const std::int64_t ts = input.timestamp;
      if (ts == no_timestamp)
        throw decode_error("window '" + fns->name +
                           "' needs event time: assign timestamps and watermarks before it");
      const std::int64_t wm = ctx.current_watermark();
      auto windows = ctx.template get_map_state<std::int64_t, window_slot<ACC>>(state_name);
      bool accepted = false;
      auto keep = [&](const time_window& w, ACC acc) {
        windows.put(w.start, window_slot<ACC>{w.end, acc});
        if (fns->lateness > 0) ctx.register_event_time_timer(w.max_timestamp() + fns->lateness);
        // Late but within the allowed lateness: the window fired already, fires again now
        // (a timer at its end would fire it once more at the next watermark).
        if (w.max_timestamp() <= wm)
          fire(key, input.key, w, acc, out);
        else
          ctx.register_event_time_timer(w.max_timestamp());
      };
      if constexpr (A::merging) {
        std::vector<time_window> existing;
        std::vector<ACC> accs;
        for (auto& [start, slot] : windows.entries()) {
          existing.push_back({start, slot.end});
          accs.push_back(std::move(slot.acc));
        }
        std::vector<std::size_t> merged;
        const time_window w = merge_sessions(existing, fns->assigner.assign(ts).front(), merged);
        if (w.max_timestamp() + fns->lateness > wm) {
          accepted = true;
          ACC acc = fns->add(fns->init, value);
          for (std::size_t i : merged) {
            acc = fns->merge(std::move(acc), std::move(accs[i]));
            windows.remove(existing[i].start);
          }
          keep(w, std::move(acc));
        }
      } else {
        for (const time_window& w : fns->assigner.assign(ts)) {
          if (w.max_timestamp() + fns->lateness <= wm) continue;  // late for this one
          accepted = true;
          auto slot = windows.get(w.start);
          keep(w, fns->add(slot ? std::move(slot->acc) : fns->init, value));
        }
      }
      if (!accepted) {
        record late = input;
        late.value = late_tag;
        out.push_back(std::move(late));
      }
    };

    timer_function on_timer = [fns, fire, state_name, clock](const fired_timer& t,
                                                             keyed_context& state,
                                                             std::vector<record>& out) {
      const K key = decode_or_throw<K>(t.ns, "the key of a timer of window '" + fns->name + "'");
      state_scope scope(state, t.ns, clock);
      auto windows = map_state<std::int64_t, window_slot<ACC>>(scope, state_name);
      for (const auto& [start, slot] : windows.entries()) {
        const time_window w{start, slot.end};
        // A timer of a window merged away since finds nothing at its time.
        if (w.max_timestamp() == t.timestamp) fire(key, t.key, w, slot.acc, out);
        if (w.max_timestamp() + fns->lateness <= t.timestamp) windows.remove(start);
      }
    };

    auto raw = input_.raw().process(timed_process_function{std::move(on_element),
                                                           std::move(on_timer)},
                                    name);
    return window_output<O, T>{tagged<O>(raw, result_tag, name + "-results"),
                               tagged<T>(raw, late_tag, name + "-late"), raw};
  }

  // The records of `raw` tagged `tag`, read forward at its parallelism.
  template <typename V>
  data_stream<V> tagged(snapflow::data_stream raw, std::int64_t tag, std::string name) {
    stream_environment& env = input_.environment();
    auto kept = raw.filter(filter_function([tag](const record& r) { return r.value == tag; }),
                           std::move(name));
    follow_input(env, raw.id(), kept.id());
    return data_stream<V>(env, kept);
  }

  keyed_stream<K, T> input_;
  A assigner_;
  std::int64_t lateness_ms_ = 0;
};

}  // namespace snapflow::api
