#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/state_scope.hpp"

namespace snapflow::api {

// A map UK -> UV per user key (Flink's MapState): one backend entry per map entry, so a put
// touches that entry only. entries() is ordered by the msgpack bytes of the map keys (for
// unsigned integers below 128 and for strings of one length that is their natural order, not in
// general). With a ttl, each entry expires that long after its own last put.
template <typename UK, typename UV>
class map_state {
 public:
  map_state(state_scope& scope, std::string name,
            std::optional<std::chrono::milliseconds> ttl = std::nullopt)
      : scope_(scope), name_("map:" + name), ttl_(ttl) {}

  std::optional<UV> get(const UK& key) const {
    auto bytes = scope_.get(name_, encode(key));
    if (!bytes) return std::nullopt;
    return decode_or_throw<UV>(*bytes, [&] { return "map state '" + name_ + "' value"; });
  }
  bool contains(const UK& key) const { return scope_.get(name_, encode(key)).has_value(); }
  void put(const UK& key, const UV& value) { scope_.put(name_, encode(key), encode(value), ttl_); }
  void remove(const UK& key) { scope_.remove(name_, encode(key)); }

  std::vector<std::pair<UK, UV>> entries() const {
    std::vector<std::pair<UK, UV>> out;
    for (const auto& [k, v] : scope_.entries(name_))
      out.emplace_back(decode_or_throw<UK>(k, [&] { return "map state '" + name_ + "' key"; }),
                       decode_or_throw<UV>(v, [&] { return "map state '" + name_ + "' value"; }));
    return out;
  }
  bool empty() const { return scope_.entries(name_).empty(); }
  void clear() { scope_.clear(name_); }

 private:
  state_scope& scope_;
  std::string name_;
  std::optional<std::chrono::milliseconds> ttl_;
};

}  // namespace snapflow::api
