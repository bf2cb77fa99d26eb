#pragma once

#include <cstdint>
#include <optional>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/deployment/task_deployment.hpp"
#include "engine/deployment/task_io_metrics.hpp"
#include "graph/execution_vertex.hpp"
#include "transport/messages.hpp"

// Engine structs <-> wire structs. The engine keeps microseconds and enums; the wire keeps what
// docs/protocol.md says (milliseconds since the epoch for trigger timestamps, names for failure
// reasons), so every conversion that loses or guesses something is here, in one place.
namespace snapflow::transport {

wire::deploy_task to_wire(const task_deployment_descriptor& d);
task_deployment_descriptor from_wire(const wire::deploy_task& m);

// The trigger timestamp travels in milliseconds (the protocol's unit); the worker hands
// timestamp_ms * 1000 to its tasks, so sub-millisecond digits are lost on the way.
wire::trigger_checkpoint to_wire(const job_id& job, const execution_attempt_id& attempt,
                                 checkpoint_id id, std::int64_t timestamp_us,
                                 const checkpoint_options& options);
// Savepoints come back as kind savepoint; periodic and manual checkpoints look alike on the
// wire and come back as periodic (tasks treat them the same).
// The same into `m` (every field set), whose strings keep their room: a sender that keeps one
// trigger allocates nothing per trigger.
void to_wire(const job_id& job, const execution_attempt_id& attempt, checkpoint_id id,
             std::int64_t timestamp_us, const checkpoint_options& options,
             wire::trigger_checkpoint& m);
checkpoint_options options_from_wire(const wire::trigger_checkpoint& m);
std::int64_t timestamp_us_from_wire(const wire::trigger_checkpoint& m);

// Notifications beyond max_notified_per_report in one entry: only the newest are kept.
wire::task_io to_wire(const task_io_counters& counters);
task_io_counters from_wire(const wire::task_io& m);

wire::acknowledge_checkpoint to_wire(const checkpoint_ack& ack);
// The same into `m` (every field set), keeping the room of its strings.
void to_wire(const checkpoint_ack& ack, wire::acknowledge_checkpoint& m);
checkpoint_ack from_wire(const wire::acknowledge_checkpoint& m);
// The same, taking the strings over (an acknowledgement just decoded is not needed after).
checkpoint_ack from_wire(wire::acknowledge_checkpoint&& m);

wire::decline_checkpoint to_wire(const checkpoint_decline& decline);
// A reason name this build does not know becomes checkpoint_declined (docs/protocol.md).
checkpoint_decline from_wire(const wire::decline_checkpoint& m);

// States the wire has no name for (created, scheduled, canceling) are not reported: nothing.
// initializing is reported as deploying.
std::optional<wire::task_state> to_wire(execution_state state);
execution_state from_wire(wire::task_state state);

}  // namespace snapflow::transport
