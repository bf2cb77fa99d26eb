#pragma once

namespace snapflow::bench {

// The whole machine's CPU time from /proc/stat, kernel threads and interrupts included: a job's
// own CPU misses work it causes elsewhere (file system journal, block-device completions, page
// write-back), and idle time shows whether the job waited rather than worked.
struct machine_cpu {
  double busy = 0;   // user, nice, system, irq, softirq
  double idle = 0;   // idle and iowait
  double steal = 0;  // taken by the hypervisor for other guests

  // Zero when /proc/stat cannot be read (the machine columns then read 0).
  static machine_cpu now();

  machine_cpu operator-(const machine_cpu& o) const {
    return {busy - o.busy, idle - o.idle, steal - o.steal};
  }
  double total() const { return busy + idle + steal; }
  double idle_share() const { return total() > 0 ? idle / total() : 0; }
  double steal_share() const { return total() > 0 ? steal / total() : 0; }
};

}  // namespace snapflow::bench
