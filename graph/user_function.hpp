#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "graph/record.hpp"

namespace snapflow {

// Keyed state as a user's process function sees it: scoped to the current record's key.
// Two levels: int64 values (what the built-in aggregations use) and the bytes the state backend
// stores, on which typed state (engine/api) serialises its own values. Value state and map state
// of one name are separate; clear() removes the value state only.
class keyed_context {
 public:
  virtual ~keyed_context() = default;
  virtual std::optional<std::int64_t> value(std::string_view state) const = 0;
  virtual void set_value(std::string_view state, std::int64_t v) = 0;
  virtual void clear(std::string_view state) = 0;

  virtual std::optional<std::string> value_bytes(std::string_view state) const = 0;
  virtual void set_value_bytes(std::string_view state, std::string_view bytes) = 0;
  virtual std::optional<std::string> map_get_bytes(std::string_view state,
                                                   std::string_view map_key) const = 0;
  virtual void map_put_bytes(std::string_view state, std::string_view map_key,
                             std::string_view bytes) = 0;
  virtual void map_remove(std::string_view state, std::string_view map_key) = 0;
  // The current key's entries of map state `state`, ordered by map key (bytewise).
  virtual std::vector<std::pair<std::string, std::string>> map_entries_bytes(
      std::string_view state) const = 0;
};

using map_function = std::function<record(const record&)>;
using filter_function = std::function<bool(const record&)>;
using flat_map_function = std::function<void(const record&, std::vector<record>& out)>;
using key_function = std::function<std::uint64_t(const record&)>;
using process_function =
    std::function<void(const record&, keyed_context& state, std::vector<record>& out)>;

// A C++ callable attached to a vertex. It lives only in the process that declared it (or in a
// custom worker binary that registers the same code under the vertex's uid): job files and the
// msgpack form of a job graph name operators by registered kind instead.
using user_function =
    std::variant<map_function, filter_function, flat_map_function, key_function, process_function>;

}  // namespace snapflow
