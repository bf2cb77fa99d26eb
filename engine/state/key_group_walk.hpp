#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/state/keyed_state_snapshot.hpp"

namespace snapflow {

// What a walk over one key group's state calls, in the order of the state file format
// (engine/runtime/state_file.hpp): the number of value states, then each with its name, key
// count and entries; then the number of map states, each with its name, key count, and per key
// its entry count and entries. Counts are exact. A backend's walk visits no state without keys
// and no key without map entries; a walk over the neutral form visits what that form holds.
class key_group_visitor {
 public:
  virtual ~key_group_visitor() = default;
  virtual void value_states(std::size_t states) = 0;
  virtual void value_state(std::string_view name, std::size_t keys) = 0;
  virtual void value(std::uint64_t key, std::string_view bytes) = 0;
  virtual void map_states(std::size_t states) = 0;
  virtual void map_state(std::string_view name, std::size_t keys) = 0;
  virtual void map_key(std::uint64_t key, std::size_t entries) = 0;
  virtual void map_entry(std::string_view map_key, std::string_view bytes) = 0;
};

// One key group's state as its holder walks it in place: a backend's own tables, so a sink that
// writes as it is walked (a state file) needs no copy of them in the neutral form.
class key_group_walk {
 public:
  virtual ~key_group_walk() = default;
  virtual void walk(key_group_visitor& visitor) const = 0;
};

// The walk over a key group already in the neutral form.
class neutral_key_group_walk final : public key_group_walk {
 public:
  explicit neutral_key_group_walk(const key_group_state& state) : state_(state) {}
  void walk(key_group_visitor& visitor) const override;

 private:
  const key_group_state& state_;
};

// The neutral form of what a walk visits.
key_group_state collect_key_group(const key_group_walk& walk);

}  // namespace snapflow
