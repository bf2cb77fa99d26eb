#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "graph/job_graph.hpp"

namespace snapflow::test {

// A savepoint in `folder` (its _metadata only) for `graph`: one subtask state per vertex, empty,
// the one of the vertex with uid `keyed_uid` holding keyed state cut at `max_parallelism` (all
// its key groups). What a restore at another max parallelism must refuse.
inline std::filesystem::path write_keyed_savepoint(const std::filesystem::path& folder,
                                                   const job_graph& graph,
                                                   const std::string& keyed_uid,
                                                   std::uint32_t max_parallelism) {
  std::filesystem::create_directories(folder);
  completed_checkpoint c;
  c.job = "an-earlier-job";
  c.id = 7;
  c.kind = checkpoint_trigger_kind::savepoint;
  c.location = folder.string();
  for (const job_vertex& v : graph.vertices) {
    subtask_state state;
    if (v.uid == keyed_uid) state.keyed = keyed_state_scope{max_parallelism, 0, max_parallelism - 1};
    c.subtask_states[subtask_id{v.id, 0}] = state;
  }
  std::ofstream(folder / "_metadata", std::ios::binary) << checkpoint_storage::encode_metadata(c);
  return folder;
}

}  // namespace snapflow::test
