#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>

namespace snapflow {

// The keyed state of one key group: per named state, per key, a value (value state) or a map
// of entries (map state). Values and map entries are bytes; what they mean is the operator's
// (built-in operators store int64s as int64_state_value.hpp encodes them).
struct key_group_state {
  std::map<std::string, std::unordered_map<std::uint64_t, std::string>, std::less<>> values;
  std::map<std::string, std::unordered_map<std::uint64_t, std::map<std::string, std::string>>,
           std::less<>>
      maps;

  bool empty() const { return values.empty() && maps.empty(); }
  bool operator==(const key_group_state&) const = default;
};

// A point-in-time copy of a backend's key groups (only the non-empty ones), whichever backend
// held them: what state files hold (engine/runtime/state_file.hpp) and what restore reads back.
// Being backend-neutral is what lets a checkpoint or savepoint taken with one backend be
// restored into another, and be split by key group at another parallelism.
struct keyed_state_snapshot {
  std::uint32_t max_parallelism = 0;
  std::map<std::uint32_t, key_group_state> key_groups;

  bool operator==(const keyed_state_snapshot&) const = default;
};

}  // namespace snapflow
