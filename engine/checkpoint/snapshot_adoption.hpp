#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Moves a snapshot (a savepoint, or a retained checkpoint of another job) into a new job's
// checkpoint folder, for a job submitted from it in CLAIM mode (recovery_claim_mode.hpp). Once
// adopted, the snapshot is the job's own oldest completed checkpoint `<job_dir>/chk-<id>`: the
// job's usual recovery (checkpoint_storage::recover, the shared-state registry rebuilt from
// it, the id counter moved past it) restores from it, subsumes it and deletes it with no case
// of its own.
//
// adopt(), in order, each step leaving at least one complete copy of the snapshot:
//  1. reads the source's `_metadata` (checked by checkpoint_storage's reader) and confines every
//     state file it names: its own files inside the source folder, shared ones inside the
//     `shared/` folder beside it; no symlink anywhere, every named file present;
//  2. hard-links each shared file into `<job_dir>/shared/` (links keep the old job's other
//     checkpoints whole; a copy where a link cannot be made, e.g. across file systems);
//  3. links (or copies) every file of the source folder into `<job_dir>/adopting-chk-<id>`, a
//     name recovery ignores, and writes there a new `_metadata` naming the new paths, the new
//     job, and a savepoint as a manual checkpoint (a claimed savepoint is subsumed like any
//     checkpoint); the file is never written through a link to the source's;
//  4. fsyncs what it copied and every folder it changed, then renames the staging folder to
//     `chk-<id>` and fsyncs the job folder: from here the job has the checkpoint.
// The source is untouched until release_source(), called once the job that owns the copy is
// persisted. A failure takes back the links and the staging folder it made; a crash before the
// rename leaves them (the next adoption replaces the staging folder, the job's start sweeps
// unnamed shared links away); after it, two complete copies (the source still the user's).
class snapshot_adoption {
 public:
  enum class step : std::uint8_t {
    shared_linked,       // the shared files are linked into the job's shared/ folder
    folder_staged,       // the source's files are linked into the staging folder
    metadata_rewritten,  // the new `_metadata` is written in the staging folder
    synced,              // copies and folders fsynced
    published,           // the staging folder is chk-<id>
  };
  // A test seam: asked after each step; true stops adopt() right there, leaving the disk as a
  // process killed at that point would, and adopt() returns an error.
  using crash_injector = std::function<bool(step)>;

  // The adopted checkpoint as recover() will read it (location `<job_dir>/chk-<id>`). Refused,
  // with nothing of the source changed: a source that is not a folder or is a symlink, a
  // missing or damaged `_metadata`, a state file outside its folder or missing, a symlink in
  // the folder, or a job folder already holding that checkpoint id.
  static result<completed_checkpoint> adopt(const std::filesystem::path& source,
                                            const std::filesystem::path& job_dir,
                                            const job_id& job, const crash_injector& crash = {});

  // Removes the source folder (its own files; shared files stay with their other owners) and
  // makes the removal durable. Call only once the adopted copy belongs to a persisted job.
  static result<void> release_source(const std::filesystem::path& source);

  // The staging folder's name for checkpoint `id`: not a chk-<id> name, so recovery skips it.
  static std::string staging_name(checkpoint_id id);
};

}  // namespace snapflow
