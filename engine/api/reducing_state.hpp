#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "engine/api/codec.hpp"
#include "engine/api/state_scope.hpp"

namespace snapflow::api {

// One V per user key that add() folds new values into with `reduce` (Flink's ReducingState):
// add(v) stores v when there is nothing yet (or it expired), reduce(current, v) otherwise.
template <typename V>
class reducing_state {
 public:
  using reduce_function = std::function<V(const V& current, const V& added)>;

  reducing_state(state_scope& scope, std::string name, reduce_function reduce,
                 std::optional<std::chrono::milliseconds> ttl = std::nullopt)
      : scope_(scope), name_("reducing:" + name), reduce_(std::move(reduce)), ttl_(ttl) {}

  std::optional<V> get() const {
    auto bytes = scope_.get(name_, {});
    if (!bytes) return std::nullopt;
    return decode_or_throw<V>(*bytes, [&] { return "reducing state '" + name_ + "'"; });
  }
  void add(const V& v) {
    auto current = get();
    scope_.put(name_, {}, encode(current ? reduce_(*current, v) : v), ttl_);
  }
  void clear() { scope_.remove(name_, {}); }

 private:
  state_scope& scope_;
  std::string name_;
  reduce_function reduce_;
  std::optional<std::chrono::milliseconds> ttl_;
};

}  // namespace snapflow::api
