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

 private:
  stream_environment* env_;
  snapflow::keyed_stream raw_;
  std::function<K(const T&)> selector_;
};

}  // namespace snapflow::api
