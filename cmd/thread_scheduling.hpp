#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace snapflow {

// The Linux scheduling policy of a whole process (`--scheduling` of snapflow-worker).
//
// A worker's threads pass each checkpoint along a chain of hand-offs: ZeroMQ's I/O thread, the
// control thread, the task threads, the data plane's thread. With the default policy every
// wake-up of the next thread preempts the waking one, so on a busy CPU the chain runs as many
// short slices with a context switch between each. SCHED_BATCH (sched(7)) is the same fair
// scheduler at the same nice value without that wake-up preemption: a woken thread waits for
// the running one to block or use up its slice. The chain then runs in fewer, longer slices,
// which measured ~12-16% lower checkpoint p50 and no lower throughput on the benchmark
// machines (docs/benchmarks.md, "CPU placement and scheduling policy"); the raw floor probe is
// not faster with it.
enum class scheduling_policy {
  normal,  // SCHED_OTHER
  batch,   // SCHED_BATCH
};

// "normal" or "batch".
result<scheduling_policy> parse_scheduling_policy(std::string_view text);
// SCHED_OTHER or SCHED_BATCH (for ZeroMQ's ZMQ_THREAD_SCHED_POLICY, which sets it on the I/O
// threads of one context).
int linux_policy(scheduling_policy policy);
std::string_view to_string(scheduling_policy policy);
// For an option parser's check (CLI11's ->check): empty when `text` names a policy, else why not.
std::string scheduling_policy_check(const std::string& text);

// Sets `policy` (at static priority 0, nice unchanged) on every thread of this process; threads
// started later inherit it. Call it before the process starts its threads. Needs no privilege.
result<void> apply_scheduling_policy(scheduling_policy policy);

// The policy of thread `tid` (0: the calling thread); nothing when it is neither of the two
// (a real-time policy set from outside) or the thread is gone.
std::optional<scheduling_policy> thread_scheduling_policy(pid_t tid);

}  // namespace snapflow
