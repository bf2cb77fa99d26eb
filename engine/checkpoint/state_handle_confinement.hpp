#pragma once

#include <filesystem>

#include "engine/checkpoint/completed_checkpoint.hpp"
#include "graph/result.hpp"

namespace snapflow {

// A worker names its state files relative to the checkpoint's folder (the trigger's target
// location); the coordinator keeps, reads and deletes them later. Before it keeps any, every
// file handle of an acknowledgement is resolved against that folder (engine/paths/
// confined_folder.hpp): an absolute name, a `..` that climbs out, a NUL byte or a symlink that
// leads out is refused, so no message can make the coordinator read or delete a file outside the
// checkpoint it belongs to (another job's, the state folder's own, anything on the machine).
//
// On success every file handle's path is the absolute path inside `location`; on a refusal
// `state` is left as it came and the error names the handle and why. Inline handles name no file.
result<void> confine_state_handles(subtask_state& state, const std::filesystem::path& location);

}  // namespace snapflow
