#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "graph/record.hpp"

namespace snapflow {

// Keyed state as a user's process function sees it: scoped to the current record's key.
class keyed_context {
 public:
  virtual ~keyed_context() = default;
  virtual std::optional<std::int64_t> value(std::string_view state) const = 0;
  virtual void set_value(std::string_view state, std::int64_t v) = 0;
  virtual void clear(std::string_view state) = 0;
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
