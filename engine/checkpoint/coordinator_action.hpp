#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"

namespace snapflow {

// What the sans-I/O coordinator core asks its driver to do. Each action that has an outcome is
// answered by calling the matching on_* event of the core.

// -> on_checkpoint_id(request_id, result). May touch disk: the driver runs it off the event
// thread unless the counter says the next id is cheap.
struct allocate_checkpoint_id {
  std::uint64_t request_id = 0;
  bool operator==(const allocate_checkpoint_id&) const = default;
};

// -> on_master_hooks_done(id, result). Hooks are user code and may be slow.
struct snapshot_master_hooks {
  checkpoint_id id = 0;
  std::int64_t timestamp_us = 0;
  bool operator==(const snapshot_master_hooks&) const = default;
};

// -> on_timeout(id) at deadline_us, unless cancel_timeout(id) comes first.
struct arm_timeout {
  checkpoint_id id = 0;
  std::int64_t deadline_us = 0;
  bool operator==(const arm_timeout&) const = default;
};

struct cancel_timeout {
  checkpoint_id id = 0;
  bool operator==(const cancel_timeout&) const = default;
};

// Barrier injection at a source subtask.
struct send_trigger {
  execution_attempt_id attempt;
  checkpoint_id id = 0;
  std::int64_t timestamp_us = 0;
  checkpoint_options options;
  bool operator==(const send_trigger&) const = default;
};

// -> on_metadata_written(id, result). Durable write on the I/O pool.
struct write_metadata {
  completed_checkpoint checkpoint;
  bool operator==(const write_metadata&) const = default;
};

// Fire and forget, on the I/O pool: state files that no checkpoint references any more.
struct discard_state {
  std::vector<state_handle> handles;
  bool operator==(const discard_state&) const = default;
};

// Fire and forget, on the I/O pool: a whole checkpoint folder (subsumed, aborted, or torn).
struct discard_location {
  std::string location;
  std::vector<state_handle> handles;
  bool operator==(const discard_location&) const = default;
};

struct notify_complete {
  execution_attempt_id attempt;
  checkpoint_id id = 0;
  std::int64_t timestamp_us = 0;
  bool operator==(const notify_complete&) const = default;
};

struct notify_abort {
  execution_attempt_id attempt;
  checkpoint_id id = 0;
  checkpoint_id latest_completed_id = 0;  // 0 when none completed yet
  bool operator==(const notify_abort&) const = default;
};

// The periodic trigger should fire next after `delay_us` (a periodic request hit the min pause).
struct reschedule_periodic {
  std::int64_t delay_us = 0;
  bool operator==(const reschedule_periodic&) const = default;
};

// A request that somebody may be waiting on (manual checkpoint, savepoint) has ended.
struct request_finished {
  std::uint64_t request_id = 0;
  checkpoint_trigger_kind kind = checkpoint_trigger_kind::periodic;
  std::optional<checkpoint_id> id;  // set once an id was allocated
  std::optional<checkpoint_failure_reason> failure;  // empty on success
  std::string message;
  std::string location;  // on success: where the checkpoint or savepoint lives
  bool operator==(const request_finished&) const = default;
};

using coordinator_action =
    std::variant<allocate_checkpoint_id, snapshot_master_hooks, arm_timeout, cancel_timeout,
                 send_trigger, write_metadata, discard_state, discard_location, notify_complete,
                 notify_abort, reschedule_periodic, request_finished>;

// Names the action and its checkpoint or request, for test failures and traces.
inline std::ostream& operator<<(std::ostream& os, const coordinator_action& action) {
  std::visit(
      [&os](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, allocate_checkpoint_id>)
          os << "allocate_checkpoint_id{request=" << a.request_id << "}";
        else if constexpr (std::is_same_v<T, snapshot_master_hooks>)
          os << "snapshot_master_hooks{" << a.id << "}";
        else if constexpr (std::is_same_v<T, arm_timeout>)
          os << "arm_timeout{" << a.id << ", deadline_us=" << a.deadline_us << "}";
        else if constexpr (std::is_same_v<T, cancel_timeout>)
          os << "cancel_timeout{" << a.id << "}";
        else if constexpr (std::is_same_v<T, send_trigger>)
          os << "send_trigger{" << a.id << " -> " << a.attempt << "}";
        else if constexpr (std::is_same_v<T, write_metadata>)
          os << "write_metadata{" << a.checkpoint.id << "}";
        else if constexpr (std::is_same_v<T, discard_state>)
          os << "discard_state{" << a.handles.size() << " files}";
        else if constexpr (std::is_same_v<T, discard_location>)
          os << "discard_location{" << a.location << "}";
        else if constexpr (std::is_same_v<T, notify_complete>)
          os << "notify_complete{" << a.id << " -> " << a.attempt << "}";
        else if constexpr (std::is_same_v<T, notify_abort>)
          os << "notify_abort{" << a.id << " -> " << a.attempt << ", latest=" << a.latest_completed_id
             << "}";
        else if constexpr (std::is_same_v<T, reschedule_periodic>)
          os << "reschedule_periodic{" << a.delay_us << " us}";
        else if constexpr (std::is_same_v<T, request_finished>)
          os << "request_finished{request=" << a.request_id << ", "
             << (a.failure ? std::string(to_string(*a.failure)) : std::string("ok")) << "}";
      },
      action);
  return os;
}

}  // namespace snapflow
