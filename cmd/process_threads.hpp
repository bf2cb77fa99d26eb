#pragma once

#include <sys/types.h>

#include <functional>

#include "common/result.hpp"

namespace snapflow {

// Calls `apply` with the id of every thread of this process (from /proc/self/task), stopping at
// the first error. Settings made per thread with a system call (CPU affinity, scheduling
// policy) must reach the threads a process started already, a custom worker's own say; the
// threads started later inherit them from their creator. Without /proc, `apply` gets 0 once:
// the calling thread. A thread that ended meanwhile is the caller's to skip (ESRCH).
result<void> for_each_thread_of_this_process(const std::function<result<void>(pid_t)>& apply);

}  // namespace snapflow
