#pragma once

#include <cstdint>
#include <ostream>
#include <variant>
#include <vector>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/time/watermark.hpp"
#include "graph/ids.hpp"
#include "graph/record.hpp"

namespace snapflow {

// Flows in-band with the records (Flink's CheckpointBarrier): everything a subtask received
// before it belongs to checkpoint `id`, everything after it to later checkpoints.
struct checkpoint_barrier {
  checkpoint_id id = 0;
  std::int64_t timestamp_us = 0;
  checkpoint_options options;

  bool operator==(const checkpoint_barrier&) const = default;
};

// The producer will send nothing more on this channel. Sent once, last.
struct end_of_input {
  bool operator==(const end_of_input&) const = default;
};

// Watermarks (engine/time/watermark.hpp) travel in the batches of records, in their order.
using stream_element = std::variant<record, checkpoint_barrier, end_of_input, watermark>;

// Channels move elements in batches: one lock, one wakeup and (for a network transport) one
// frame per batch instead of per record.
using element_batch = std::vector<stream_element>;

inline std::ostream& operator<<(std::ostream& os, const checkpoint_barrier& b) {
  return os << "checkpoint_barrier{id=" << b.id << ", ts=" << b.timestamp_us
            << ", exactly_once=" << b.options.exactly_once
            << ", location=" << b.options.target_location << "}";
}

inline std::ostream& operator<<(std::ostream& os, const end_of_input&) {
  return os << "end_of_input";
}

inline std::ostream& operator<<(std::ostream& os, const stream_element& e) {
  std::visit([&os](const auto& v) { os << v; }, e);
  return os;
}

}  // namespace snapflow
