#include "cmd/cpu_affinity.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <initializer_list>
#include <string>

#include "cmd/process_threads.hpp"

namespace snapflow {

namespace {

// Joins the pieces with append: `"literal" + std::string(...)` trips GCC 12's -Wrestrict false
// positive (GCC bug 105651) in Release builds.
std::string join(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view piece : pieces) out.append(piece);
  return out;
}

result<int> parse_cpu(std::string_view text, std::string_view whole) {
  int cpu = -1;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, cpu);
  if (text.empty() || ec != std::errc{} || ptr != end || cpu < 0)
    return error{join({"'", whole, "' is not a CPU list (like 0-3,6): '", text,
                       "' is not a CPU number"})};
  if (cpu >= CPU_SETSIZE)
    return error{join({"CPU ", text, " in '", whole,
                       "' is beyond the largest CPU number this system supports (",
                       std::to_string(CPU_SETSIZE - 1), ")"})};
  return cpu;
}

}  // namespace

result<std::vector<int>> parse_cpu_list(std::string_view text) {
  if (text.empty()) return error{"the CPU list is empty (expected something like 0-3,6)"};
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    const auto item = text.substr(start, comma - start);
    const auto dash = item.find('-');
    auto first = parse_cpu(item.substr(0, dash), text);
    if (!first) return first.err();
    int last = *first;
    if (dash != std::string_view::npos) {
      auto parsed = parse_cpu(item.substr(dash + 1), text);
      if (!parsed) return parsed.err();
      last = *parsed;
      if (last < *first)
        return error{join({"'", item, "' in '", text, "' is a range that goes down"})};
    }
    for (int cpu = *first; cpu <= last; ++cpu) out.push_back(cpu);
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> cpu_share(const std::vector<int>& cpus, int workers, int index) {
  if (cpus.empty() || workers <= 0 || index < 0 || index >= workers) return {};
  const auto n = cpus.size();
  const auto w = static_cast<std::size_t>(workers);
  const auto i = static_cast<std::size_t>(index);
  if (n < w) return {cpus[i % n]};
  const std::size_t base = n / w, extra = n % w;
  const std::size_t first = i * base + std::min(i, extra);
  const std::size_t count = base + (i < extra ? 1 : 0);
  return {cpus.begin() + static_cast<std::ptrdiff_t>(first),
          cpus.begin() + static_cast<std::ptrdiff_t>(first + count)};
}

result<std::vector<int>> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)
    return error{std::string("cannot read this process's CPU affinity: ") +
                 std::strerror(errno)};
  std::vector<int> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  return out;
}

result<void> pin_process_to(const std::vector<int>& cpus) {
  if (cpus.empty()) return error{"no CPU to run on"};
  auto allowed = allowed_cpus();
  if (!allowed) return allowed.err();
  std::vector<int> refused;
  for (int cpu : cpus)
    if (!std::binary_search(allowed->begin(), allowed->end(), cpu)) refused.push_back(cpu);
  if (!refused.empty())
    return error{"CPU " + format_cpu_list(refused) + " is not available to this process " +
                 "(it may use " + format_cpu_list(*allowed) + ")"};
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  // sched_setaffinity(0) moves only the calling thread; threads started before this call (a
  // custom worker's own, say) are moved one by one, so the whole process ends up placed.
  return for_each_thread_of_this_process([&](pid_t tid) -> result<void> {
    if (::sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH)
      return error{"cannot place thread " + std::to_string(tid) + " on CPU " +
                   format_cpu_list(cpus) + ": " + std::strerror(errno)};
    return {};
  });
}

result<std::vector<int>> apply_cpus_option(std::string_view list) {
  auto cpus = parse_cpu_list(list);
  if (!cpus) return cpus.err();
  if (auto pinned = pin_process_to(*cpus); !pinned) return pinned.err();
  return cpus;
}

}  // namespace snapflow
