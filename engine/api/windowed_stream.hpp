#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
// (time_window.hpp). Window contents live in the key's state (a map state by slice start for
// tumbling and sliding windows, by session start for sessions), a window fires by an event-time
// timer at its max timestamp, and so both survive checkpoints,
// restores and rescales. A record whose windows all ended more than the allowed lateness before
// the watermark goes to the late stream, as does one too close to the int64 limits for its
// windows' arithmetic (window_detail::reach_for); one within the lateness is added and its window
// fires again at once with the updated result. State of a window goes once the watermark passed
// its end plus the lateness (a slice's, once it passed the last window the slice is in). Results
// carry the window's max timestamp as event time.
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

  // Incremental aggregation: add: ACC(ACC, const T&); merge: ACC(ACC, ACC), which must give
  // what adding both accumulators' elements to one would (sessions merge windows with it, and
  // tumbling and sliding windows combine a window's slices); result: O(const K&,
  // const time_window&, const ACC&).
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
    return build<ACC, T>(ACC{}, std::move(add), std::move(merge), std::move(emit), std::move(name));
  }

  // fn: void(const K&, const time_window&, const std::vector<T>&, collector-like
  // std::vector<O>&): every element of the window at once (Flink's ProcessWindowFunction); the
  // window keeps them all in state. They come in arrival order within a slide of the window
  // (time_window.hpp's window_slicing), the slides in time order.
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
    return build<ACC, O>(ACC{}, std::move(add), std::move(merge), std::move(emit), std::move(name));
  }

 private:
  // Late records leave the operator tagged in record.value (the payload still holds the T) and
  // are split from the results by two forward filters.
  static constexpr std::int64_t result_tag = 0;
  static constexpr std::int64_t late_tag = 1;

  // What the operator's callables share: the user's functions and the operator's settings.
  template <typename ACC, typename Add, typename Merge, typename Emit>
  struct window_functions {
    using acc_type = ACC;
    A assigner;
    std::int64_t lateness;
    std::int64_t reach;  // window_detail::reach_for: elements closer to the int64 limits are late
    ACC init;
    Add add;
    Merge merge;
    Emit emit;
    std::string name;
    std::string state_name;
    std::function<K(const T&)> select;
    std::shared_ptr<const processing_clock> clock;

    // Results of window `w` as records at its max timestamp.
    template <typename O>
    void fire(const K& key, std::uint64_t key_hash, const time_window& w, const ACC& acc,
              std::vector<record>& out) const {
      std::vector<O> values;
      emit(key, w, acc, values);
      for (const auto& v : values) {
        record r{key_hash, 0, result_tag, encode(v)};
        r.timestamp = w.max_timestamp();
        out.push_back(std::move(r));
      }
    }
  };

  template <typename ACC, typename O, typename Add, typename Merge, typename Emit>
  window_output<O, T> build(ACC init, Add add, Merge merge, Emit emit, std::string name) {
    using fns_type = window_functions<ACC, Add, Merge, Emit>;
    auto fns = std::make_shared<const fns_type>(fns_type{
        assigner_, lateness_ms_, window_detail::reach_for(assigner_.reach_ms(), lateness_ms_),
        std::move(init), std::move(add), std::move(merge), std::move(emit), name, "window/" + name,
        input_.selector(), processing_clock::system()});
    timed_process_function fn;
    if constexpr (A::merging)
      fn = merging_operator<O>(fns);
    else
      fn = sliced_operator<O>(fns);
    auto raw = input_.raw().process(std::move(fn), name);
    return window_output<O, T>{tagged<O>(raw, result_tag, name + "-results"),
                               tagged<T>(raw, late_tag, name + "-late"), raw};
  }

  // The input's value, key and timestamp: what both operators start with.
  struct element {
    T value;
    K key;
    std::int64_t timestamp;
  };
  template <typename F>
  static element read_element(const F& fns, const record& input) {
    element e{decode_payload<T>(input, fns.name), K{}, input.timestamp};
    e.key = fns.select(e.value);
    if (e.timestamp == no_timestamp)
      throw decode_error("window '" + fns.name +
                         "' needs event time: assign timestamps and watermarks before it");
    return e;
  }
  // An element too close to the int64 limits has no window the operator can compute: it goes
  // to the late stream, as one whose windows are all past.
  template <typename F>
  static bool beyond_limits(const F& fns, const element& e) {
    return !window_detail::within_limits(e.timestamp, fns.reach);
  }
  static void emit_late(const record& input, std::vector<record>& out) {
    record late = input;
    late.value = late_tag;
    out.push_back(std::move(late));
  }

  // Tumbling and sliding windows (A::slicing()): the key's state holds one accumulator per
  // slice (a map state by slice start), so an element costs one read and one write however
  // many windows it is in. A slice's first element registers the timer of its first window
  // still to fire; a window fires by its timer with its slices merged in time order and
  // registers the next window's timer if that holds a slice, and a slice goes once the last
  // window it is in passed its lateness.
  template <typename O, typename F>
  static timed_process_function sliced_operator(std::shared_ptr<const F> fns) {
    const window_slicing slicing = fns->assigner.slicing();
    auto on_element = [fns, slicing](const record& input, keyed_context& state,
                                     std::vector<record>& out) {
      const auto e = read_element(*fns, input);
      if (beyond_limits(*fns, e)) return emit_late(input, out);
      state_scope scope(state, encode(e.key), fns->clock);
      keyed_process_context<K> ctx(e.key, scope, input);
      const std::int64_t wm = ctx.current_watermark();
      const std::int64_t slice = slicing.slice_start(e.timestamp);
      const std::vector<time_window> windows = slicing.windows_of(slice);
      // In no window (a gap between sliding windows), or too late for the last one.
      if (windows.empty() || windows.front().max_timestamp() + fns->lateness <= wm)
        return emit_late(input, out);
      map_state<std::int64_t, typename F::acc_type> slices(scope, fns->state_name);
      auto acc = slices.get(slice);
      const bool fresh = !acc;
      slices.put(slice, fns->add(fresh ? fns->init : std::move(*acc), e.value));
      if (fresh && fns->lateness > 0)
        ctx.register_event_time_timer(windows.front().max_timestamp() + fns->lateness);
      std::optional<std::int64_t> first_pending;
      for (const time_window& w : windows) {                 // the latest first
        if (w.max_timestamp() + fns->lateness <= wm) break;  // and every earlier one
        // Late but within the allowed lateness: the window fired already, fires again now.
        if (w.max_timestamp() <= wm)
          fire_sliced<O>(*fns, e.key, input.key, w, slices_of(slices), out);
        else
          first_pending = w.max_timestamp();
      }
      // One timer per new slice: its first window still to fire. Each window's timer registers
      // the next window's when that one holds a slice, so every window of the slice fires.
      if (fresh && first_pending) ctx.register_event_time_timer(*first_pending);
    };
    auto on_timer = [fns, slicing](const fired_timer& t, keyed_context& state,
                                   std::vector<record>& out) {
      const K key = decode_or_throw<K>(
          t.ns, [&] { return "the key of a timer of window '" + fns->name + "'"; });
      state_scope scope(state, t.ns, fns->clock);
      map_state<std::int64_t, typename F::acc_type> slices(scope, fns->state_name);
      auto kept = slices_of(slices);
      // A timer at a window's end fires it; one at a slice's expiry (lateness) may be both.
      if (const auto w = slicing.window_ending_at(t.timestamp)) {
        fire_sliced<O>(*fns, key, t.key, *w, kept, out);
        const time_window next{w->start + slicing.slide, w->end + slicing.slide};
        const bool next_holds_a_slice = std::any_of(kept.begin(), kept.end(), [&](const auto& k) {
          return k.first >= next.start && k.first < next.end;
        });
        if (next_holds_a_slice)
          state.register_event_time_timer(next.max_timestamp(), scope.encoded_key());
      }
      for (const auto& [start, _] : kept)
        if (slicing.last_max_timestamp(start) + fns->lateness <= t.timestamp) slices.remove(start);
    };
    return timed_process_function{std::move(on_element), std::move(on_timer)};
  }

  // The key's slices in time order (the map state orders by bytes, which is not time order for
  // negative starts).
  template <typename S>
  static auto slices_of(const S& slices) {
    auto kept = slices.entries();
    std::sort(kept.begin(), kept.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return kept;
  }

  // Fires window `w` with its slices of `kept` (time order) merged, if it holds any.
  template <typename O, typename F, typename Slices>
  static void fire_sliced(const F& fns, const K& key, std::uint64_t key_hash, const time_window& w,
                          const Slices& kept, std::vector<record>& out) {
    std::optional<typename F::acc_type> acc;
    for (const auto& [start, slice_acc] : kept) {
      if (start < w.start || start >= w.end) continue;
      acc = acc ? fns.merge(std::move(*acc), slice_acc) : slice_acc;
    }
    if (acc) fns.template fire<O>(key, key_hash, w, *acc, out);
  }

  // Session windows: the key's state holds each open session (a map state by its start, with
  // its end), an element's window merges with the sessions it touches, and a session fires by a
  // timer at its max timestamp (a timer of a session merged away since finds nothing there).
  template <typename O, typename F>
  static timed_process_function merging_operator(std::shared_ptr<const F> fns) {
    using ACC = typename F::acc_type;
    auto on_element = [fns](const record& input, keyed_context& state, std::vector<record>& out) {
      const auto e = read_element(*fns, input);
      if (beyond_limits(*fns, e)) return emit_late(input, out);
      state_scope scope(state, encode(e.key), fns->clock);
      keyed_process_context<K> ctx(e.key, scope, input);
      const std::int64_t wm = ctx.current_watermark();
      map_state<std::int64_t, window_slot<ACC>> windows(scope, fns->state_name);
      std::vector<time_window> existing;
      std::vector<ACC> accs;
      for (auto& [start, slot] : windows.entries()) {
        existing.push_back({start, slot.end});
        accs.push_back(std::move(slot.acc));
      }
      std::vector<std::size_t> merged;
      const time_window w =
          merge_sessions(existing, fns->assigner.assign(e.timestamp).front(), merged);
      if (w.max_timestamp() + fns->lateness <= wm) return emit_late(input, out);
      ACC acc = fns->add(fns->init, e.value);
      for (std::size_t i : merged) {
        acc = fns->merge(std::move(acc), std::move(accs[i]));
        windows.remove(existing[i].start);
      }
      windows.put(w.start, window_slot<ACC>{w.end, acc});
      if (fns->lateness > 0) ctx.register_event_time_timer(w.max_timestamp() + fns->lateness);
      // Late but within the allowed lateness: the session fired already, fires again now (a
      // timer at its end would fire it once more at the next watermark).
      if (w.max_timestamp() <= wm)
        fns->template fire<O>(e.key, input.key, w, acc, out);
      else
        ctx.register_event_time_timer(w.max_timestamp());
    };
    auto on_timer = [fns](const fired_timer& t, keyed_context& state, std::vector<record>& out) {
      const K key = decode_or_throw<K>(
          t.ns, [&] { return "the key of a timer of window '" + fns->name + "'"; });
      state_scope scope(state, t.ns, fns->clock);
      map_state<std::int64_t, window_slot<ACC>> windows(scope, fns->state_name);
      for (const auto& [start, slot] : windows.entries()) {
        const time_window w{start, slot.end};
        if (w.max_timestamp() == t.timestamp) fns->template fire<O>(key, t.key, w, slot.acc, out);
        if (w.max_timestamp() + fns->lateness <= t.timestamp) windows.remove(start);
      }
    };
    return timed_process_function{std::move(on_element), std::move(on_timer)};
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
