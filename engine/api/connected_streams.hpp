#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/collector.hpp"
#include "engine/api/data_stream.hpp"
#include "graph/stream_environment.hpp"

namespace snapflow::api {

// Two streams of different types, A and B, into one operator with a function for each (Flink's
// ConnectedStreams with a CoMap / CoFlatMap). The runtime's operators have one logical input, so
// each side first passes an operator that puts a one-byte tag (0: A, 1: B) before the payload;
// the two-input operator reads both through edges into the same vertex and dispatches by tag.
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
      if (r.payload.empty() || (r.payload[0] != side_a && r.payload[0] != side_b))
        throw decode_error("record " + std::to_string(r.seq) + " entering '" + name +
                           "' carries no input tag");
      record inner{r.key, r.seq, r.value, r.payload.substr(1)};
      collector<O> c(out, inner);
      if (r.payload[0] == side_a)
        fa(decode_payload<A>(inner, name), c);
      else
        fb(decode_payload<B>(inner, name), c);
    };
    auto op = tagged(first_, side_a, name).flat_map(std::move(raw_fn), name);
    env_->graph().add_edge(tagged(second_, side_b, name).id(), op.id(), {});
    return data_stream<O>(*env_, op);
  }

  // fa: O(const A&), fb: O(const B&).
  template <typename O, typename FA, typename FB>
  data_stream<O> map(FA fa, FB fb, std::string name = "co_map") {
    return flat_map<O>([fa = std::move(fa)](const A& a, collector<O>& out) { out.collect(fa(a)); },
                       [fb = std::move(fb)](const B& b, collector<O>& out) { out.collect(fb(b)); },
                       std::move(name));
  }

 private:
  static constexpr char side_a = 0;
  static constexpr char side_b = 1;

  snapflow::data_stream tagged(snapflow::data_stream input, char tag, const std::string& name) {
    map_function add_tag = [tag](const record& r) {
      return record{r.key, r.seq, r.value, std::string(1, tag) + r.payload};
    };
    const std::string tag_name = name + (tag == side_a ? "/tag-1" : "/tag-2");
    auto out = input.forward().map(std::move(add_tag), tag_name);
    follow_input(*env_, input.id(), out.id());
    return out;
  }

  stream_environment* env_;
  snapflow::data_stream first_;
  snapflow::data_stream second_;
};

}  // namespace snapflow::api
