#include "transport/wire_conversions.hpp"

#include <utility>

namespace snapflow::transport {

namespace {

wire::state_handle to_wire(const state_handle& h) {
  std::optional<std::string> sharing;
  if (h.is_shared()) sharing = std::string(to_string(h.sharing));
  return {h.path, h.size, h.checksum, h.inline_bytes, std::move(sharing)};
}
// A name this build does not know reads as the checkpoint's own file, which confinement then
// holds to the checkpoint's folder: it can never make the coordinator keep or delete a shared
// file.
handle_sharing sharing_from_wire(const std::optional<std::string>& name) {
  if (name == "shared_new") return handle_sharing::shared_new;
  if (name == "shared_reused") return handle_sharing::shared_reused;
  return handle_sharing::exclusive;
}
state_handle from_wire(const wire::state_handle& h) {
  return {h.path, h.size_bytes, h.checksum, h.inline_state, sharing_from_wire(h.sharing)};
}

std::vector<wire::state_handle> to_wire(const std::vector<state_handle>& handles) {
  std::vector<wire::state_handle> out;
  out.reserve(handles.size());
  for (const auto& h : handles) out.push_back(to_wire(h));
  return out;
}

std::vector<state_handle> from_wire(const std::vector<wire::state_handle>& handles) {
  std::vector<state_handle> out;
  out.reserve(handles.size());
  for (const auto& h : handles) out.push_back(from_wire(h));
  return out;
}

// Keyed scope <-> the three optional fields (max_parallelism 0: not keyed). A range the sender
// got wrong is carried as it came: the receiver checks it (valid_keyed_scope).
template <typename M>
void scope_to_wire(const std::optional<keyed_state_scope>& scope, M& m) {
  m.max_parallelism = scope ? scope->max_parallelism : 0;
  m.first_key_group = scope ? scope->first_key_group : 0;
  m.last_key_group = scope ? scope->last_key_group : 0;
}

template <typename M>
std::optional<keyed_state_scope> scope_from_wire(const M& m) {
  if (m.max_parallelism == 0) return std::nullopt;
  return keyed_state_scope{m.max_parallelism, m.first_key_group, m.last_key_group};
}

}  // namespace

wire::deploy_task to_wire(const task_deployment_descriptor& d) {
  wire::deploy_task m;
  m.job = d.job;
  m.attempt = d.attempt;
  m.job_graph = d.job_graph_bytes;
  m.subtask_endpoints.reserve(d.subtask_endpoints.size());
  for (const auto& [subtask, endpoint] : d.subtask_endpoints) {
    std::optional<std::string> key;
    if (auto it = d.subtask_public_keys.find(subtask); it != d.subtask_public_keys.end())
      key = it->second;
    m.subtask_endpoints.push_back({subtask, endpoint, std::move(key)});
  }
  m.restore_checkpoint_id = d.restore_checkpoint_id;
  m.restore_states.reserve(d.restore_states.size());
  for (const auto& [index, state] : d.restore_states) {
    wire::subtask_restore_state& r = m.restore_states.emplace_back();
    r.subtask = index;
    r.state_handles = to_wire(state.handles);
    r.state_size_bytes = state.state_size;
    scope_to_wire(state.keyed, r);
  }
  m.checkpoint_dir = d.checkpoint_dir;
  return m;
}

task_deployment_descriptor from_wire(const wire::deploy_task& m) {
  task_deployment_descriptor d;
  d.job = m.job;
  d.attempt = m.attempt;
  d.job_graph_bytes = m.job_graph;
  // A repeated subtask keeps its first entry, as a repeated key in the envelope does.
  for (const auto& e : m.subtask_endpoints) {
    if (!d.subtask_endpoints.emplace(e.subtask, e.endpoint).second) continue;
    if (e.public_key) d.subtask_public_keys.emplace(e.subtask, *e.public_key);
  }
  d.restore_checkpoint_id = m.restore_checkpoint_id;
  for (const auto& r : m.restore_states)
    d.restore_states.emplace(r.subtask, subtask_state{from_wire(r.state_handles),
                                                      r.state_size_bytes, scope_from_wire(r)});
  d.checkpoint_dir = m.checkpoint_dir;
  return d;
}

wire::trigger_checkpoint to_wire(const job_id& job, const execution_attempt_id& attempt,
                                 checkpoint_id id, std::int64_t timestamp_us,
                                 const checkpoint_options& options) {
  wire::trigger_checkpoint m;
  to_wire(job, attempt, id, timestamp_us, options, m);
  return m;
}

void to_wire(const job_id& job, const execution_attempt_id& attempt, checkpoint_id id,
             std::int64_t timestamp_us, const checkpoint_options& options,
             wire::trigger_checkpoint& m) {
  m.job.assign(job);
  m.attempt = attempt;
  m.checkpoint = id;
  m.timestamp_ms = timestamp_us / 1000;
  m.is_savepoint = options.kind == checkpoint_trigger_kind::savepoint;
  // A savepoint's folder is its target location: the engine keeps no separate base folder.
  if (m.is_savepoint)
    m.savepoint_dir.assign(options.target_location);
  else
    m.savepoint_dir.clear();
  m.mode = options.exactly_once ? checkpointing_mode::exactly_once
                                : checkpointing_mode::at_least_once;
  m.unaligned = options.unaligned;
  m.aligned_timeout_ms = options.aligned_timeout_ms;
  m.target_location.assign(options.target_location);
}

checkpoint_options options_from_wire(const wire::trigger_checkpoint& m) {
  checkpoint_options o;
  o.kind = m.is_savepoint ? checkpoint_trigger_kind::savepoint : checkpoint_trigger_kind::periodic;
  o.exactly_once = m.mode == checkpointing_mode::exactly_once;
  o.unaligned = m.unaligned;
  o.aligned_timeout_ms = m.aligned_timeout_ms;
  o.target_location = m.target_location;
  if (o.target_location.empty() && m.is_savepoint) o.target_location = m.savepoint_dir;
  return o;
}

std::int64_t timestamp_us_from_wire(const wire::trigger_checkpoint& m) {
  return m.timestamp_ms * 1000;
}

wire::task_io to_wire(const task_io_counters& c) {
  wire::task_io m{c.job, c.attempt, c.records_in, c.records_out, std::nullopt};
  m.in_flight_bytes_bound = c.in_flight_bytes_bound;
  m.buffered_in_bytes = c.buffered_in_bytes;
  if (!c.notified.empty()) {
    m.notified.emplace();
    m.notified->reserve(c.notified.size());
    for (const auto& n : c.notified) m.notified->push_back({n.id, n.timestamp_us});
  }
  return m;
}

task_io_counters from_wire(const wire::task_io& m) {
  task_io_counters c{m.job, m.attempt, m.records_in, m.records_out, {}};
  c.in_flight_bytes_bound = m.in_flight_bytes_bound;
  c.buffered_in_bytes = m.buffered_in_bytes;
  if (m.notified) {
    // A peer keeps at most this many (task_io_metrics.hpp); more is not trusted to be
    // bounded, so only the newest are taken.
    const std::size_t n = m.notified->size();
    const std::size_t skip = n > max_notified_per_report ? n - max_notified_per_report : 0;
    c.notified.reserve(n - skip);
    for (std::size_t i = skip; i < n; ++i)
      c.notified.push_back({(*m.notified)[i].checkpoint, (*m.notified)[i].timestamp_us});
  }
  return c;
}

wire::acknowledge_checkpoint to_wire(const checkpoint_ack& ack) {
  wire::acknowledge_checkpoint m;
  to_wire(ack, m);
  return m;
}

void to_wire(const checkpoint_ack& ack, wire::acknowledge_checkpoint& m) {
  m.job.assign(ack.job);
  m.attempt = ack.attempt;
  m.checkpoint = ack.id;
  if (ack.state.handles.empty())
    m.state_handles.clear();  // keeps the vector's room, as job's
  else
    m.state_handles = to_wire(ack.state.handles);
  m.state_size_bytes = ack.state.state_size;
  scope_to_wire(ack.state.keyed, m);
  m.sync_duration_us = ack.metrics.sync_duration_us;
  m.async_duration_us = ack.metrics.async_duration_us;
  m.alignment_duration_us = ack.metrics.alignment_duration_us;
  m.bytes_processed_during_alignment = ack.metrics.bytes_processed_during_alignment;
  m.records_held_during_alignment = ack.metrics.records_held_during_alignment;
  m.records_after_barrier = ack.metrics.records_after_barrier;
  m.barrier_received_timestamp_us = ack.metrics.barrier_received_timestamp_us;
  m.unaligned = ack.metrics.unaligned;
  m.persisted_data_bytes = ack.metrics.persisted_data_bytes;
}

checkpoint_ack from_wire(const wire::acknowledge_checkpoint& m) {
  return from_wire(wire::acknowledge_checkpoint(m));
}

checkpoint_ack from_wire(wire::acknowledge_checkpoint&& m) {
  checkpoint_ack ack;
  ack.job = std::move(m.job);
  ack.attempt = m.attempt;
  ack.id = m.checkpoint;
  ack.state = subtask_state{from_wire(m.state_handles), m.state_size_bytes, scope_from_wire(m)};
  ack.metrics.sync_duration_us = m.sync_duration_us;
  ack.metrics.async_duration_us = m.async_duration_us;
  ack.metrics.alignment_duration_us = m.alignment_duration_us;
  ack.metrics.bytes_processed_during_alignment = m.bytes_processed_during_alignment;
  ack.metrics.records_held_during_alignment = m.records_held_during_alignment;
  ack.metrics.records_after_barrier = m.records_after_barrier;
  ack.metrics.barrier_received_timestamp_us = m.barrier_received_timestamp_us;
  ack.metrics.unaligned = m.unaligned;
  ack.metrics.persisted_data_bytes = m.persisted_data_bytes;
  return ack;
}

wire::decline_checkpoint to_wire(const checkpoint_decline& decline) {
  return {decline.job, decline.attempt, decline.id, std::string(to_string(decline.reason)),
          decline.message};
}

checkpoint_decline from_wire(const wire::decline_checkpoint& m) {
  checkpoint_decline d;
  d.job = m.job;
  d.attempt = m.attempt;
  d.id = m.checkpoint;
  d.reason = parse_checkpoint_failure_reason(m.reason).value_or(
      checkpoint_failure_reason::checkpoint_declined);
  d.message = m.message;
  return d;
}

std::optional<wire::task_state> to_wire(execution_state state) {
  switch (state) {
    case execution_state::deploying:
    case execution_state::initializing:
      return wire::task_state::deploying;
    case execution_state::running:
      return wire::task_state::running;
    case execution_state::finished:
      return wire::task_state::finished;
    case execution_state::failed:
      return wire::task_state::failed;
    case execution_state::canceled:
      return wire::task_state::canceled;
    case execution_state::created:
    case execution_state::scheduled:
    case execution_state::canceling:
      return std::nullopt;
  }
  return std::nullopt;
}

execution_state from_wire(wire::task_state state) {
  switch (state) {
    case wire::task_state::deploying:
      return execution_state::deploying;
    case wire::task_state::running:
      return execution_state::running;
    case wire::task_state::finished:
      return execution_state::finished;
    case wire::task_state::failed:
      return execution_state::failed;
    case wire::task_state::canceled:
      return execution_state::canceled;
  }
  return execution_state::failed;
}

}  // namespace snapflow::transport
