#pragma once

#include <string>

#include "common/result.hpp"
#include "graph/job_graph.hpp"
#include "graph/operator_registry.hpp"

namespace snapflow {

// The job file (docs/job-file.md) that parse_job_file reads back into the same job graph: the
// same vertices (uid, kind, role, name, parallelism, max parallelism, params), edges, checkpoint
// settings, restart strategy and program, with a fresh job id. What a user program sends the
// coordinator's POST /jobs, whose body is a job file. C++ callables are left out (they never
// travel): user_* kinds need the program named in the graph, whose workers hold them.
//
// Refused, with a message naming the vertex, when a job file cannot say it: a vertex whose inputs
// are partitioned differently (a job file has one `partition` per operator), a blank uid, a
// parameter of a built-in kind whose value does not have the kind's type.
result<std::string> write_job_file(const job_graph& graph,
                                   const operator_registry& registry = operator_registry::builtin());

}  // namespace snapflow
