#include "engine/checkpoint/state_handle_confinement.hpp"

#include <string>
#include <vector>

#include "engine/paths/confined_folder.hpp"

namespace snapflow {

result<void> confine_state_handles(subtask_state& state, const std::filesystem::path& location) {
  if (location.empty()) {
    for (const state_handle& h : state.handles)
      if (!h.is_inline())
        return error{"state handle '" + h.path + "' names a file, and the checkpoint has no folder"};
    return success();
  }
  const confined_folder folder(location);
  std::vector<std::string> resolved;
  resolved.reserve(state.handles.size());
  for (const state_handle& h : state.handles) {
    if (h.is_inline()) {
      if (!h.path.empty()) return error{"inline state handle also names a file '" + h.path + "'"};
      resolved.emplace_back();
      continue;
    }
    auto path = folder.resolve(h.path);
    if (!path) return error{"state handle " + path.err().message};
    resolved.push_back(path->string());
  }
  for (std::size_t i = 0; i < state.handles.size(); ++i)
    if (!state.handles[i].is_inline()) state.handles[i].path = std::move(resolved[i]);
  return success();
}

}  // namespace snapflow
