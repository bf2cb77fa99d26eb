#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/collector.hpp"
#include "engine/api/connected_streams.hpp"
#include "engine/api/input_tag.hpp"
#include "engine/api/key_hash.hpp"
#include "engine/api/keyed_process_context.hpp"
#include "engine/api/processing_clock.hpp"
#include "engine/api/state_scope.hpp"

namespace snapflow::api {

// Two connected streams keyed by one key type K, into a keyed co-process function (Flink's
// KeyedCoProcessFunction): both functions see the keyed state of the record's key. Each side's
// tagging operator also sets record.key to the key's hash, and both edges into the co-process
// are hash-partitioned.
template <typename K, typename A, typename B>
class keyed_connected_streams {
 public:
  keyed_connected_streams(connected_streams<A, B> inputs, std::function<K(const A&)> key_a,
                          std::function<K(const B&)> key_b)
      : inputs_(std::move(inputs)), key_a_(std::move(key_a)), key_b_(std::move(key_b)) {}

  // fa: void(const A&, keyed_process_context<K>&, collector<O>&), fb likewise for B.
  template <typename O, typename FA, typename FB>
  data_stream<O> process(FA fa, FB fb, std::string name = "co_process",
                         std::shared_ptr<const processing_clock> clock =
                             processing_clock::system()) {
    process_function raw_fn = [fa = std::move(fa), fb = std::move(fb), ka = key_a_, kb = key_b_,
                               clock, name](const record& r, keyed_context& state,
                                            std::vector<record>& out) {
      const tagged_record t = untag(r, name);
      if (t.side == input_side::first)
        run<O>(fa, decode_payload<A>(t.inner, name), ka, state, clock, t.inner, out);
      else
        run<O>(fb, decode_payload<B>(t.inner, name), kb, state, clock, t.inner, out);
    };
    auto first = inputs_.tagged(inputs_.first_, input_side::first, name, rekey<A>(key_a_, name));
    auto second =
        inputs_.tagged(inputs_.second_, input_side::second, name, rekey<B>(key_b_, name));
    auto op = first.key_by().process(std::move(raw_fn), name);
    inputs_.env_->graph().add_edge(second.id(), op.id(), partitioning::hash);
    return data_stream<O>(*inputs_.env_, op);
  }

 private:
  template <typename V>
  static std::function<std::uint64_t(const record&)> rekey(std::function<K(const V&)> key,
                                                           std::string name) {
    return [key = std::move(key), name](const record& r) {
      return hash_of_key(key(decode_payload<V>(r, name)));
    };
  }

  template <typename O, typename F, typename V>
  static void run(const F& fn, const V& value, const std::function<K(const V&)>& key_of,
                  keyed_context& state, const std::shared_ptr<const processing_clock>& clock,
                  const record& input, std::vector<record>& out) {
    const K key = key_of(value);
    state_scope scope(state, encode(key), clock);
    keyed_process_context<K> context(key, scope, input);
    collector<O> c(out, input);
    fn(value, context, c);
  }

  connected_streams<A, B> inputs_;
  std::function<K(const A&)> key_a_;
  std::function<K(const B&)> key_b_;
};

}  // namespace snapflow::api
