#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/runtime/channel.hpp"
#include "engine/runtime/partitioner.hpp"

namespace snapflow {

// The producing side of one job edge at one subtask: a partitioner and one channel per target
// subtask (one for a forward edge), each with the batch being filled. A batch goes out when it
// is full, when a barrier or end-of-input follows it, or when the task runs out of work
// (flush()), so a slow trickle of records is never held back waiting for a full batch.
class output_gate {
 public:
  output_gate(partitioner part, std::vector<std::shared_ptr<output_channel>> channels,
              std::size_t batch_size);

  // false once a channel was cancelled (the job is being torn down).
  bool emit(record r);
  // Appends `e` to every channel and flushes them all (barriers, end-of-input).
  bool broadcast(const stream_element& e);
  bool flush();
  // Whether broadcast() would go out without waiting on any channel.
  bool can_broadcast_now();

  std::size_t num_channels() const { return channels_.size(); }
  void cancel();

 private:
  bool append(std::size_t channel, stream_element e);
  bool send(std::size_t channel);

  partitioner partitioner_;
  std::vector<std::shared_ptr<output_channel>> channels_;
  std::vector<element_batch> pending_;
  std::size_t batch_size_;
};

}  // namespace snapflow
