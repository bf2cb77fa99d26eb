#include "transport/messages.hpp"

namespace snapflow::wire {

namespace {

// Long or binary fields would make a failing test or a log line unreadable.
struct abbreviated {
  std::string_view text;
};

std::ostream& operator<<(std::ostream& os, abbreviated a) {
  constexpr std::size_t shown = 48;
  if (a.text.size() <= shown) return os << '"' << a.text << '"';
  return os << '"' << a.text.substr(0, shown) << "...\"(" << a.text.size() << " bytes)";
}

std::ostream& operator<<(std::ostream& os, const std::optional<checkpoint_id>& id) {
  if (!id) return os << "none";
  return os << *id;
}

template <typename T>
std::ostream& operator<<(std::ostream& os, const std::vector<T>& items) {
  os << '[';
  for (std::size_t i = 0; i < items.size(); ++i) os << (i ? ", " : "") << items[i];
  return os << ']';
}

}  // namespace

std::string_view to_string(task_state state) {
  switch (state) {
    case task_state::deploying:
      return "deploying";
    case task_state::running:
      return "running";
    case task_state::finished:
      return "finished";
    case task_state::failed:
      return "failed";
    case task_state::canceled:
      return "canceled";
  }
  return "unknown";
}

std::optional<task_state> parse_task_state(std::string_view text) {
  for (auto s : {task_state::deploying, task_state::running, task_state::finished,
                 task_state::failed, task_state::canceled})
    if (to_string(s) == text) return s;
  return std::nullopt;
}

std::string_view type_name(const message& m) {
  return std::visit([](const auto& v) { return std::decay_t<decltype(v)>::wire_type; }, m);
}

std::ostream& operator<<(std::ostream& os, task_state state) { return os << to_string(state); }

std::ostream& operator<<(std::ostream& os, const state_handle& h) {
  os << "state_handle{";
  if (h.inline_state)
    os << "inline";
  else
    os << h.path;
  return os << ", size=" << h.size_bytes << ", crc=" << h.checksum << "}";
}

std::ostream& operator<<(std::ostream& os, const subtask_endpoint& e) {
  os << e.subtask << "@" << e.endpoint;
  if (e.public_key) os << " key=" << *e.public_key;
  return os;
}

std::ostream& operator<<(std::ostream& os, const data_root& r) { return os << r.path; }
std::ostream& operator<<(std::ostream& os, const worker_program& p) {
  return os << p.name << "@" << p.fingerprint;
}

std::ostream& operator<<(std::ostream& os, const subtask_restore_state& r) {
  return os << "restore{subtask=" << r.subtask << ", size=" << r.state_size_bytes
            << ", handles=" << r.state_handles << "}";
}

std::ostream& operator<<(std::ostream& os, const register_worker& m) {
  return os << "register_worker{worker=" << m.worker_id << ", slots=" << m.slots
            << ", data=" << m.data_endpoint << ", version=" << m.protocol_version
            << ", pid=" << m.pid << ", session=" << m.session
            << ", max_batch_bytes=" << m.max_batch_bytes << ", data_roots=" << m.data_roots
            << ", programs=" << m.programs << "}";
}

std::ostream& operator<<(std::ostream& os, const not_registered& m) {
  return os << "not_registered{reason=" << abbreviated{m.reason} << "}";
}

std::ostream& operator<<(std::ostream& os, const register_ack& m) {
  return os << "register_ack{accepted=" << m.accepted << ", reason=" << abbreviated{m.reason}
            << ", interval_ms=" << m.heartbeat_interval_ms
            << ", timeout_ms=" << m.heartbeat_timeout_ms
            << ", max_batch_bytes=" << m.max_batch_bytes << "}";
}

std::ostream& operator<<(std::ostream& os, const checkpoint_notified& n) {
  return os << "notified{id=" << n.checkpoint << ", us=" << n.timestamp_us << "}";
}

std::ostream& operator<<(std::ostream& os, const task_io& t) {
  os << "task_io{job=" << t.job << ", attempt=" << t.attempt << ", in=" << t.records_in
     << ", out=" << t.records_out;
  if (t.notified) os << ", notified=" << *t.notified;
  if (t.in_flight_bytes_bound != 0)
    os << ", in_flight_bytes_bound=" << t.in_flight_bytes_bound
       << ", buffered_in_bytes=" << t.buffered_in_bytes;
  return os << "}";
}

std::ostream& operator<<(std::ostream& os, const heartbeat& m) {
  return os << "heartbeat{sender=" << m.sender << ", ts_ms=" << m.timestamp_ms
            << ", tasks=" << (m.tasks ? m.tasks->size() : 0) << "}";
}

std::ostream& operator<<(std::ostream& os, const deploy_task& m) {
  return os << "deploy_task{job=" << m.job << ", attempt=" << m.attempt
            << ", graph=" << m.job_graph.size() << " bytes"
            << ", endpoints=" << m.subtask_endpoints << ", restore=" << m.restore_checkpoint_id
            << ", states=" << m.restore_states << ", dir=" << m.checkpoint_dir << "}";
}

std::ostream& operator<<(std::ostream& os, const cancel_task& m) {
  return os << "cancel_task{job=" << m.job << ", attempt=" << m.attempt << "}";
}

std::ostream& operator<<(std::ostream& os, const task_state_update& m) {
  return os << "task_state_update{job=" << m.job << ", attempt=" << m.attempt
            << ", state=" << m.state << ", failure=" << abbreviated{m.failure_message} << "}";
}

std::ostream& operator<<(std::ostream& os, const trigger_checkpoint& m) {
  return os << "trigger_checkpoint{job=" << m.job << ", attempt=" << m.attempt
            << ", id=" << m.checkpoint << ", ts_ms=" << m.timestamp_ms
            << ", savepoint=" << m.is_savepoint << ", dir=" << m.savepoint_dir
            << ", mode=" << to_string(m.mode) << ", unaligned=" << m.unaligned
            << ", target=" << m.target_location << "}";
}

std::ostream& operator<<(std::ostream& os, const acknowledge_checkpoint& m) {
  return os << "acknowledge_checkpoint{job=" << m.job << ", attempt=" << m.attempt
            << ", id=" << m.checkpoint << ", state=" << m.state_handles
            << ", size=" << m.state_size_bytes << ", sync_us=" << m.sync_duration_us
            << ", async_us=" << m.async_duration_us
            << ", alignment_us=" << m.alignment_duration_us
            << ", alignment_bytes=" << m.bytes_processed_during_alignment
            << ", held_records=" << m.records_held_during_alignment
            << ", records_after_barrier=" << m.records_after_barrier
            << ", barrier_received_us=" << m.barrier_received_timestamp_us << "}";
}

std::ostream& operator<<(std::ostream& os, const decline_checkpoint& m) {
  return os << "decline_checkpoint{job=" << m.job << ", attempt=" << m.attempt
            << ", id=" << m.checkpoint << ", reason=" << m.reason
            << ", message=" << abbreviated{m.message} << "}";
}

std::ostream& operator<<(std::ostream& os, const notify_checkpoint_complete& m) {
  return os << "notify_checkpoint_complete{job=" << m.job << ", attempt=" << m.attempt
            << ", id=" << m.checkpoint << "}";
}

std::ostream& operator<<(std::ostream& os, const notify_checkpoint_aborted& m) {
  return os << "notify_checkpoint_aborted{job=" << m.job << ", attempt=" << m.attempt
            << ", id=" << m.checkpoint << ", latest=" << m.latest_completed_checkpoint_id << "}";
}

std::ostream& operator<<(std::ostream& os, const source_exhausted& m) {
  return os << "source_exhausted{job=" << m.job << ", attempt=" << m.attempt
            << ", last_barrier=" << m.last_barrier << "}";
}

std::ostream& operator<<(std::ostream& os, const finish_task& m) {
  return os << "finish_task{job=" << m.job << ", attempt=" << m.attempt << "}";
}

trigger_checkpoint trigger_checkpoint_batch::entry(const execution_attempt_id& attempt) const {
  return trigger_checkpoint{job,  attempt,   checkpoint,      timestamp_ms,      is_savepoint,
                            savepoint_dir, mode, unaligned, target_location, aligned_timeout_ms};
}

bool trigger_checkpoint_batch::takes(const trigger_checkpoint& m) const {
  return m.job == job && m.checkpoint == checkpoint && m.timestamp_ms == timestamp_ms &&
         m.is_savepoint == is_savepoint && m.savepoint_dir == savepoint_dir && m.mode == mode &&
         m.unaligned == unaligned && m.aligned_timeout_ms == aligned_timeout_ms &&
         m.target_location == target_location;
}

std::ostream& operator<<(std::ostream& os, const trigger_checkpoint_batch& m) {
  return os << "trigger_checkpoint_batch{job=" << m.job << ", id=" << m.checkpoint
            << ", ts_ms=" << m.timestamp_ms << ", savepoint=" << m.is_savepoint
            << ", dir=" << m.savepoint_dir << ", mode=" << to_string(m.mode)
            << ", unaligned=" << m.unaligned << ", target=" << m.target_location
            << ", attempts=" << m.attempts << "}";
}

std::ostream& operator<<(std::ostream& os, const notify_checkpoint_complete_batch& m) {
  return os << "notify_checkpoint_complete_batch{job=" << m.job << ", id=" << m.checkpoint
            << ", attempts=" << m.attempts << "}";
}

std::ostream& operator<<(std::ostream& os, const notify_checkpoint_aborted_batch& m) {
  return os << "notify_checkpoint_aborted_batch{job=" << m.job << ", id=" << m.checkpoint
            << ", latest=" << m.latest_completed_checkpoint_id << ", attempts=" << m.attempts
            << "}";
}

std::ostream& operator<<(std::ostream& os, const acknowledge_checkpoint_batch& m) {
  return os << "acknowledge_checkpoint_batch{acks=" << m.acks << "}";
}

std::ostream& operator<<(std::ostream& os, const message& m) {
  std::visit([&os](const auto& v) { os << v; }, m);
  return os;
}

}  // namespace snapflow::wire
