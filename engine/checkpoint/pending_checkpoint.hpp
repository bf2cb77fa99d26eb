#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"

namespace snapflow {

enum class ack_result : std::uint8_t {
  success,    // first ack of a subtask the checkpoint waits for
  duplicate,  // that subtask had acked already; nothing changed
  unknown,    // not an attempt this checkpoint waits for (stale attempt, foreign subtask)
  discarded,  // the checkpoint was already disposed
};

std::string_view to_string(ack_result r);

// A triggered checkpoint waiting for acknowledgements: the set of attempts still to ack, the
// state they reported, and the master hook states. Lookup by attempt is a hash probe, so a
// checkpoint over 10,000 subtasks costs O(1) per ack.
class pending_checkpoint {
 public:
  pending_checkpoint(job_id job, checkpoint_id id, checkpoint_trigger_kind kind,
                     std::int64_t trigger_timestamp_us, std::uint64_t request_id,
                     const std::vector<execution_attempt_id>& to_acknowledge,
                     std::string location);

  checkpoint_id id() const { return id_; }
  checkpoint_trigger_kind kind() const { return kind_; }
  bool is_savepoint() const { return kind_ == checkpoint_trigger_kind::savepoint; }
  std::int64_t trigger_timestamp_us() const { return trigger_timestamp_us_; }
  std::uint64_t request_id() const { return request_id_; }
  const std::string& location() const { return location_; }

  std::size_t num_subtasks() const { return attempts_.size(); }
  std::size_t num_acknowledged() const { return acknowledged_; }
  std::size_t num_not_yet_acknowledged() const { return attempts_.size() - acknowledged_; }
  bool fully_acknowledged() const { return acknowledged_ == attempts_.size(); }
  bool is_acknowledged(const execution_attempt_id& attempt) const;
  bool is_waiting_for(const execution_attempt_id& attempt) const;

  // Records the state of `attempt`, moving from `state` only on success. On anything else
  // `state` is left untouched: the caller owns (and must discard) the files it names.
  ack_result acknowledge(const execution_attempt_id& attempt, subtask_state&& state);

  void set_master_states(std::map<std::string, std::string> states) {
    master_states_ = std::move(states);
  }
  bool master_states_done() const { return master_states_done_; }
  void mark_master_states_done() { master_states_done_ = true; }

  // Metadata is being written: no more acks expected, the timeout no longer applies.
  bool finalizing() const { return finalizing_; }
  void mark_finalizing() { finalizing_ = true; }

  bool disposed() const { return disposed_; }
  // Marks the checkpoint dead and hands back every state file acked so far, for discarding.
  std::vector<state_handle> dispose();

  // The durable form, once every ack is in.
  completed_checkpoint to_completed(std::int64_t completion_timestamp_us) const;

 private:
  job_id job_;
  checkpoint_id id_;
  checkpoint_trigger_kind kind_;
  std::int64_t trigger_timestamp_us_;
  std::uint64_t request_id_;
  std::string location_;
  std::unordered_map<execution_attempt_id, std::uint32_t> index_;
  std::vector<execution_attempt_id> attempts_;
  std::vector<subtask_state> states_;
  std::vector<bool> acked_;
  std::size_t acknowledged_ = 0;
  std::map<std::string, std::string> master_states_;
  bool master_states_done_ = false;
  bool finalizing_ = false;
  bool disposed_ = false;
};

}  // namespace snapflow
