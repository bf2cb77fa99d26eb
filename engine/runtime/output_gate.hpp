#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/runtime/channel.hpp"
#include "engine/runtime/partitioner.hpp"

namespace snapflow {

// The producing side of one job edge at one subtask: a partitioner and one channel per target
// subtask (one for a forward edge), each with the batch being filled. A batch goes out when it
// is full, when a barrier or end-of-input follows it, or when the task runs out of work
// (flush()), so a slow trickle of records is never held back waiting for a full batch. A
// barrier or an end-of-input travels as a batch of its own, so that a consumer finds a barrier
// without looking into batches of records (input_channel::take_first_barrier).
//
// Never waits for a consumer: a batch its channel has no room for now (output_channel::
// try_send) joins that channel's backlog, and every later batch of the channel queues behind
// it, so each channel keeps its order exactly. The task stops taking input while any channel
// has a backlog (backlogged()), so a backlog holds what the operator emitted for the record in
// progress, normally one batch (Flink's overdraft buffer), and drain() hands it over once the
// channel's room wakeup said room came.
//
// With a byte bound on a channel (output_channel::in_flight_bytes_bound), a batch is also cut
// before a record that would take its records' bytes beyond the bound, so no batch holds more
// than the bound, but for a single larger record, which goes alone.
class output_gate {
 public:
  output_gate(partitioner part, std::vector<std::shared_ptr<output_channel>> channels,
              std::size_t batch_size);

  // false once a channel was cancelled (the job is being torn down).
  bool emit(record r);
  // A watermark to every channel, in-band: after the records before it, in the same batches
  // (it needs no batch of its own, nobody looks for it ahead of the records).
  bool emit_watermark(const watermark& w);
  // Sends what is pending on every channel, then `e` alone in a batch of its own, on every
  // channel (barriers, end-of-input).
  bool broadcast(const stream_element& e);
  bool flush();
  // Hands backlogged batches to their channels, oldest first, as long as the channels take
  // them. false once a channel was cancelled.
  bool drain();
  // Whether a channel has a batch it could not take yet.
  bool backlogged() const { return backlogged_channels_ != 0; }
  // Whether broadcast() would go out at once on every channel: nothing pending or backlogged,
  // and room for one batch.
  bool can_broadcast_now();

  std::size_t num_channels() const { return channels_.size(); }
  void cancel();

  // --- unaligned checkpoints ---
  // The records one channel holds that its consumer has not received: the backlog, oldest
  // first, then the pending batch.
  struct overtaken {
    std::size_t channel = 0;
    std::vector<record> records;
  };
  // Sends `barrier` on every channel ahead of what the gate still holds for it
  // (output_channel::send_priority), and returns copies of what it overtook on each channel
  // that held anything: the output channel state. What the gate holds goes out after it, as
  // before. false once a channel was cancelled.
  bool overtake(const checkpoint_barrier& barrier, std::vector<overtaken>& out);
  // Whether the barrier of checkpoint `id` waits in a channel's backlog (broadcast() could not
  // hand it over yet).
  bool holds_barrier(checkpoint_id id) const;
  // Takes the barrier of checkpoint `id` out of every backlog that holds it and sends it ahead
  // of the batches in front of it, marked unaligned (aligned_timeout_ms 0); returns copies of
  // the records it overtook per channel. false once a channel was cancelled.
  bool overtake_backlogged(checkpoint_id id, std::vector<overtaken>& out);
  // Appends `r` to channel `channel` without the partitioner (a restored output channel state
  // goes back to the channel it was persisted for). false once a channel was cancelled.
  bool emit_to(std::size_t channel, record r);

 private:
  bool append(std::size_t channel, stream_element e);
  static void copy_records(const element_batch& batch, std::vector<record>& out);
  // Sends the channel's pending batch.
  bool send(std::size_t channel);
  // Hands `batch` to the channel, or queues it behind the channel's backlog.
  bool ship(std::size_t channel, element_batch batch);

  partitioner partitioner_;
  std::vector<std::shared_ptr<output_channel>> channels_;
  std::vector<element_batch> pending_;
  std::vector<std::uint64_t> pending_bytes_;  // record_bytes of pending_, by channel
  std::vector<std::deque<element_batch>> backlog_;  // by channel, oldest first
  std::size_t backlogged_channels_ = 0;             // channels with a non-empty backlog
  std::size_t batch_size_;
};

}  // namespace snapflow
