#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/collector.hpp"
#include "engine/api/data_stream.hpp"
#include "engine/api/input_tag.hpp"
#include "graph/stream_environment.hpp"

namespace snapflow::api {

template <typename K, typename A, typename B>
class keyed_connected_streams;

// Two streams of different types, A and B, into one operator with a function for each (Flink's
// ConnectedStreams with a CoMap / CoFlatMap; key_by() leads to a keyed co-process). Each side
// first passes an operator that tags its records (input_tag.hpp), where that side runs; the
// two-input operator reads both through edges into the same vertex and dispatches by tag.
template <typename A, typename B>
class connected_streams {
 public:
  connected_streams(stream_environment& env, snapflow::data_stream first,
                    snapflow::data_stream second)
      : env_(&env), first_(first), second_(second) {}

  // fa: void(const A&, collector<O>&), fb: void(const B&, collector<O>&).
  template <typename O, typename FA, typename FB>
  data_stream<O> flat_map(FA fa, FB fb, std::string name = "co_flat_map") {
    flat_map_function raw_fn = [fa = std::move(fa), fb = std::move(fb), name](
                                   const record& r, std::vector<record>& out) {
      const tagged_record t = untag(r, name);
      collector<O> c(out, t.inner);
      if (t.side == input_side::first)
        fa(decode_payload<A>(t.inner, name), c);
      else
        fb(decode_payload<B>(t.inner, name), c);
    };
    auto op = tagged(first_, input_side::first, name, {}).flat_map(std::move(raw_fn), name);
    env_->graph().add_edge(tagged(second_, input_side::second, name, {}).id(), op.id(), {});
    return data_stream<O>(*env_, op);
  }

  // fa: O(const A&), fb: O(const B&).
  template <typename O, typename FA, typename FB>
  data_stream<O> map(FA fa, FB fb, std::string name = "co_map") {
    return flat_map<O>([fa = std::move(fa)](const A& a, collector<O>& out) { out.collect(fa(a)); },
                       [fb = std::move(fb)](const B& b, collector<O>& out) { out.collect(fb(b)); },
                       std::move(name));
  }

  // Both sides partitioned by one key type K (Flink's connect(...).keyBy(...)): a key of A and
  // a key of B that are equal meet in the same subtask and share the same keyed state.
  template <typename FA, typename FB>
  auto key_by(FA key_a, FB key_b) {
    using K = std::decay_t<std::invoke_result_t<FA&, const A&>>;
    static_assert(std::is_same_v<K, std::decay_t<std::invoke_result_t<FB&, const B&>>>,
                  "both key selectors must return the same key type");
    return keyed_connected_streams<K, A, B>(*this, std::function<K(const A&)>(std::move(key_a)),
                                            std::function<K(const B&)>(std::move(key_b)));
  }

 private:
  template <typename K, typename, typename>
  friend class keyed_connected_streams;

  // `input` with its records tagged as `side`; with `rekey`, record.key also becomes the hash of
  // the record's key.
  snapflow::data_stream tagged(snapflow::data_stream input, input_side side,
                               const std::string& name,
                               std::function<std::uint64_t(const record&)> rekey) {
    map_function add_tag = [side, rekey](const record& r) {
      record out = tag_record(r, side);
      if (rekey) out.key = rekey(r);
      return out;
    };
    const std::string tag_name = name + (side == input_side::first ? "/tag-1" : "/tag-2");
    auto out = input.forward().map(std::move(add_tag), tag_name);
    follow_input(*env_, input.id(), out.id());
    return out;
  }

  stream_environment* env_;
  snapflow::data_stream first_;
  snapflow::data_stream second_;
};

}  // namespace snapflow::api

#include "engine/api/keyed_connected_streams.hpp"
