#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace snapflow::sim {

// A deliberate bug planted in the simulated world, so tests can show the invariants catch one.
enum class sim_sabotage : std::uint8_t {
  none,
  sink_commits_at_pre_commit,  // the sink commits at the barrier instead of on notify-complete
  metadata_durable_late,       // the write reports success before the metadata is durable
};

struct sim_options {
  std::uint64_t seed = 1;
  // Prints every step to stderr (for replaying one seed).
  bool verbose = false;
  // Hard bound per run; a run that has not ended by then fails as a liveness violation.
  std::uint64_t max_steps = 200'000;
  // How many of the last steps a failure report shows.
  std::size_t trace_length = 60;
  sim_sabotage sabotage = sim_sabotage::none;
};

// What a run did, to show that the faults were exercised. Summable over runs.
struct sim_counters {
  std::uint64_t runs = 0;
  std::uint64_t steps = 0;
  std::uint64_t control_messages = 0;
  std::uint64_t dropped = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t delayed = 0;
  std::uint64_t stale_deliveries = 0;  // a message for an attempt or coordinator that is gone
  // A message of one coordinator incarnation delivered to a task another one deployed (attempt
  // numbers restart with each incarnation, and workers route by attempt).
  std::uint64_t cross_incarnation_deliveries = 0;
  std::uint64_t checkpoints_started = 0;
  std::uint64_t checkpoints_completed = 0;
  std::uint64_t checkpoints_failed = 0;
  std::uint64_t savepoints_completed = 0;
  std::uint64_t acks = 0;
  std::uint64_t declines = 0;
  std::uint64_t metadata_writes = 0;
  std::uint64_t metadata_write_failures = 0;
  std::uint64_t slow_writes = 0;
  std::uint64_t counter_persist_failures = 0;
  std::uint64_t hook_failures = 0;
  std::uint64_t worker_crashes = 0;
  std::uint64_t coordinator_crashes = 0;
  std::uint64_t writes_landed_in_crash = 0;  // in-flight metadata writes a crash made durable
  std::uint64_t task_failures = 0;
  std::uint64_t failovers = 0;
  std::uint64_t restores = 0;
  std::uint64_t restores_from_checkpoint = 0;
  // From a checkpoint no coordinator had declared complete: its metadata became durable in a
  // crash, or after a write was reported failed.
  std::uint64_t restores_from_undeclared = 0;
  std::uint64_t unaligned_snapshots = 0;    // subtask snapshots taken unaligned
  std::uint64_t switched_to_unaligned = 0;  // of them, after the aligned timeout
  std::uint64_t records_emitted = 0;
  std::uint64_t records_committed = 0;

  sim_counters& operator+=(const sim_counters& other);
};

std::ostream& operator<<(std::ostream& os, const sim_counters& c);

struct sim_result {
  std::uint64_t seed = 0;
  bool ok = true;
  std::uint64_t step = 0;  // of the violation
  std::string violation;
  // The seed, the configuration, the violation and the last steps: what to print on failure.
  std::string report;
  std::string config;  // one line: topology, checkpoint settings, fault rates
  sim_counters counters;
  std::int64_t simulated_us = 0;
};

// A deterministic simulation of the checkpoint protocol (after FoundationDB's simulation and
// TigerBeetle's VOPR): the real checkpoint_coordinator_core, stepped with simulated time, a job
// master that fails over and restores like engine/jobmaster/job_master, simulated subtasks
// (sources, a middle stage, two-phase-commit sinks) joined by data channels, a control network
// that drops, delays, duplicates and reorders, storage with slow and failing writes, crashes of
// workers and of the coordinator. Invariants are checked after every step; the run ends with a
// quiet period without faults in which the job must complete a checkpoint, after which the
// sinks' committed output must be exactly the records that checkpoint covers, each once (but
// for those it persisted as in flight, an unaligned checkpoint's channel state, which the next
// checkpoint commits).
//
// One seed is one run: everything random comes from the seed, and nothing reads a clock or
// iterates a hash container, so a failing seed replays exactly.
class simulator {
 public:
  explicit simulator(sim_options options);
  ~simulator();
  simulator(const simulator&) = delete;
  simulator& operator=(const simulator&) = delete;

  sim_result run();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Runs one seed.
sim_result run_simulation(const sim_options& options);

// SNAPFLOW_SIM_SEED from the environment, if set to a number.
std::optional<std::uint64_t> seed_from_environment();

}  // namespace snapflow::sim
