#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/state_scope.hpp"

namespace snapflow::api {

// A list of V per user key (Flink's ListState). Stored as one entry (the msgpack array of the
// elements), so add() rewrites the list: meant for short lists. The ttl applies to the list as
// a whole and restarts with every write (not per element, as in Flink).
template <typename V>
class list_state {
 public:
  list_state(state_scope& scope, std::string name,
             std::optional<std::chrono::milliseconds> ttl = std::nullopt)
      : scope_(scope), name_("list:" + name), ttl_(ttl) {}

  // Empty when the key has no list (or it expired).
  std::vector<V> get() const {
    auto bytes = scope_.get(name_, {});
    if (!bytes) return {};
    return decode_or_throw<std::vector<V>>(*bytes, [&] { return "list state '" + name_ + "'"; });
  }
  void add(const V& v) {
    auto items = get();
    items.push_back(v);
    update(items);
  }
  void add_all(const std::vector<V>& vs) {
    auto items = get();
    items.insert(items.end(), vs.begin(), vs.end());
    update(items);
  }
  // Replaces the list; an empty one clears it.
  void update(const std::vector<V>& items) {
    if (items.empty()) return clear();
    scope_.put(name_, {}, encode(items), ttl_);
  }
  void clear() { scope_.remove(name_, {}); }

 private:
  state_scope& scope_;
  std::string name_;
  std::optional<std::chrono::milliseconds> ttl_;
};

}  // namespace snapflow::api
