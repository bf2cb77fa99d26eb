// What one hand-off between threads costs on this machine: a thread blocked on a condition
// variable is notified after an idle gap, and the probe measures notify -> running. It runs
// with the waiter pinned to the notifier's CPU, pinned to another CPU, and unpinned.
//
// Why it exists: on a virtual machine whose idle vCPUs halt (no guest halt-polling), waking a
// thread on an idle vCPU goes through the hypervisor, which costs several times a wake-up on
// the notifier's own vCPU. Each hand-off on snapflow's checkpoint path (control thread -> task
// thread, ...) is one such wake-up plus any wait for a CPU, so bench/run-comparison prints
// these numbers beside its tables as the machine's baseline (docs/benchmarks.md, "The machine":
// in the cluster the wait, not the wake-up, turned out to dominate).
//
//   wake_probe [--gap-us G] [--rounds N] [--json]
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct result {
  std::string placement;
  double p50 = 0, p90 = 0, p99 = 0;
};

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

double at(const std::vector<double>& sorted, double q) {
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()))];
}

// The notifier runs on `notifier_cpu` (if any), the waiter on `waiter_cpu` (if any).
std::optional<result> measure(const std::string& placement, std::optional<int> notifier_cpu,
                              std::optional<int> waiter_cpu, int rounds, int gap_us) {
  std::mutex mutex;
  std::condition_variable cv;
  int pending = 0;  // notifications not yet taken (a count: none is ever merged)
  clock_type::time_point sent;
  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(rounds));
  bool pinned = true;
  std::thread waiter([&] {
    if (waiter_cpu && !pin_to(*waiter_cpu)) pinned = false;
    for (int i = 0; i < rounds; ++i) {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return pending > 0; });
      --pending;
      latencies.push_back(
          std::chrono::duration<double, std::micro>(clock_type::now() - sent).count());
    }
  });
  std::thread notifier([&] {
    if (notifier_cpu && !pin_to(*notifier_cpu)) pinned = false;
    for (int i = 0; i < rounds; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      {
        std::lock_guard lock(mutex);
        ++pending;
        sent = clock_type::now();
      }
      cv.notify_one();
    }
  });
  notifier.join();
  waiter.join();
  if (!pinned || latencies.empty()) return std::nullopt;
  std::sort(latencies.begin(), latencies.end());
  return result{placement, at(latencies, 0.5), at(latencies, 0.9), at(latencies, 0.99)};
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "wake_probe: %s\nusage: wake_probe [--gap-us G] [--rounds N] [--json]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int gap_us = 1000;
  int rounds = 1000;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> int {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v <= 0 || v > 10'000'000) usage(("bad value for " + arg).c_str());
      return static_cast<int>(v);
    };
    if (arg == "--gap-us") {
      gap_us = value();
    } else if (arg == "--rounds") {
      rounds = value();
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "-h" || arg == "--help") {
      std::printf("usage: wake_probe [--gap-us G] [--rounds N] [--json]\n");
      return 0;
    } else {
      usage(("unknown argument " + arg).c_str());
    }
  }

  std::vector<result> results;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  if (auto r = measure("same cpu", 0, 0, rounds, gap_us)) results.push_back(*r);
  if (cpus > 1) {
    if (auto r = measure("other cpu", 0, 1, rounds, gap_us)) results.push_back(*r);
  }
  if (auto r = measure("unpinned", std::nullopt, std::nullopt, rounds, gap_us))
    results.push_back(*r);
  if (results.empty()) {
    std::fprintf(stderr, "wake_probe: could not pin threads to CPUs\n");
    return 1;
  }

  if (json) {
    std::printf("{\"gap_us\": %d, \"rounds\": %d, \"cpus\": %u, \"wake_us\": {", gap_us, rounds,
                cpus);
    for (std::size_t i = 0; i < results.size(); ++i)
      std::printf("%s\"%s\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f}", i ? ", " : "",
                  results[i].placement.c_str(), results[i].p50, results[i].p90, results[i].p99);
    std::printf("}}\n");
    return 0;
  }
  std::printf("thread wake-up after a %d us idle gap, %d rounds (microseconds)\n", gap_us,
              rounds);
  std::printf("%-10s %8s %8s %8s\n", "waiter", "p50", "p90", "p99");
  for (const auto& r : results)
    std::printf("%-10s %8.1f %8.1f %8.1f\n", r.placement.c_str(), r.p50, r.p90, r.p99);
  return 0;
}
