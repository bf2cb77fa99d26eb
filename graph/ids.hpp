#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace snapflow {

using vertex_id = std::uint32_t;
using checkpoint_id = std::int64_t;
using job_id = std::string;

// One parallel instance of a job vertex.
struct subtask_id {
  vertex_id vertex = 0;
  std::uint32_t index = 0;

  auto operator<=>(const subtask_id&) const = default;
};

// One deployment of a subtask. The attempt number grows on every restart, so messages from an
// earlier deployment can be told apart and ignored.
struct execution_attempt_id {
  subtask_id subtask;
  std::uint32_t attempt = 0;

  auto operator<=>(const execution_attempt_id&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const subtask_id& s) {
  return os << "v" << s.vertex << "#" << s.index;
}
inline std::ostream& operator<<(std::ostream& os, const execution_attempt_id& a) {
  return os << a.subtask << "@" << a.attempt;
}

}  // namespace snapflow

template <>
struct std::hash<snapflow::subtask_id> {
  std::size_t operator()(const snapflow::subtask_id& s) const noexcept {
    return (static_cast<std::size_t>(s.vertex) << 32) ^ s.index;
  }
};

template <>
struct std::hash<snapflow::execution_attempt_id> {
  std::size_t operator()(const snapflow::execution_attempt_id& a) const noexcept {
    std::size_t h = std::hash<snapflow::subtask_id>{}(a.subtask);
    return h ^ (static_cast<std::size_t>(a.attempt) * 0x9e3779b97f4a7c15ULL);
  }
};
