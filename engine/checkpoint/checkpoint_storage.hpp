#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "engine/checkpoint/metadata_log.hpp"
#include "engine/checkpoint/prepared_metadata.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Checkpoint metadata on disk. Layout: `<job_dir>/chk-<id>/_metadata` next to the state files
// the tasks write into the same folder; savepoints in
// `<savepoint base>/savepoint-<first 6 characters of the job id>-<id>/_metadata`.
//
// A checkpoint exists on disk only once its metadata is whole and durable. Three ways:
// - a periodic checkpoint in the job's folder: prepare_location creates an empty `_metadata`
//   in the folder location_premaker made durable, ahead of completion; at completion the
//   metadata goes into that open file, unsynced, and then is appended to the job's metadata
//   log (metadata_log.hpp), whose fdatasync is the checkpoint's one sync. recover() and
//   read_metadata take the log's copy when a crash of the machine took the file's.
// - a savepoint (prepare_location without `logged`): the folder and the empty `_metadata`
//   made durable ahead; at completion the metadata is written into that file and fsynced.
//   A crash in between leaves an empty or short file, which its length and checksum reject;
//   a failed write removes it.
// - in one go (write_metadata without a prepared file): `_metadata.tmp`, fsynced, renamed,
//   the folder fsynced, so a crash leaves either no metadata or a whole one.
// Either way a torn or corrupt file (disks lie) fails its length or checksum and is skipped
// by recover().
//
// Metadata format (integers little-endian):
//   magic "SNAPFLOW-CHK" (12 bytes) | u32 format version (1) | u64 body length |
//   body (msgpack) | u32 CRC-32C of everything before it
// The body is map-keyed so fields can be added (a reader ignores keys it does not know):
//   {job: str, id: i64, kind: u8 (0 savepoint, 1 manual, 2 periodic), trigger_us: i64,
//    completion_us: i64, location: str,
//    subtasks: [{vertex: u32, index: u32, state_size: u64,
//                handles: [{path: str | bytes: bin, size: u64, crc: u32}]}],
//   (a handle names its state file, or carries a small state inline: see state_handle)
//    master_states: {str: bin}}
//
// Blocking: runs on the coordinator's I/O pool, or inline on its event thread while recent
// writes were fast (metadata_write_placement). Its only mutable state is the job's metadata
// log, which serialises its appends, so different checkpoints may be written and read from
// different threads at once.
class checkpoint_storage {
 public:
  // The steps of write_file_durably, in order; a crash between any two must leave either the
  // old file or the new one whole. A prepared metadata write has no temp file: prepare_location
  // takes create_folders, create_temp (`_metadata` itself) and fsync_folder, and
  // write_metadata then the writes and fsync_temp (of `_metadata`); a crash leaves no metadata,
  // an empty or torn one (rejected), or a whole one.
  enum class write_step : std::uint8_t {
    create_folders,    // missing folders created, each parent fsynced
    create_temp,       // <file>.tmp opened
    write_first_half,  // the first half of the bytes written to the temp file
    write_rest,        // the rest written
    fsync_temp,        // the temp file fsynced
    rename,            // temp renamed over the file
    fsync_folder,      // the folder fsynced: the new file is durable
  };
  static constexpr std::uint8_t write_step_count = 7;
  // A test seam for durability tests: when set, it is asked before each step of every durable
  // write; returning true stops the write right there, leaving the disk exactly as a process
  // killed at that point would (nothing cleaned up), and the write returns an error. Unset,
  // which is the default and what production runs with, it costs one check per step.
  using write_fault_injector = std::function<bool(const std::filesystem::path& file, write_step)>;
  static void set_write_fault_injector(write_fault_injector injector);

  static constexpr std::string_view metadata_file_name = "_metadata";
  // The job's folder of files that several incremental checkpoints use (shared_state_registry).
  static constexpr std::string_view shared_folder_name = "shared";
  // The files of job_dir's shared folder that none of `kept` names: left by checkpoints that
  // never completed or by discards a crash interrupted. Nothing when there is no such folder.
  static std::vector<std::filesystem::path> unreferenced_shared_files(
      const std::filesystem::path& job_dir, const std::vector<completed_checkpoint>& kept);
  // Removes them.
  struct shared_sweep_result {
    std::vector<std::filesystem::path> removed;
    std::vector<std::string> failures;
  };
  static shared_sweep_result remove_unreferenced_shared_files(
      const std::filesystem::path& job_dir, const std::vector<completed_checkpoint>& kept);
  static constexpr std::string_view metadata_magic = "SNAPFLOW-CHK";
  static constexpr std::uint32_t metadata_version = 1;
  // Far above any real job's metadata; refuses to read a garbage length into memory.
  static constexpr std::uint64_t max_metadata_bytes = 256ull << 20;

  // `retained`: how many completed checkpoints the job keeps; the metadata log keeps at least
  // that many records.
  explicit checkpoint_storage(std::filesystem::path job_dir, std::size_t retained = 1);
  ~checkpoint_storage();
  checkpoint_storage(const checkpoint_storage&) = delete;
  checkpoint_storage& operator=(const checkpoint_storage&) = delete;

  const std::filesystem::path& job_dir() const { return job_dir_; }
  std::filesystem::path checkpoint_dir(checkpoint_id id) const;
  static std::filesystem::path checkpoint_dir(const std::filesystem::path& job_dir,
                                              checkpoint_id id);
  static std::filesystem::path savepoint_dir(const std::filesystem::path& base, const job_id& job,
                                             checkpoint_id id);

  // Durably writes the metadata into `checkpoint.location`, creating the folder if missing.
  result<void> write_metadata(const completed_checkpoint& checkpoint);
  // The coordinator's path from the last ack to "complete": into the empty `_metadata` that
  // prepare_location created and opened (its folder must be `checkpoint.location`). Nothing is
  // looked up, created or renamed. A file prepared `logged` is not fsynced: the append to the
  // job's metadata log (metadata_log.hpp) makes the checkpoint durable; otherwise the file is
  // fsynced. A failed write removes the file.
  result<void> write_metadata(const completed_checkpoint& checkpoint,
                              prepared_metadata file) const;
  // The log made ready for the next appends (metadata_log::prepare): called at a logged
  // checkpoint's preparation, so that its completion does not make a segment.
  result<void> prepare_log() const { return log_->prepare(); }
  // Whether a logged write of about that much metadata appends to the log's open segment
  // (metadata_log::has_room): the coordinator writes inline on its event thread only then.
  bool log_has_room(std::uint64_t metadata_bytes) const { return log_->has_room(metadata_bytes); }
  // Verifies magic, version, length and checksum; never throws; bounded unpack limits. The
  // returned checkpoint's location is `dir` (so a moved savepoint folder still reads right).
  // A `_metadata` that is missing, empty or damaged in a chk-<id> folder is read from the
  // metadata log in the folder's parent when that holds the checkpoint (a crash of the machine
  // may take a logged checkpoint's unsynced file).
  static result<completed_checkpoint> read_metadata(const std::filesystem::path& dir);

  struct recovered {
    std::vector<completed_checkpoint> checkpoints;  // ascending id
    std::vector<std::string> warnings;              // one per skipped folder
    // Empty chk-<id> folders: made ahead of their ids (location_premaker) and never used.
    std::vector<std::filesystem::path> empty_folders;
    // Checkpoints whose `_metadata` was missing, empty or damaged and was rewritten (durably)
    // from the metadata log.
    std::vector<checkpoint_id> repaired;
    // Non-empty chk-<id> folders of checkpoints that never completed: no `_metadata` or an
    // empty one, and no record in the log (a checkpoint in progress when the process died, or
    // one whose abort a late state file outlived). Also listed in warnings. A torn or corrupt
    // `_metadata` (perhaps a completed checkpoint the disk damaged) and one that could not be
    // read (permissions, I/O) are not.
    std::vector<std::filesystem::path> incomplete_folders;
  };
  // Every chk-<id> folder under job_dir with a valid `_metadata` whose id matches the folder
  // name, or whose metadata the job's metadata log holds (then the file is rewritten from
  // it); torn, corrupt, mismatched or missing metadata the log does not hold is skipped with a
  // warning, an empty folder without one (it is listed in empty_folders). A log record whose
  // folder is gone is a discarded checkpoint's and is ignored. A missing job_dir is an empty
  // result (a job that never completed a checkpoint).
  recovered recover() const;

  // At the coordinator's shutdown: the metadata of the logged checkpoints in `folders` (what
  // the store still holds) made durable on its own, the `_metadata` and its entry fsynced, so
  // a retained folder can be copied and restored from anywhere; then the metadata log, which
  // they no longer need, removed and closed: a metadata write still on its way fails instead
  // of leaving a new segment behind. A folder gone meanwhile (discarded) is skipped; a failed
  // sync keeps the log (closed all the same).
  result<void> seal(const std::vector<std::filesystem::path>& folders) const;

  // Removes the folder and everything in it; a missing folder is fine.
  static result<void> discard_location(const std::filesystem::path& dir);
  // "chk-<id>" with a canonical positive decimal id, else nullopt.
  static std::optional<checkpoint_id> checkpoint_folder_id(std::string_view folder_name);

  // What sweep_orphans() removed, and what it could not.
  struct sweep_result {
    std::vector<checkpoint_id> removed;
    std::vector<std::string> failures;
  };
  // Removes every chk-<id> folder under job_dir with `from` <= id <= `to` whose id `keep` does
  // not hold: checkpoint folders that a discard missed. A task's state file written after its
  // checkpoint was aborted recreates the folder the abort removed (the task cannot tell a
  // folder not created yet from one removed), and a file created while the folder was being
  // removed leaves it non-empty. Anything else under job_dir is left alone.
  sweep_result sweep_orphans(checkpoint_id from, checkpoint_id to,
                             const std::set<checkpoint_id>& keep) const;
  // Creates a checkpoint's folder (and missing ancestors), each new entry fsynced into its
  // parent, and an empty `_metadata` in it, open for writing, the folder fsynced again: all of
  // write_metadata but the write itself, done before completion (the coordinator: between two
  // checkpoints, or at trigger time) so that it is off the path from the last ack to
  // "complete". A folder already there is fine, and so is an empty `_metadata` (a preparation
  // never written, which a crash leaves); one with bytes in it is refused and left as it is.
  struct prepare_options {
    // The folder was made by premake_locations, so its entry in the parent is durable already.
    bool folder_premade = false;
    // The metadata will be made durable by the job's metadata log (a periodic checkpoint in
    // the job's folder): the new `_metadata` entry needs no fsync of the folder, and
    // write_metadata will not fsync the file.
    bool logged = false;
  };
  static result<prepared_metadata> prepare_location(const std::filesystem::path& dir,
                                                    prepare_options options);
  static result<prepared_metadata> prepare_location(const std::filesystem::path& dir) {
    return prepare_location(dir, prepare_options{});
  }
  // Creates the folders `dirs` (and missing ancestors, durably), then makes their entries
  // durable with one fsync of each distinct parent: the folders of checkpoints to come, made
  // together so that their preparations skip that fsync each (prepare_location).
  static result<void> premake_locations(const std::vector<std::filesystem::path>& dirs);
  // Removes the files; missing files are fine. Tries every file before reporting a failure.
  static result<void> discard_state(const std::vector<state_handle>& handles);
  // The file's size and CRC-32C match the handle's.
  static result<void> verify_state(const state_handle& h);

  // The metadata file's bytes, and back (exposed for tests and fuzzing). decode never throws.
  static std::string encode_metadata(const completed_checkpoint& checkpoint);
  static result<completed_checkpoint> decode_metadata(std::string_view bytes);

  // write temp, fsync, rename, fsync the folder; missing folders are created (and their parents
  // fsynced). Shared with file_checkpoint_id_counter and the tasks' state files.
  static result<void> write_file_durably(const std::filesystem::path& file, std::string_view bytes);
  // Creates `dir` and missing ancestors, fsyncing each new folder's parent (a file written
  // into them by other means, state_file_writer's stream, survives a crash with them).
  static result<void> create_folders_durably(const std::filesystem::path& dir);
  // The whole file, refusing files larger than max_bytes.
  static result<std::string> read_file(const std::filesystem::path& file, std::uint64_t max_bytes);

 private:
  std::filesystem::path job_dir_;
  std::unique_ptr<metadata_log> log_;
};

}  // namespace snapflow
