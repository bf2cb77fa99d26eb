#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace snapflow::hop_trace {

// Timestamps at every thread and process hand-off on the checkpoint path, for finding where a
// checkpoint's time goes (docs/benchmarks.md, "Where a checkpoint's time goes";
// bench/hop-report reads them). Off unless the environment variable SNAPFLOW_HOP_TRACE names a
// folder when the process starts (made if missing); then every process appends lines
//   <CLOCK_MONOTONIC microseconds> <thread id> <event> <value>
// to <folder>/hops-<pid>.txt. CLOCK_MONOTONIC is one clock for every process on a machine, so
// the files of a local cluster line up. Off, a record costs one load and branch; on, one
// formatted write and one write system call under a process-wide mutex, a few microseconds
// (diagnostics, not production).
//
// Events (value in brackets):
//   coordinator   c.trigger [checkpoint]     the core asked for a trigger to one subtask
//                 c.all_acked [checkpoint]    every subtask acknowledged: _metadata is next
//                 c.durable [checkpoint]      _metadata written on the event thread (inline)
//                 c.send [frame bytes]        a frame handed to the coordinator's socket
//                 c.frame [frame bytes]       a frame read from a worker
//   worker        w.trigger [checkpoint]      a trigger (or trigger batch) decoded on the
//                                             control thread
//                 w.post_trigger [checkpoint] a trigger put in a task's mailbox
//                 w.post_flush [0]            a task thread asked the control thread to send
//                 w.flush [0]                 the control thread took the task reports
//                 w.send_acks [acks]          an acknowledgement frame handed to the socket
//                 w.direct_ack [1]            a task thread put its acknowledgement on the
//                                             socket itself (no control-thread hop)
//   data plane    d.send [1]                  a batch ending in a barrier handed to a
//                                             data-plane socket (task or control thread)
//                 d.recv [1]                  the data plane's I/O thread received one
//   task          t.trigger [checkpoint]      a source's task thread took the trigger
//                 t.barrier [vertex]          a task took a barrier from one of its inputs
//                 t.snapshot [vertex]         a task starts its snapshot (barriers aligned)
//                 t.ack [vertex]              a task hands its acknowledgement on
bool enabled();

namespace detail {
// False once this process knows tracing is off (the environment read, no start()): then a
// record is one relaxed load and a branch, inlined where it is called, with no call at all.
// True until then, and while tracing.
extern std::atomic<bool> may_trace;
void record_traced(const char* event, std::int64_t value);
}  // namespace detail

inline void record(const char* event, std::int64_t value) {
  if (detail::may_trace.load(std::memory_order_relaxed)) detail::record_traced(event, value);
}

// Tracing into `folder` from now on, whatever the environment said (tests, tools); the error
// when the file cannot be opened. stop() ends tracing in this process.
std::optional<std::string> start(const std::string& folder);
void stop();

}  // namespace snapflow::hop_trace
