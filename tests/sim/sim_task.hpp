#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_failure_reason.hpp"
#include "graph/ids.hpp"

namespace snapflow::sim {

// One record: source subtask `source` emits sequence numbers 0, 1, 2, ... The pair is the
// record's identity, which is what exactly-once is checked against.
struct sim_record {
  std::uint32_t source = 0;
  std::uint64_t seq = 0;
};

// A sink's transaction: the records between two barriers, pre-committed at barrier `id`.
// `uid` is unique over the whole simulation, so committing the same transaction again (after a
// restore lists it once more) is recognisably the same commit, as with a real transactional
// sink's idempotent commit.
struct sim_transaction {
  std::uint64_t uid = 0;
  checkpoint_id id = 0;
  std::vector<sim_record> records;
};

// What a subtask's state file for one checkpoint holds.
struct sim_task_state {
  checkpoint_id checkpoint = 0;
  execution_attempt_id attempt;
  std::uint64_t instance = 0;
  std::uint64_t next_seq = 0;            // sources: the position
  std::uint64_t processed = 0;           // middle and sink: records taken in
  std::vector<sim_transaction> pending;  // sinks: pre-committed, not yet committed
  // Unaligned checkpoints: the records in flight on the inputs when it was taken (what the
  // barrier overtook, and what arrived on an input before its barrier did). Replayed on restore.
  std::vector<sim_record> channel_records;
};

enum class sim_role : std::uint8_t { source, middle, sink };

struct sim_item {
  bool barrier = false;
  sim_record record;
  checkpoint_id id = 0;
  std::string location;  // barriers: the folder the snapshot goes to
  // An unaligned barrier put at the front of the channel, ahead of `overtaken` items that were
  // sent before it.
  bool priority = false;
  std::size_t overtaken = 0;
};

class sim_task;

// A data channel between two subtasks of one deployment: bounded, reliable and in order, like
// the real data channels. Faults live on the control plane; a dead task just stops reading.
struct sim_channel {
  std::deque<sim_item> items;
  std::uint32_t capacity = 16;
  sim_task* producer = nullptr;
  sim_task* consumer = nullptr;  // null until the consumer is deployed

  bool full() const { return items.size() >= capacity; }
};

// What a simulated subtask needs from the world; the simulator implements it.
class sim_task_host {
 public:
  virtual ~sim_task_host() = default;
  // Writes the state file (the synchronous part of the snapshot); returns its path.
  virtual std::string write_state(const sim_task_state& state, const std::string& location) = 0;
  // The asynchronous part and the ack (or a decline, if the simulator injects a fault there).
  virtual void acknowledge(sim_task& task, checkpoint_id id, const std::string& path) = 0;
  virtual void decline(sim_task& task, checkpoint_id id, checkpoint_failure_reason reason) = 0;
  virtual void commit(sim_task& task, const sim_transaction& txn) = 0;
  // `task` has input to process.
  virtual void wake(sim_task& task) = 0;
  virtual std::uint64_t next_transaction_uid() = 0;
  // Simulated time, and a step of `task` at `at_us` (the aligned timeout).
  virtual std::int64_t now_us() const = 0;
  virtual void wake_at(sim_task& task, std::int64_t at_us) = 0;
  // A subtask took a checkpoint unaligned (`switched`: after its aligned timeout).
  virtual void took_unaligned(bool switched) = 0;
};

// A subtask of the simulated job: a source emitting sequence numbers, a middle stage passing
// records on, or a two-phase-commit sink. Non-sources align barriers exactly-once (an input
// that delivered barrier n is blocked until every input has); sinks pre-commit at each barrier
// and commit every pre-committed transaction with id <= n on notify-complete n. Stale,
// duplicate and reordered triggers, barriers and notifications are tolerated, as the protocol
// asks of tasks (docs/protocol.md, 5.5).
class sim_task {
 public:
  sim_task(sim_task_host& host, sim_role role, execution_attempt_id attempt,
           std::uint64_t instance);

  // Wires the task into its deployment. Records go to outputs by a fixed hash of the record.
  void connect(std::vector<sim_channel*> inputs, std::vector<sim_channel*> outputs);
  // Starts from checkpoint `id` (0: from scratch) with this subtask's state in it. A sink
  // commits the transactions the state lists.
  void restore(checkpoint_id id, const sim_task_state* state);

  // Sources: emits up to `max_records`, fewer under backpressure; returns how many.
  std::uint32_t emit(std::uint32_t max_records);
  void trigger(checkpoint_id id, const std::string& location);
  // Non-sources: takes up to `max_items` from unblocked inputs; true if more could be taken.
  bool process(std::uint32_t max_items);
  bool has_work() const;

  void notify_complete(checkpoint_id id);
  void notify_aborted(checkpoint_id id);
  void kill() { alive_ = false; }
  // Unaligned checkpoints (exactly-once): barriers jump the channels' queues and what they
  // overtake is persisted; with a timeout > 0 a checkpoint starts aligned and switches after it.
  void set_unaligned(bool unaligned, std::int64_t aligned_timeout_us) {
    unaligned_mode_ = unaligned;
    aligned_timeout_us_ = aligned_timeout_us;
  }


  bool alive() const { return alive_; }
  sim_role role() const { return role_; }
  const execution_attempt_id& attempt() const { return attempt_; }
  std::uint64_t instance() const { return instance_; }
  checkpoint_id last_notified() const { return last_notified_; }
  std::uint64_t next_seq() const { return next_seq_; }
  bool step_scheduled() const { return step_scheduled_; }
  void set_step_scheduled(bool scheduled) { step_scheduled_ = scheduled; }
  std::uint64_t stale_barriers() const { return stale_barriers_; }

 private:
  void on_barrier(std::size_t input, checkpoint_id id, const std::string& location);
  void cancel_alignment();
  void snapshot(checkpoint_id id, const std::string& location);
  void forward_barrier(checkpoint_id id, const std::string& location, bool priority = false);
  // Unaligned: a barrier that jumped its channel's queue, with the records it overtook.
  void on_priority_barrier(std::size_t input, const sim_item& barrier);
  // Takes the snapshot of `id` now; the open inputs not in `delivered` owe its barrier.
  void start_unaligned(checkpoint_id id, const std::string& location,
                       const std::vector<bool>& delivered, bool switched);
  void maybe_finish_unaligned();
  void drop_unaligned();
  void check_alignment_timeout();
  sim_task_state make_state(checkpoint_id id);
  void write_and_ack(const sim_task_state& state, const std::string& location);
  void push(sim_channel& channel, sim_item item);
  sim_item pop(sim_channel& channel);
  sim_channel& route(const sim_record& r) const;

  sim_task_host& host_;
  sim_role role_;
  execution_attempt_id attempt_;
  std::uint64_t instance_;
  std::vector<sim_channel*> inputs_;
  std::vector<sim_channel*> outputs_;
  std::vector<bool> blocked_;
  bool alive_ = true;
  bool step_scheduled_ = false;

  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
  std::vector<sim_record> open_;  // sinks: the open transaction
  std::vector<sim_transaction> pending_;
  // Barriers and triggers at or below this id are stale: that checkpoint was taken or given up.
  checkpoint_id last_done_ = 0;
  checkpoint_id last_notified_ = 0;
  bool aligning_ = false;
  checkpoint_id aligning_id_ = 0;
  std::string aligning_location_;
  std::size_t barriers_seen_ = 0;
  std::int64_t alignment_start_us_ = 0;
  bool unaligned_mode_ = false;
  std::int64_t aligned_timeout_us_ = 0;
  // An unaligned checkpoint taken here whose inputs still owe its barrier.
  bool unaligned_active_ = false;
  checkpoint_id unaligned_id_ = 0;
  std::vector<bool> owed_;
  sim_task_state unaligned_state_;
  std::string unaligned_location_;

  std::size_t next_input_ = 0;
  std::uint64_t stale_barriers_ = 0;
};

}  // namespace snapflow::sim
