#pragma once

#include <cstdint>

#include "graph/job_graph.hpp"
#include "graph/record.hpp"

namespace snapflow {

// Picks the output channel of one edge a record goes to (Flink's StreamPartitioner). The
// channels of an edge are indexed by the target subtask; a forward edge has exactly one.
// Barriers and end-of-input never go through here: they go to every channel.
class partitioner {
 public:
  // select() returns this for a broadcast edge: the record goes to every channel.
  static constexpr std::uint32_t all_channels = 0xFFFFFFFFu;

  // `max_parallelism` is the target vertex's (its key groups); `subtask_index` is the producing
  // subtask's, which staggers where round robin starts so producers do not all hit channel 0.
  partitioner(partitioning kind, std::uint32_t num_channels, std::uint32_t max_parallelism,
              std::uint32_t subtask_index);

  std::uint32_t select(const record& r) {
    switch (kind_) {
      case partitioning::forward:
        return 0;
      case partitioning::hash:
        return select_by_key(r.key);
      case partitioning::rebalance:
        next_ = next_ + 1 == num_channels_ ? 0 : next_ + 1;
        return next_;
      case partitioning::broadcast:
        return all_channels;
    }
    return 0;
  }

  std::uint32_t select_by_key(std::uint64_t key) const;

  partitioning kind() const { return kind_; }
  std::uint32_t num_channels() const { return num_channels_; }

 private:
  partitioning kind_;
  std::uint32_t num_channels_;
  std::uint32_t max_parallelism_;
  std::uint32_t next_;
};

}  // namespace snapflow
