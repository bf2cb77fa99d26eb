// Runs the checkpoint protocol simulation over any number of seeds (tests/sim/simulator.hpp):
//   sim_runner --seeds N [--start S]   seeds S .. S+N-1 (S defaults to 1)
//   sim_runner --seed X [--verbose]    one seed, optionally printing every step
// Prints every failure's report and a summary; exits 1 if any seed failed.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/sim/simulator.hpp"

namespace {

int usage(const char* why) {
  std::cerr << "sim_runner: " << why
            << "\nusage: sim_runner --seeds N [--start S] [--max-failures F]\n"
               "       sim_runner --seed X [--verbose]\n";
  return 2;
}

bool parse_u64(const char* text, std::uint64_t& out) {
  char* end = nullptr;
  out = std::strtoull(text, &end, 10);
  return end != text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seeds = 100;
  std::uint64_t start = 1;
  std::uint64_t max_printed = 5;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::uint64_t& out) { return i + 1 < argc && parse_u64(argv[++i], out); };
    if (arg == "--seeds") {
      if (!value(seeds)) return usage("--seeds needs a number");
    } else if (arg == "--start") {
      if (!value(start)) return usage("--start needs a number");
    } else if (arg == "--seed") {
      if (!value(start)) return usage("--seed needs a number");
      seeds = 1;
    } else if (arg == "--max-failures") {
      if (!value(max_printed)) return usage("--max-failures needs a number");
    } else if (arg == "--verbose") {
      verbose = true;
    } else {
      return usage("unknown argument");
    }
  }

  snapflow::sim::sim_counters total;
  std::vector<std::uint64_t> failed;
  const auto began = std::chrono::steady_clock::now();
  for (std::uint64_t seed = start; seed < start + seeds; ++seed) {
    snapflow::sim::sim_options o;
    o.seed = seed;
    o.verbose = verbose;
    const snapflow::sim::sim_result r = snapflow::sim::run_simulation(o);
    total += r.counters;
    if (seeds == 1) std::cout << "seed " << seed << "\n  config: " << r.config << "\n";
    if (r.ok) continue;
    failed.push_back(seed);
    if (failed.size() <= max_printed) std::cout << r.report << "\n";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();

  std::cout << "seeds " << start << ".." << start + seeds - 1 << ": " << seeds - failed.size()
            << " passed, " << failed.size() << " failed in " << seconds << " s ("
            << static_cast<double>(seeds) / seconds << " seeds/s)\n  " << total << "\n";
  if (!failed.empty()) {
    std::cout << "failing seeds:";
    for (std::uint64_t s : failed) std::cout << " " << s;
    std::cout << "\n";
  }
  return failed.empty() ? 0 : 1;
}
