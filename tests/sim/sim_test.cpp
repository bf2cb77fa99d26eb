// The deterministic simulation of the checkpoint protocol (tests/sim/README.md): many seeds
// with faults, every invariant checked after every step. A failing seed prints its report;
// SNAPFLOW_SIM_SEED=<n> runs only that seed (SNAPFLOW_SIM_VERBOSE=1 prints every step).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tests/sim/simulator.hpp"

using namespace snapflow::sim;

namespace {

struct batch {
  sim_counters counters;
  std::vector<sim_result> failures;
};

batch run_seeds(std::uint64_t first, std::uint64_t count) {
  batch b;
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    sim_options o;
    o.seed = seed;
    sim_result r = run_simulation(o);
    b.counters += r.counters;
    if (!r.ok) b.failures.push_back(std::move(r));
  }
  return b;
}

// Prints the first few failures in full, so the seed and its trace are in the test log.
void require_no_failures(const batch& b) {
  for (std::size_t i = 0; i < b.failures.size() && i < 3; ++i)
    std::cerr << b.failures[i].report << "\n";
  if (!b.failures.empty()) {
    std::string seeds;
    for (const auto& f : b.failures) seeds += " " + std::to_string(f.seed);
    FAIL(b.failures.size() << " seed(s) failed:" << seeds);
  }
}

}  // namespace

TEST_CASE("simulation: a thousand seeds keep every invariant and end exactly-once") {
  if (auto seed = seed_from_environment()) {
    sim_options o;
    o.seed = *seed;
    const char* verbose = std::getenv("SNAPFLOW_SIM_VERBOSE");
    o.verbose = verbose != nullptr && std::string(verbose) == "1";
    sim_result r = run_simulation(o);
    std::cerr << "seed " << *seed << ": " << (r.ok ? "ok" : "FAILED") << "\n  config: " << r.config
              << "\n  " << r.counters << "\n";
    if (!r.ok) std::cerr << r.report << "\n";
    REQUIRE(r.ok);
    return;
  }
  const batch b = run_seeds(1, 1000);
  require_no_failures(b);
  // Every run ends with a checkpoint taken without faults, so each must have committed data.
  CHECK(b.counters.checkpoints_completed >= b.counters.runs);
  CHECK(b.counters.records_committed > 0);
}

TEST_CASE("simulation: the seeded faults are actually exercised") {
  // A fixed range of seeds, separate from the big run, so this stays quick and stable.
  const batch b = run_seeds(5000, 120);
  require_no_failures(b);
  const sim_counters& c = b.counters;
  INFO(c);
  CHECK(c.dropped > 0);
  CHECK(c.duplicated > 0);
  CHECK(c.delayed > 0);
  CHECK(c.stale_deliveries > 0);
  CHECK(c.cross_incarnation_deliveries > 0);
  CHECK(c.declines > 0);
  CHECK(c.metadata_write_failures > 0);
  CHECK(c.slow_writes > 0);
  CHECK(c.counter_persist_failures > 0);
  CHECK(c.hook_failures > 0);
  CHECK(c.worker_crashes > 0);
  CHECK(c.coordinator_crashes > 0);
  CHECK(c.writes_landed_in_crash > 0);
  CHECK(c.task_failures > 0);
  CHECK(c.failovers > 0);
  CHECK(c.restores_from_checkpoint > 0);
  CHECK(c.restores_from_undeclared > 0);
  CHECK(c.savepoints_completed > 0);
  CHECK(c.checkpoints_failed > 0);
  CHECK(c.checkpoints_completed > c.runs);
  // Barriers overtaking records, and alignments switched to unaligned by their timeout.
  CHECK(c.unaligned_snapshots > 0);
  CHECK(c.switched_to_unaligned > 0);
}

TEST_CASE("simulation: a seed replays exactly") {
  for (std::uint64_t seed : {7u, 1234u, 99991u}) {
    sim_options o;
    o.seed = seed;
    const sim_result a = run_simulation(o);
    const sim_result b = run_simulation(o);
    CHECK(a.ok == b.ok);
    CHECK(a.step == b.step);
    CHECK(a.simulated_us == b.simulated_us);
    CHECK(a.config == b.config);
    CHECK(a.counters.control_messages == b.counters.control_messages);
    CHECK(a.counters.dropped == b.counters.dropped);
    CHECK(a.counters.checkpoints_completed == b.counters.checkpoints_completed);
    CHECK(a.counters.records_committed == b.counters.records_committed);
  }
}

TEST_CASE("simulation: a sink that commits at pre-commit is caught") {
  // Shows the exactly-once check bites: committing before the checkpoint completes lets a
  // restore replay records that are already out.
  bool caught = false;
  for (std::uint64_t seed = 1; seed <= 20 && !caught; ++seed) {
    sim_options o;
    o.seed = seed;
    o.sabotage = sim_sabotage::sink_commits_at_pre_commit;
    const sim_result r = run_simulation(o);
    if (r.ok) continue;
    caught = true;
    CHECK_THAT(r.violation, Catch::Contains("beyond what the latest completed checkpoint"));
    CHECK_THAT(r.report, Catch::Contains("seed " + std::to_string(seed)));
    CHECK_THAT(r.report, Catch::Contains("last steps"));
  }
  CHECK(caught);
}

TEST_CASE("simulation: completing before the metadata is durable is caught") {
  sim_options o;
  o.seed = 3;
  o.sabotage = sim_sabotage::metadata_durable_late;
  const sim_result r = run_simulation(o);
  REQUIRE_FALSE(r.ok);
  // Whichever comes first: the notification or the completion itself.
  CHECK_THAT(r.violation, Catch::Contains("before its metadata"));
}
