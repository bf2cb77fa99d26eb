#include "engine/checkpoint/pending_checkpoint.hpp"

#include <cassert>

namespace snapflow {

std::string_view to_string(ack_result r) {
  switch (r) {
    case ack_result::success:
      return "success";
    case ack_result::duplicate:
      return "duplicate";
    case ack_result::unknown:
      return "unknown";
    case ack_result::discarded:
      return "discarded";
  }
  return "?";
}

pending_checkpoint::pending_checkpoint(job_id job, checkpoint_id id, checkpoint_trigger_kind kind,
                                       std::int64_t trigger_timestamp_us, std::uint64_t request_id,
                                       const std::vector<execution_attempt_id>& to_acknowledge,
                                       std::string location)
    : job_(std::move(job)),
      id_(id),
      kind_(kind),
      trigger_timestamp_us_(trigger_timestamp_us),
      request_id_(request_id),
      location_(std::move(location)),
      attempts_(to_acknowledge),
      states_(to_acknowledge.size()),
      acked_(to_acknowledge.size(), false) {
  assert(id > 0);
  assert(!to_acknowledge.empty());
  index_.reserve(to_acknowledge.size());
  for (std::uint32_t i = 0; i < attempts_.size(); ++i) {
    bool inserted = index_.emplace(attempts_[i], i).second;
    assert(inserted && "an attempt listed twice in the acknowledge set");
    (void)inserted;
  }
}

bool pending_checkpoint::is_acknowledged(const execution_attempt_id& attempt) const {
  auto it = index_.find(attempt);
  return it != index_.end() && acked_[it->second];
}

bool pending_checkpoint::is_waiting_for(const execution_attempt_id& attempt) const {
  auto it = index_.find(attempt);
  return it != index_.end() && !acked_[it->second];
}

ack_result pending_checkpoint::acknowledge(const execution_attempt_id& attempt,
                                           subtask_state&& state) {
  if (disposed_) return ack_result::discarded;
  auto it = index_.find(attempt);
  if (it == index_.end()) return ack_result::unknown;
  if (acked_[it->second]) return ack_result::duplicate;
  acked_[it->second] = true;
  states_[it->second] = std::move(state);
  ++acknowledged_;
  assert(acknowledged_ <= attempts_.size());
  return ack_result::success;
}

std::vector<state_handle> pending_checkpoint::dispose() {
  assert(!disposed_);
  disposed_ = true;
  std::vector<state_handle> out;
  for (std::size_t i = 0; i < states_.size(); ++i) {
    if (!acked_[i]) continue;
    for (auto& h : states_[i].handles) out.push_back(std::move(h));
    states_[i] = {};
  }
  return out;
}

completed_checkpoint pending_checkpoint::to_completed(std::int64_t completion_timestamp_us) const {
  assert(fully_acknowledged());
  assert(!disposed_);
  completed_checkpoint c;
  c.job = job_;
  c.id = id_;
  c.kind = kind_;
  c.trigger_timestamp_us = trigger_timestamp_us_;
  c.completion_timestamp_us = completion_timestamp_us;
  c.location = location_;
  for (std::size_t i = 0; i < attempts_.size(); ++i)
    c.subtask_states.emplace(attempts_[i].subtask, states_[i]);
  c.master_states = master_states_;
  return c;
}

}  // namespace snapflow
