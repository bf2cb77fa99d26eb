#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "common/result.hpp"
#include "graph/checkpoint_config.hpp"
#include "graph/job_graph.hpp"

// The msgpack form of a job graph and of a checkpoint configuration: what a job submission
// carries over the wire. Every record is a map with string keys so fields can be added: a
// decoder ignores keys it does not know. Fields present since the first version are required;
// a field added later must be optional with a default so older senders still decode.
// The encoding (integers are msgpack's smallest fitting form):
//
//   job_graph        {id: str, name: str, vertices: [vertex], edges: [edge],
//                     checkpointing: nil | settings, restart?: restart}
//   vertex           {id: u32, name: str, uid: str, kind: str, params: {str: str},
//                     parallelism: u32, max_parallelism: u32}
//   edge             {source: u32, target: u32, partitioning: u8 (0 forward, 1 hash,
//                     2 rebalance, 3 broadcast)}
//   settings         {to_trigger: [u32], to_acknowledge: [u32], to_confirm: [u32],
//                     config: checkpoint_config}
//   checkpoint_config {interval_ms: i64 | nil, timeout_ms: i64, min_pause_ms: i64,
//                     max_concurrent: i32, tolerable_failures: i32,
//                     mode: u8 (0 exactly_once, 1 at_least_once), unaligned: bool,
//                     retained: i32, retention: u8 (0 delete_on_cancellation,
//                     1 retain_on_cancellation), checkpoint_dir: str, savepoint_dir: str,
//                     stats_history_size: i32, state_backend: str,
//                     [inline_state_max_bytes: i32], [incremental: bool],
//                     [aligned_checkpoint_timeout_ms: i64], [max_in_flight_bytes: i64],
//                     [buffer_debloat: bool, buffer_debloat_target_ms: i64]}
//   (the bracketed keys were added later: written only when not the default, absent or nil
//   keeps the default)
//   restart          {strategy: u8 (0 none, 1 fixed_delay, 2 exponential_backoff,
//                     3 failure_rate), max_attempts: i32, delay_ms: i64,
//                     initial_backoff_ms: i64, max_backoff_ms: i64,
//                     backoff_multiplier: f64 (any finite number), reset_backoff_after_ms: i64,
//                     max_failures_per_interval: i32, failure_rate_interval_ms: i64}
//
// `restart` was added later: it is written only when the job sets its own strategy, and a
// graph without it (older senders, jobs persisted before) decodes with the coordinator's
// default. Its ranges are checked by validate(), not by the decoder.
//
// A vertex's C++ callable (job_vertex::function) is never encoded: it only exists in the
// process that declared it.

namespace snapflow {

// Limits for msgpack::unpack sized to a frame of `bytes` bytes: no container may declare more
// elements, and no string more bytes, than the frame could hold, so a forged length cannot make
// the unpacker reserve gigabytes. Nesting is capped at max_decode_depth levels (a job graph
// needs 4).
inline constexpr std::size_t max_decode_depth = 8;
msgpack::unpack_limit unpack_limit_for(std::size_t bytes);

// Bytes in, bytes out. The decoders never throw: malformed, truncated or oversized input, wrong
// field types, out-of-range numbers and enums, and references to unknown vertex ids all become
// errors. They do not check operator kinds or graph shape: callers run validate() with their
// operator registry.
std::string encode_job_graph(const job_graph& graph);
result<job_graph> decode_job_graph(std::string_view bytes);

std::string encode_checkpoint_config(const checkpoint_config& config);
result<checkpoint_config> decode_checkpoint_config(std::string_view bytes);

// The same encodings as one value inside a larger message (the transport's envelopes). The
// `read_` functions take an object already unpacked with unpack_limit_for() and never throw.
void pack_job_graph(msgpack::packer<msgpack::sbuffer>& packer, const job_graph& graph);
result<job_graph> read_job_graph(const msgpack::object& object);

void pack_checkpoint_config(msgpack::packer<msgpack::sbuffer>& packer,
                            const checkpoint_config& config);
result<checkpoint_config> read_checkpoint_config(const msgpack::object& object);

}  // namespace snapflow
