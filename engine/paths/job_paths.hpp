#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "engine/paths/confined_folder.hpp"
#include "graph/job_graph.hpp"
#include "graph/operator_registry.hpp"

namespace snapflow {

// A worker's data roots (--data-root) as confined folders, in the order given.
std::vector<confined_folder> make_data_roots(const std::vector<std::string>& roots);

// Where a job's file parameter `path` leads under `roots`: a relative path resolves against the
// first root; an absolute one must lie inside one of them. Refused (naming the path and every
// root): a path outside, a `..` that climbs out, a symlink that leads out, no roots at all.
result<std::filesystem::path> confine_job_path(const std::vector<confined_folder>& roots,
                                               std::string_view path);

// Checks every parameter of `vertex` that `registry` marks as a path (param_spec::is_path).
// With `rewrite`, each is replaced by where it leads (absolute), so the operator opens exactly
// what was checked. A kind the registry does not know has no path parameters here. Nothing:
// every path is inside; else why not, naming the vertex, the parameter and the roots.
std::optional<std::string> confine_vertex_paths(job_vertex& vertex,
                                                const operator_registry& registry,
                                                const std::vector<confined_folder>& roots,
                                                bool rewrite);

}  // namespace snapflow
