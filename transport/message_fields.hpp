#pragma once

// The fields of every control message, described once (internal to the wire codec). One
// description per struct drives every pass over it: counting and writing (envelope.cpp), the
// general reader (general_reader.cpp) and the fast reader of canonical frames
// (canonical_reader.cpp), so none of them can disagree about a key, its type or whether it may
// be left out. A visitor has required(key, field), optional(key, field), entries(key, vector),
// bytes(key, string) and optional_bytes(key, optional string).

#include <concepts>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "transport/messages.hpp"

namespace snapflow::wire::detail {

// `required` keys must be present; `optional` keys may be absent or nil and then keep the
// struct's default (its type's zero: see is_zero). `bytes` marks a std::string that travels as
// msgpack bin instead of str.

template <typename M, typename T>
concept message_of = std::same_as<std::remove_const_t<M>, T>;

template <typename V, message_of<register_worker> M>
void describe(V& v, M& m) {
  v.required("worker_id", m.worker_id);
  v.required("slots", m.slots);
  v.required("data_endpoint", m.data_endpoint);
  v.required("protocol_version", m.protocol_version);
  v.required("pid", m.pid);
  v.optional("session", m.session);
  v.optional("max_batch_bytes", m.max_batch_bytes);
  v.optional("data_roots", m.data_roots);
  v.optional("programs", m.programs);
}

template <typename V, message_of<not_registered> M>
void describe(V& v, M& m) {
  v.optional("reason", m.reason);
}

template <typename V, message_of<register_ack> M>
void describe(V& v, M& m) {
  v.required("accepted", m.accepted);
  v.optional("reason", m.reason);
  v.required("heartbeat_interval_ms", m.heartbeat_interval_ms);
  v.required("heartbeat_timeout_ms", m.heartbeat_timeout_ms);
  v.optional("max_batch_bytes", m.max_batch_bytes);
}

template <typename V, message_of<heartbeat> M>
void describe(V& v, M& m) {
  v.required("sender", m.sender);
  v.required("timestamp_ms", m.timestamp_ms);
  v.optional("tasks", m.tasks);
}

template <typename V, message_of<deploy_task> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.bytes("job_graph", m.job_graph);
  v.optional("subtask_endpoints", m.subtask_endpoints);
  v.optional("restore_checkpoint_id", m.restore_checkpoint_id);
  v.optional("restore_states", m.restore_states);
  v.optional("checkpoint_dir", m.checkpoint_dir);
}

template <typename V, message_of<cancel_task> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
}

template <typename V, message_of<task_state_update> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("state", m.state);
  v.optional("failure_message", m.failure_message);
}

template <typename V, message_of<trigger_checkpoint> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.required("timestamp_ms", m.timestamp_ms);
  v.optional("is_savepoint", m.is_savepoint);
  v.optional("savepoint_dir", m.savepoint_dir);
  v.required("mode", m.mode);
  v.optional("unaligned", m.unaligned);
  v.optional("aligned_timeout_ms", m.aligned_timeout_ms);
  v.optional("target_location", m.target_location);
}

template <typename V, message_of<acknowledge_checkpoint> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.optional("state_handles", m.state_handles);
  v.optional("state_size", m.state_size_bytes);
  v.optional("sync_duration_us", m.sync_duration_us);
  v.optional("async_duration_us", m.async_duration_us);
  v.optional("alignment_duration_us", m.alignment_duration_us);
  v.optional("bytes_processed_during_alignment", m.bytes_processed_during_alignment);
  v.optional("records_held_during_alignment", m.records_held_during_alignment);
  v.optional("records_after_barrier", m.records_after_barrier);
  v.optional("barrier_received_timestamp_us", m.barrier_received_timestamp_us);
  v.optional("unaligned", m.unaligned);
  v.optional("persisted_data_bytes", m.persisted_data_bytes);
  v.optional("max_parallelism", m.max_parallelism);
  v.optional("first_key_group", m.first_key_group);
  v.optional("last_key_group", m.last_key_group);
}

template <typename V, message_of<decline_checkpoint> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.required("reason", m.reason);
  v.optional("message", m.message);
}

template <typename V, message_of<notify_checkpoint_complete> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
}

template <typename V, message_of<notify_checkpoint_aborted> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("checkpoint_id", m.checkpoint);
  v.optional("latest_completed_checkpoint_id", m.latest_completed_checkpoint_id);
}

template <typename V, message_of<source_exhausted> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.required("last_barrier", m.last_barrier);
}

template <typename V, message_of<finish_task> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
}

// The batches repeat the single messages' keys for what their entries share, and add one array
// of entries ("attempts" or "acks"); the array is required and may not be empty.
template <typename V, message_of<trigger_checkpoint_batch> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("checkpoint_id", m.checkpoint);
  v.required("timestamp_ms", m.timestamp_ms);
  v.optional("is_savepoint", m.is_savepoint);
  v.optional("savepoint_dir", m.savepoint_dir);
  v.required("mode", m.mode);
  v.optional("unaligned", m.unaligned);
  v.optional("aligned_timeout_ms", m.aligned_timeout_ms);
  v.optional("target_location", m.target_location);
  v.entries("attempts", m.attempts);
}

template <typename V, message_of<notify_checkpoint_complete_batch> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("checkpoint_id", m.checkpoint);
  v.entries("attempts", m.attempts);
}

template <typename V, message_of<notify_checkpoint_aborted_batch> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("checkpoint_id", m.checkpoint);
  v.optional("latest_completed_checkpoint_id", m.latest_completed_checkpoint_id);
  v.entries("attempts", m.attempts);
}

template <typename V, message_of<acknowledge_checkpoint_batch> M>
void describe(V& v, M& m) {
  v.entries("acks", m.acks);
}

// Nested records are maps of their own, for the same reason the envelope is (fields can be
// added).
template <typename V, message_of<execution_attempt_id> M>
void describe(V& v, M& m) {
  v.required("vertex", m.subtask.vertex);
  v.required("subtask", m.subtask.index);
  v.required("attempt", m.attempt);
}

template <typename V, message_of<state_handle> M>
void describe(V& v, M& m) {
  v.required("path", m.path);
  v.required("size", m.size_bytes);
  v.required("checksum", m.checksum);
  v.optional_bytes("inline_state", m.inline_state);
  v.optional("sharing", m.sharing);
}

template <typename V, message_of<subtask_endpoint> M>
void describe(V& v, M& m) {
  v.required("vertex", m.subtask.vertex);
  v.required("subtask", m.subtask.index);
  v.required("endpoint", m.endpoint);
  v.optional("public_key", m.public_key);
}

template <typename V, message_of<data_root> M>
void describe(V& v, M& m) {
  v.required("path", m.path);
}

template <typename V, message_of<worker_program> M>
void describe(V& v, M& m) {
  v.required("fingerprint", m.fingerprint);
  v.optional("name", m.name);
}

template <typename V, message_of<task_io> M>
void describe(V& v, M& m) {
  v.required("job_id", m.job);
  v.required("attempt", m.attempt);
  v.optional("records_in", m.records_in);
  v.optional("records_out", m.records_out);
  v.optional("notified", m.notified);
  v.optional("in_flight_bytes_bound", m.in_flight_bytes_bound);
  v.optional("buffered_in_bytes", m.buffered_in_bytes);
}

template <typename V, message_of<checkpoint_notified> M>
void describe(V& v, M& m) {
  v.required("checkpoint_id", m.checkpoint);
  v.required("timestamp_us", m.timestamp_us);
}

template <typename V, message_of<subtask_restore_state> M>
void describe(V& v, M& m) {
  v.required("subtask", m.subtask);
  v.optional("state_handles", m.state_handles);
  v.optional("state_size", m.state_size_bytes);
  v.optional("max_parallelism", m.max_parallelism);
  v.optional("first_key_group", m.first_key_group);
  v.optional("last_key_group", m.last_key_group);
}

template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};

// A struct that travels as a nested map.
template <typename T>
concept record = std::same_as<T, execution_attempt_id> || std::same_as<T, state_handle> ||
                 std::same_as<T, subtask_endpoint> || std::same_as<T, subtask_restore_state> ||
                 std::same_as<T, data_root> || std::same_as<T, worker_program> ||
                 std::same_as<T, task_io> || std::same_as<T, checkpoint_notified> ||
                 std::same_as<T, acknowledge_checkpoint>;


// Whether an optional field holds its type's zero (0, false, "", no entries, an absent
// std::optional): such a field is left out of the frame, and a reader takes the default for an
// absent optional field (protocol.md). That is the same value only because every optional
// field's default is its type's zero, which debug builds check (check_optional_defaults).
// A record is always written.
template <typename T>
bool is_zero(const T& value) {
  if constexpr (is_optional<T>::value) {
    return !value.has_value();
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    return value == T{};
  } else if constexpr (requires { value.empty(); }) {
    return value.empty();
  } else {
    return false;
  }
}

// Entries reserved ahead when an array of records is read; more grow the vector as usual
// (a hostile count must not reserve gigabytes before its first bad entry is refused).
inline constexpr std::size_t max_reserved_entries = 64;

}  // namespace snapflow::wire::detail
