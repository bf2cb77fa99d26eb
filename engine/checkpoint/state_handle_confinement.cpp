#include "engine/checkpoint/state_handle_confinement.hpp"

#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/paths/confined_folder.hpp"

namespace snapflow {
namespace {

std::filesystem::path absolute_normal(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return ec ? std::filesystem::path() : p.lexically_normal();
}

}  // namespace

bool names_files(const subtask_state& state) {
  for (const state_handle& h : state.handles)
    if (!h.is_inline() || !h.path.empty() || h.is_shared()) return true;
  return false;
}

result<void> confine_state_handles(subtask_state& state, const std::filesystem::path& location,
                                   const std::filesystem::path& shared_folder) {
  // A small state travels inline: nothing to resolve, and no folder to make absolute (a
  // getcwd and a path built per acknowledgement, on the coordinator's thread).
  if (!names_files(state)) return success();
  if (location.empty()) {
    for (const state_handle& h : state.handles)
      if (!h.is_inline())
        return error{"state handle '" + h.path + "' names a file, and the checkpoint has no folder"};
    return success();
  }
  const confined_folder folder(location);
  std::optional<confined_folder> shared;
  std::vector<std::string> resolved;
  resolved.reserve(state.handles.size());
  for (const state_handle& h : state.handles) {
    if (h.is_inline()) {
      if (!h.path.empty()) return error{"inline state handle also names a file '" + h.path + "'"};
      if (h.is_shared()) return error{"inline state handle cannot be shared"};
      resolved.emplace_back();
      continue;
    }
    if (h.is_shared() && shared_folder.empty())
      return error{"state handle '" + h.path +
                   "' names a shared file, and this checkpoint holds only its own (a savepoint)"};
    if (h.is_shared() && !shared) shared.emplace(shared_folder);
    auto path = h.is_shared() ? shared->resolve(h.path) : folder.resolve(h.path);
    if (!path) return error{"state handle " + path.err().message};
    resolved.push_back(path->string());
  }
  for (std::size_t i = 0; i < state.handles.size(); ++i)
    if (!state.handles[i].is_inline()) state.handles[i].path = std::move(resolved[i]);
  return success();
}

void discard_inside(const std::filesystem::path& job_dir, const std::vector<state_handle>& handles,
                    const std::string& location) {
  const confined_folder owned(job_dir);
  std::vector<state_handle> inside;
  inside.reserve(handles.size());
  for (const state_handle& h : handles) {
    if (h.is_inline() || h.path.empty()) continue;
    if (owned.lexically_contains(absolute_normal(h.path)))
      inside.push_back(h);
    else
      spdlog::warn("not discarding {}: it is outside the job's checkpoint folder {}", h.path,
                   job_dir.string());
  }
  if (auto r = checkpoint_storage::discard_state(inside); !r)
    spdlog::warn("discarding checkpoint state: {}", r.err().message);
  if (location.empty()) return;
  if (!owned.lexically_contains(absolute_normal(location))) {
    spdlog::warn("not discarding checkpoint folder {}: it is outside the job's checkpoint folder {}",
                 location, job_dir.string());
    return;
  }
  if (auto r = checkpoint_storage::discard_location(location); !r)
    spdlog::warn("discarding checkpoint {}: {}", location, r.err().message);
}

}  // namespace snapflow
