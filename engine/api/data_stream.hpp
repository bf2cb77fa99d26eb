#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/collector.hpp"
#include "engine/api/key_hash.hpp"
#include "engine/api/operator_list_state.hpp"
#include "graph/stream_environment.hpp"

namespace snapflow::api {

template <typename K, typename T>
class keyed_stream;
template <typename A, typename B>
class connected_streams;

// `next` takes `input`'s parallelism and max parallelism, so the edge between them is forward:
// the operators the typed layer adds beside the user's (a sequence's generator, connect's tags)
// keep their input's order and cost no shuffle.
inline void follow_input(stream_environment& env, vertex_id input, vertex_id next) {
  const stream_node& from = env.graph().node(input);
  stream_node& to = env.graph().node(next);
  to.parallelism = from.parallelism;
  to.max_parallelism = from.max_parallelism;
}

// A stream of T (Flink's DataStream<T>): records whose payload holds one msgpack-encoded T.
// A handle on one declared operator, cheap to copy; the stream_environment owns the graph and
// must outlive it. Each operation adds a user_* operator whose callable decodes the input
// payload (a payload that is not a T fails the task with a decode error naming the operator),
// calls the user's function and encodes what it returns.
template <typename T>
class data_stream {
 public:
  using value_type = T;

  data_stream(stream_environment& env, snapflow::data_stream raw) : env_(&env), raw_(raw) {}

  snapflow::data_stream raw() const { return raw_; }
  stream_environment& environment() const { return *env_; }

  // fn: O(const T&). The output record keeps the input's key, seq and value.
  template <typename F>
  auto map(F fn, std::string name = "map") {
    using O = std::decay_t<std::invoke_result_t<F&, const T&>>;
    map_function raw_fn = [fn = std::move(fn), name](const record& r) {
      return record{r.key, r.seq, r.value, encode(fn(decode_payload<T>(r, name)))};
    };
    return data_stream<O>(*env_, copy().map(std::move(raw_fn), name));
  }

  data_stream<T> filter(std::function<bool(const T&)> fn, std::string name = "filter") {
    filter_function raw_fn = [fn = std::move(fn), name](const record& r) {
      return fn(decode_payload<T>(r, name));
    };
    return data_stream<T>(*env_, copy().filter(std::move(raw_fn), name));
  }

  // fn: void(const T&, collector<O>&), any number of outputs per input.
  template <typename O, typename F>
  data_stream<O> flat_map(F fn, std::string name = "flat_map") {
    flat_map_function raw_fn = [fn = std::move(fn), name](const record& r,
                                                         std::vector<record>& out) {
      collector<O> c(out, r);
      fn(decode_payload<T>(r, name), c);
    };
    return data_stream<O>(*env_, copy().flat_map(std::move(raw_fn), name));
  }

  // A non-keyed process function with operator list state (Flink's ProcessFunction with
  // CheckpointedFunction): fn: void(const T&, process_context&, collector<O>&). The lists are
  // checkpointed and redistributed on restore by their mode (docs/api.md, "Operator state").
  template <typename O, typename F>
  data_stream<O> process(F fn, std::string name = "process") {
    return process<O>(std::move(fn), nullptr, std::move(name));
  }
  // The same with on_end: void(process_context&, collector<O>&), called once when every input
  // ended (to emit what the state still holds). Its outputs carry key 0 and seq 0.
  template <typename O, typename F>
  data_stream<O> process(F fn, std::function<void(process_context&, collector<O>&)> on_end,
                         std::string name) {
    stateful_process_function raw_fn;
    raw_fn.process = [fn = std::move(fn), name](const record& r, operator_state_context& state,
                                                std::vector<record>& out) {
      process_context ctx(state);
      collector<O> c(out, r);
      fn(decode_payload<T>(r, name), ctx, c);
    };
    if (on_end)
      raw_fn.end_input = [on_end = std::move(on_end)](operator_state_context& state,
                                                      std::vector<record>& out) {
        const record none{};
        process_context ctx(state);
        collector<O> c(out, none);
        on_end(ctx, c);
      };
    return data_stream<O>(*env_, copy().process(std::move(raw_fn), name));
  }

  // selector: K(const T&). record.key becomes key_hash(encode(K)); the keyed operator after it
  // reads a hash-partitioned edge.
  template <typename F>
  auto key_by(F selector, std::string name = "key_by") {
    using K = std::decay_t<std::invoke_result_t<F&, const T&>>;
    std::function<K(const T&)> select = std::move(selector);
    key_function raw_fn = [select, name](const record& r) {
      return hash_of_key(select(decode_payload<T>(r, name)));
    };
    return keyed_stream<K, T>(*env_, copy().key_by(std::move(raw_fn), name), select);
  }

  // This stream and `others` into one operator (Flink's union): every record of each, in no
  // particular order between them.
  data_stream<T> union_with(const std::vector<data_stream<T>>& others,
                            std::string name = "union") {
    auto merged = copy().map(map_function([](const record& r) { return r; }), std::move(name));
    for (const auto& other : others) env_->graph().add_edge(other.raw_.id(), merged.id(), {});
    return data_stream<T>(*env_, merged);
  }

  // Two streams of different types into one two-input operator (Flink's connect).
  template <typename U>
  connected_streams<T, U> connect(const data_stream<U>& other) const {
    return connected_streams<T, U>(*env_, raw_, other.raw());
  }

  // Calls fn for every value, in the sink's subtasks (at least once: values are replayed after
  // a restore). Returns the sink operator.
  snapflow::data_stream sink(std::function<void(const T&)> fn, std::string name = "sink") {
    filter_function consume = [fn = std::move(fn), name](const record& r) {
      fn(decode_payload<T>(r, name));
      return false;
    };
    return copy().filter(std::move(consume), name).add_sink("discard_sink");
  }

  // Event time from here on (Flink's assignTimestampsAndWatermarks with a bounded
  // out-of-orderness strategy and withIdleness): timestamp_fn: std::int64_t(const T&), the
  // event time in milliseconds. Watermarks trail the highest timestamp of each split of the
  // source by `max_out_of_orderness`; a split without a record for `idleness` (0: never) stops
  // holding them back. A record's split is its seq modulo the input's max parallelism (the
  // built-in sources' splits, source_splits.hpp); `split_of` says otherwise. The assigner runs
  // at its input's parallelism, forward, so it sees each source subtask's records in order.
  template <typename F>
  data_stream<T> assign_timestamps_and_watermarks(
      F timestamp_fn, std::chrono::milliseconds max_out_of_orderness,
      std::chrono::milliseconds idleness = std::chrono::milliseconds(0),
      std::function<std::uint32_t(const T&)> split_of = nullptr,
      std::string name = "timestamps_and_watermarks") {
    if (max_out_of_orderness.count() < 0 || idleness.count() < 0)
      throw std::invalid_argument("out-of-orderness and idleness must not be negative");
    const std::uint32_t declared = env_->graph().node(raw_.id()).max_parallelism;
    const std::uint32_t splits =
        std::max<std::uint32_t>(1, declared ? declared : env_->graph().default_max_parallelism);
    timestamp_assigner a;
    a.timestamp = [fn = std::move(timestamp_fn), name](const record& r) -> std::int64_t {
      return fn(decode_payload<T>(r, name));
    };
    a.max_out_of_orderness_ms = max_out_of_orderness.count();
    a.idle_ms = idleness.count();
    if (split_of)
      a.split = [split_of = std::move(split_of), name](const record& r) {
        return split_of(decode_payload<T>(r, name));
      };
    else
      a.split = [splits](const record& r) {
        const std::int64_t s = r.seq % static_cast<std::int64_t>(splits);
        return static_cast<std::uint32_t>(s < 0 ? s + splits : s);
      };
    auto assigned = copy().assign_timestamps(std::move(a), std::move(name));
    follow_input(*env_, raw_.id(), assigned.id());
    return data_stream<T>(*env_, assigned);
  }

  // Back to the runtime's fixed record (for the built-in sinks, exactly-once ones included).
  snapflow::data_stream to_records(std::function<record(const T&)> fn,
                                   std::string name = "to_records") {
    map_function raw_fn = [fn = std::move(fn), name](const record& r) {
      return fn(decode_payload<T>(r, name));
    };
    return copy().map(std::move(raw_fn), std::move(name));
  }

  data_stream& uid(std::string id) {
    raw_.uid(std::move(id));
    return *this;
  }
  data_stream& name(std::string n) {
    raw_.name(std::move(n));
    return *this;
  }
  data_stream& set_parallelism(std::uint32_t parallelism) {
    raw_.set_parallelism(parallelism);
    return *this;
  }
  data_stream& set_max_parallelism(std::uint32_t max_parallelism) {
    raw_.set_max_parallelism(max_parallelism);
    return *this;
  }

 private:
  snapflow::data_stream copy() const { return raw_; }

  stream_environment* env_;
  snapflow::data_stream raw_;
};

}  // namespace snapflow::api

#include "engine/api/connected_streams.hpp"
#include "engine/api/keyed_stream.hpp"
