#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"

namespace snapflow {

// A worker names its state files relative to the checkpoint's folder (the trigger's target
// location); the coordinator keeps, reads and deletes them later. Before it keeps any, every
// file handle of an acknowledgement is resolved against that folder (engine/paths/
// confined_folder.hpp): an absolute name, a `..` that climbs out, a NUL byte or a symlink that
// leads out is refused, so no message can make the coordinator read or delete a file outside the
// checkpoint it belongs to (another job's, the state folder's own, anything on the machine).
//
// A shared handle (an incremental checkpoint's file that several checkpoints use) is resolved
// the same way against `shared_folder`, the job's shared/ folder; without one (a savepoint,
// which must hold all its own state) a shared handle is refused.
//
// On success every file handle's path is the absolute path inside its folder; on a refusal
// `state` is left as it came and the error names the handle and why. Inline handles name no
// file (and cannot be shared).
result<void> confine_state_handles(subtask_state& state, const std::filesystem::path& location,
                                   const std::filesystem::path& shared_folder = {});
// Whether any handle of `state` names a file (an inline one naming a path counts: it is refused).
bool names_files(const subtask_state& state);

// Discards state files and a checkpoint folder, but only what lies inside `job_dir` (the job's
// checkpoint folder): the last guard behind confine_state_handles, so that a metadata file edited
// on disk cannot steer a discard elsewhere either. Anything outside is left alone and warned
// about; failures to remove are warned about too (a discard never fails the job).
void discard_inside(const std::filesystem::path& job_dir, const std::vector<state_handle>& handles,
                    const std::string& location);

}  // namespace snapflow
