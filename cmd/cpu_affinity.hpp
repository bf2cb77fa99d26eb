#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace snapflow {

// Places a whole process on a set of CPUs (`--cpus` of snapflow-worker and
// snapflow-coordinator). A worker's threads hand work to each other several times per
// checkpoint (control thread, task threads, data plane, ZeroMQ's I/O threads); a hand-off to a
// thread on another CPU costs a cross-CPU wake-up, which on a VM is tens of microseconds
// (bench/wake_probe), while one on the same CPU costs a few. Keeping each worker on its own
// CPUs makes most hand-offs local (docs/benchmarks.md, "CPU placement and scheduling policy").

// Parses a Linux CPU list: "3", "0-3", "0,2,4-7". Numbers are CPU indexes below CPU_SETSIZE;
// ranges go up; duplicates are merged. Returns the CPUs in increasing order.
result<std::vector<int>> parse_cpu_list(std::string_view text);

// "0-3,6": the shortest list form of `cpus` (increasing, no duplicates).
std::string format_cpu_list(const std::vector<int>& cpus);

// The CPUs this process may use now (its affinity mask: cgroups, taskset and the like).
result<std::vector<int>> allowed_cpus();

// The share of `cpus` for worker `index` of `workers` placed side by side (`snapflow local
// --pin-workers`): contiguous and as even as possible when there are at least as many CPUs as
// workers (the first ones get one more when they do not divide), else CPU index mod the count.
std::vector<int> cpu_share(const std::vector<int>& cpus, int workers, int index);

// Restricts every thread of this process, and so every thread it starts later, to `cpus`.
// Each must be among allowed_cpus(); the error says which are not and which are. Call it
// before the process starts its threads: the ZeroMQ I/O threads and the task threads then
// inherit it.
result<void> pin_process_to(const std::vector<int>& cpus);

// What `--cpus LIST` does: parse_cpu_list, then pin_process_to. Returns the CPUs placed on.
result<std::vector<int>> apply_cpus_option(std::string_view list);

}  // namespace snapflow
