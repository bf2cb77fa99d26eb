#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/runtime/stream_element.hpp"
#include "engine/runtime/task_wakeup.hpp"

namespace snapflow {

// The two ends of a data channel between a producing and a consuming subtask. Elements travel
// in order, in batches (output_gate does the batching). The consumer's buffer is bounded: a
// producer whose consumer is full either waits in send() or, with try_send(), keeps the batch
// and is woken once room comes (backpressure), so no queue grows without bound. local_channel implements both ends in memory; a network transport implements the
// producer end over a socket and the consumer end over a bounded receive buffer, with credit
// flow or socket high-water marks standing in for the shared buffer.

// Thrown by a channel that can no longer carry its elements because its peer is gone (the
// connection to the other worker closed). The task fails with this message as it stands: it
// names what was lost, and a failover restores what was in flight.
class channel_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What output_channel::try_send did with a batch.
enum class send_status {
  sent,       // handed to the consumer (the batch was moved from)
  no_room,    // kept by the caller, untouched; the room wakeup follows once room may have come
  cancelled,  // the channel was cancelled; the batch is dropped
};

class output_channel {
 public:
  virtual ~output_channel() = default;
  // Hands a batch to the consumer. Blocks while the consumer's buffer is full; returns false
  // (dropping the batch) once the channel was cancelled; throws channel_failure once the
  // consumer is known to be gone.
  virtual bool send(element_batch batch) = 0;
  // send() without the wait: hands `batch` over when the consumer has room (or credit) now,
  // else says no_room and leaves it with the caller, and from then on notifies the room
  // wakeup (set_room_wakeup) once, when room or credit may have come: the caller then tries
  // again. Throws channel_failure once the consumer is known to be gone. A channel that cannot
  // tell waits in send() instead (never no_room).
  virtual send_status try_send(element_batch& batch) {
    return send(std::move(batch)) ? send_status::sent : send_status::cancelled;
  }
  // Called once before the producing task starts: the wakeup a no_room of try_send (and a
  // cancel) notifies. Any thread may notify it.
  virtual void set_room_wakeup(std::shared_ptr<task_wakeup> wakeup) { (void)wakeup; }
  // Hands a batch of exactly one checkpoint_barrier to the consumer ahead of its capacity: for
  // unaligned checkpoints, where a barrier overtakes the records buffered in the channel. Never
  // waits for room or credit, and does not take any: the consumer queues it behind what it has
  // already received (so it overtakes only what the consumer has not taken yet) and finds it
  // with input_channel::take_first_barrier. Returns false once the channel was cancelled;
  // throws channel_failure once the consumer is known to be gone. Anything but a single
  // barrier is a programming error. A channel that cannot do this throws std::logic_error.
  virtual bool send_priority(element_batch batch);
  // Whether send() would take one batch now without waiting: room in the consumer's buffer (or
  // credit) and nothing else in the way. Asked by whichever thread sends, as send() is. A
  // channel that cannot tell says false, which only costs a thread hand-off
  // (stream_task::trigger_checkpoint).
  virtual bool can_send_now() { return false; }
  // Ends the channel for good: wakes a blocked send() and makes every later one fail. Any
  // thread. Used when a job is torn down (a failed or cancelled task).
  virtual void cancel() = 0;

  // --- the byte bound (checkpoint_config::max_in_flight_bytes) ---
  // From now on a batch with records goes (send, try_send) only while the bytes of records the
  // consumer holds, with it, stay within the bound in force, or while the consumer holds none
  // (one batch larger than the bound passes alone, so nothing deadlocks). A batch without
  // records (a barrier: can_send_now) adds none and is held by the batch count only. 0: no
  // byte bound. Called before the producing task starts. A channel that cannot count ignores
  // it.
  virtual void set_max_in_flight_bytes(std::uint64_t bytes) { (void)bytes; }
  // The bound in force: the configured one, or a smaller one its consumer announced
  // (input_channel::announce_in_flight_bytes); 0: none. Any thread; output_gate cuts batches
  // at it.
  virtual std::uint64_t in_flight_bytes_bound() const { return 0; }
};

// What input_channel::take_first_barrier found: the first barrier queued on its own in a
// batch, and copies of the batches queued ahead of it (the records a snapshot persists as the
// channel's state), oldest first.
struct queued_barrier {
  checkpoint_barrier barrier;
  // Sent by send_priority (it did not count against the capacity), rather than by send.
  bool priority = false;
  std::vector<element_batch> ahead;
};

class input_channel {
 public:
  virtual ~input_channel() = default;
  // The oldest batch not yet taken, or nothing. Never blocks; taking a batch frees room for the
  // producer.
  virtual std::optional<element_batch> try_take() = 0;
  // Called once before the consuming task starts: every batch that arrives (and a cancel)
  // notifies `wakeup`.
  virtual void set_wakeup(std::shared_ptr<task_wakeup> wakeup) = 0;
  virtual void cancel() = 0;
  // Why the channel cannot deliver its elements complete (a batch went missing on the way, or
  // the producer's connection closed before its end of input), once
  // every batch before the loss was taken; nothing while it is whole. The consuming task fails
  // with it: going on would lose records without a trace, a failover restores them.
  virtual std::optional<std::string> broken() const { return std::nullopt; }

  // For unaligned checkpoints. Removes the first queued batch that is exactly one
  // checkpoint_barrier (sent by send_priority or by send) and returns it with copies of the
  // batches queued ahead of it; those stay queued, and try_take returns them, then the batches
  // that came after the barrier, in order. Nothing when no such batch is queued. Never blocks.
  // Taking a barrier sent by send frees its room (returns its credit) as try_take would; one
  // sent by send_priority took none. A channel without the support finds nothing.
  virtual std::optional<queued_barrier> take_first_barrier() { return std::nullopt; }
  // Whether a batch sent by send_priority is queued and not taken yet: cheap (no lock), for a
  // task to poll between records. Its arrival notifies the wakeup as any batch does.
  virtual bool has_priority_barrier() const { return false; }

  // --- the byte bound (checkpoint_config::max_in_flight_bytes) ---
  // The bound the job configured, for the consumer's side (a network channel returns credit
  // sooner under it). 0: none. Called before the consuming task starts.
  virtual void set_max_in_flight_bytes(std::uint64_t bytes) { (void)bytes; }
  // Buffer debloating: the consumer wants at most `bytes` of records in flight on this
  // channel from now on (never above the configured bound; 0: the configured bound again).
  // It reaches the producer as the channel can carry it (the same object in process, a credit
  // frame over the network). Task thread.
  virtual void announce_in_flight_bytes(std::uint64_t bytes) { (void)bytes; }
  // Bytes of records queued and not taken yet (stats); 0 for a channel that does not count.
  virtual std::uint64_t buffered_record_bytes() const { return 0; }
};

// Whether `batch` is what send_priority carries: exactly one checkpoint_barrier.
inline bool is_single_barrier(const element_batch& batch) {
  return batch.size() == 1 && std::holds_alternative<checkpoint_barrier>(batch.front());
}

// A barrier with id 0 is no checkpoint's: it ends the output channel state a restored producer
// replayed (stream_task's recovery alignment). It keeps its place: take_first_barrier passes it.
inline bool is_recovery_marker(const checkpoint_barrier& b) { return b.id == 0; }

// take_first_barrier() over a channel's queue of entries with `batch` and `priority`: `take`
// removes the entry an iterator names and returns its batch (freeing what it held).
template <class Queue, class Take>
std::optional<queued_barrier> take_first_barrier_of(Queue& queue, Take&& take) {
  auto it = std::find_if(queue.begin(), queue.end(),
                         [](const auto& q) {
                           return is_single_barrier(q.batch) &&
                                  !is_recovery_marker(std::get<checkpoint_barrier>(q.batch.front()));
                         });
  if (it == queue.end()) return std::nullopt;
  queued_barrier out;
  out.priority = it->priority;
  out.ahead.reserve(static_cast<std::size_t>(it - queue.begin()));
  for (auto ahead = queue.begin(); ahead != it; ++ahead) out.ahead.push_back(ahead->batch);
  out.barrier = std::get<checkpoint_barrier>(take(it).front());
  return out;
}

inline bool output_channel::send_priority(element_batch) {
  throw std::logic_error("this channel cannot send a barrier ahead of its records");
}

}  // namespace snapflow
