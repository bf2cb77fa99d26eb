#pragma once

#include <string_view>

namespace snapflow {

// Names the calling thread for the system's tools (top -H, perf, /proc/<pid>/task/<tid>/comm,
// bench/hop-report's timelines): "task 2.3" is subtask 3 of vertex 2, "source 1.0" a source
// subtask, "data plane" a worker's data plane. Linux keeps the first 15 bytes; a failure is
// ignored (a name is a convenience, never a reason to stop a task).
void name_this_thread(std::string_view name);

}  // namespace snapflow
