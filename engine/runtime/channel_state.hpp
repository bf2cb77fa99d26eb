#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "graph/record.hpp"

namespace snapflow {

// Which end of a channel a subtask persisted.
enum class channel_side : std::uint8_t {
  input = 0,   // records it had received but not processed
  output = 1,  // records it had produced but not yet sent
};

inline std::string_view to_string(channel_side s) {
  return s == channel_side::input ? "input" : "output";
}

// Where an input channel of a subtask comes from: its incoming edge, by ordinal among the
// subtask's incoming edges in job edge order, and the producing subtask on it.
struct channel_address {
  std::uint32_t gate = 0;
  std::uint32_t channel = 0;

  bool operator==(const channel_address&) const = default;
  auto operator<=>(const channel_address&) const = default;
};

// The in-flight records of one channel at an unaligned checkpoint (Flink's channel state): what
// the barrier overtook there. They are persisted with the subtask's snapshot and replayed before
// any new input when the job restores from it.
struct persisted_channel {
  channel_side side = channel_side::input;
  std::uint32_t gate = 0;     // input: the subtask's input index; output: its output edge index
  std::uint32_t channel = 0;  // input: the producing subtask; output: the consuming subtask
  std::vector<record> records;

  bool operator==(const persisted_channel&) const = default;
};

}  // namespace snapflow
