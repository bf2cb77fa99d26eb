#include "engine/paths/job_paths.hpp"

namespace snapflow {

namespace fs = std::filesystem;

std::vector<confined_folder> make_data_roots(const std::vector<std::string>& roots) {
  std::vector<confined_folder> folders;
  folders.reserve(roots.size());
  for (const auto& root : roots) folders.emplace_back(root);
  return folders;
}

namespace {

std::string root_names(const std::vector<confined_folder>& roots) {
  std::string names;
  for (const auto& root : roots) names += (names.empty() ? "" : ", ") + root.root().string();
  return names.empty() ? std::string("none") : names;
}

}  // namespace

result<fs::path> confine_job_path(const std::vector<confined_folder>& roots,
                                  std::string_view path) {
  if (roots.empty())
    return error{"path '" + std::string(path) + "' cannot be used: no data roots are allowed"};
  if (!path.empty() && !fs::path(path).is_absolute()) {
    auto resolved = roots.front().resolve(path);
    if (resolved) return resolved;
    return error{"path '" + std::string(path) + "' is outside the allowed roots (" +
                 root_names(roots) + "): " + resolved.err().message};
  }
  return admit_under_any(roots, path, "path");
}

std::optional<std::string> confine_vertex_paths(job_vertex& vertex,
                                                const operator_registry& registry,
                                                const std::vector<confined_folder>& roots,
                                                bool rewrite) {
  const operator_kind* kind = registry.find(vertex.kind);
  if (kind == nullptr) return std::nullopt;
  for (const param_spec& spec : kind->params) {
    if (!spec.is_path) continue;
    auto it = vertex.params.find(spec.name);
    if (it == vertex.params.end()) continue;  // a required one missing is validate()'s to say
    auto confined = confine_job_path(roots, it->second);
    if (!confined)
      return "operator '" + vertex.name + "' parameter '" + spec.name + "': " +
             confined.err().message;
    if (rewrite) it->second = confined->string();
  }
  return std::nullopt;
}

}  // namespace snapflow
