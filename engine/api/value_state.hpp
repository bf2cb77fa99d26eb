#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "engine/api/codec.hpp"
#include "engine/api/state_scope.hpp"

namespace snapflow::api {

// One V per user key (Flink's ValueState). With a ttl, a value expires that long after its
// last update and then reads as absent.
template <typename V>
class value_state {
 public:
  value_state(state_scope& scope, std::string name,
              std::optional<std::chrono::milliseconds> ttl = std::nullopt)
      : scope_(scope), name_("value:" + name), ttl_(ttl) {}

  std::optional<V> value() const {
    auto bytes = scope_.get(name_, {});
    if (!bytes) return std::nullopt;
    return decode_or_throw<V>(*bytes, [&] { return "value state '" + name_ + "'"; });
  }
  V value_or(V fallback) const { return value().value_or(std::move(fallback)); }
  void update(const V& v) { scope_.put(name_, {}, encode(v), ttl_); }
  void clear() { scope_.remove(name_, {}); }

 private:
  state_scope& scope_;
  std::string name_;
  std::optional<std::chrono::milliseconds> ttl_;
};

}  // namespace snapflow::api
