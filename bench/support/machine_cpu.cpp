#include "bench/support/machine_cpu.hpp"

#include <fstream>
#include <string>

#include <unistd.h>

namespace snapflow::bench {

machine_cpu machine_cpu::now() {
  machine_cpu m;
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) ||
      cpu != "cpu")
    return m;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  m.busy = (user + nice + system + irq + softirq) / tick;
  m.idle = (idle + iowait) / tick;
  m.steal = steal / tick;
  return m;
}

}  // namespace snapflow::bench
