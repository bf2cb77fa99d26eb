#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/cluster/cluster_support.hpp"

// Helpers for tests that run a user program (cmd/program.hpp) on a coordinator: its workers, its
// submission and its fingerprint, each with the program's `--arg KEY=VALUE` settings.
namespace snapflow::testing {

// `program worker` with `slots` slots, test heartbeat intervals, a worker lost after
// `heartbeat_timeout` ms of silence, the test data root and the program's settings `args`.
std::unique_ptr<child_process> start_program_worker(const std::string& program,
                                                    const std::string& control,
                                                    const std::string& id,
                                                    const std::vector<std::string>& args,
                                                    int heartbeat_timeout, int slots = 2);

// `program submit` to the coordinator's REST API: the job id it prints. Fails the test (with
// the program's output) when it exits non-zero or prints no job id.
std::string submit_program(const std::string& program, const coordinator_process& coordinator,
                           const std::vector<std::string>& args);

// `program fingerprint` for the settings `args`; fails the test when it does not exit 0.
std::string program_fingerprint_of(const std::string& program,
                                   const std::vector<std::string>& args);

}  // namespace snapflow::testing
