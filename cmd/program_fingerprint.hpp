#pragma once

#include <string>
#include <string_view>

#include "graph/job_graph.hpp"

namespace snapflow {

// The fingerprint of a user program's job (docs/api.md, "Running a program on a cluster"):
// SHA-256, in lowercase hex, of the program's name and what of the graph decides which callable
// runs where: every vertex's uid, kind, role, parallelism, max parallelism and parameters, and
// every edge (its ends by uid, its partitioning). The job's name, id, checkpointing and restart
// settings are left out (they may change between runs without touching a callable), and so are
// vertex ids (a job file numbers vertices afresh). Equal graphs give equal fingerprints in every
// process and build: a worker started from the same program with the same arguments carries the
// fingerprint of the job the program submits.
std::string program_fingerprint(const job_graph& graph, std::string_view program_name);

}  // namespace snapflow
