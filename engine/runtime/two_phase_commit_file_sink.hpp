#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/sink_file.hpp"
#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// Exactly-once file sink (Flink's TwoPhaseCommitSinkFunction over files). Only committed files
// ever appear in the output folder; everything else lives in a hidden staging folder inside it:
//   <path>/.staging/<job>/<uid>/<subtask>/.txn-a<attempt>-<k>.pending  (dot-named, .pending)
//   <path>/part-<job>-<uid>-<subtask>-<checkpoint id>                  (committed)
// <job> is the job id (file_safe_job) and <uid> the operator's uid (file_safe_uid). With the job
// in every name, two jobs writing into one folder (the same job file run twice) never mix or
// overwrite each other's files, and one job's restore never deletes another job's staging files.
// A job restored from another job's savepoint commits the transactions that savepoint lists
// under the names they were given, the earlier job's.
//
// Transaction lifecycle:
//   - Records go to the open transaction, a pending file opened on the first record after a
//     barrier (a checkpoint interval without records creates no file).
//   - Barrier n pre-commits it: the file is closed and remembered, with n, in the list of
//     pre-committed transactions, which is this sink's snapshot state. Off the task thread,
//     before the ack, every listed file and the staging folder are fsynced.
//   - notify-complete n commits every pre-committed transaction with id <= n: an atomic rename
//     into the output folder, on the task thread. A lost notification is harmless: the next
//     completion commits the older ones too. The renames are made durable by the next
//     snapshot's asynchronous part (an fsync of the output folder), before that checkpoint is
//     acknowledged: a checkpoint that no longer lists a committed transaction never completes
//     before its commit is durable, and a crash before then restores a checkpoint that still
//     lists it (and commits it again). The task thread never waits for that fsync, which on a
//     journalling file system under write load costs milliseconds. End of input fsyncs the
//     folder itself; a task cancelled between a commit and the next snapshot leaves the rename
//     to the file system's writeback, and a restore from that checkpoint commits it again.
//   - notify-abort n drops nothing. The records of transaction n arrived before barrier n, so
//     they also arrived before barrier n+1: checkpoint n+1's snapshot still lists the
//     transaction, and when a later checkpoint completes its sources never replay those
//     records again, so the file must be committed then. Deleting it on abort would lose them.
//     Should no later checkpoint complete, a restore goes back to an older one and the file is
//     discarded there (its records are replayed).
//   - Restore from checkpoint c: the transactions c's snapshot lists are committed (an
//     already-committed one, renamed before a crash, is recognised and skipped); then every
//     other file in the staging folders this subtask owns is deleted: open transactions and
//     pre-commits of checkpoints newer than c, whose records the sources replay.
//   - End of input: every remaining transaction is committed. With the final-checkpoint rule
//     (sources end only after a checkpoint taken after their last record completed) nothing is
//     left by then; without checkpointing this is the only commit.
// Rescaling: new subtask i takes over the staging folders and snapshot lists of every old
// subtask s with s % parallelism == i, so each old transaction has exactly one owner.
class two_phase_commit_file_sink final : public stream_operator,
                                         public checkpoint_completion_listener {
 public:
  static constexpr std::string_view staging_folder_name = ".staging";
  static constexpr std::string_view pending_suffix = ".pending";

  struct transaction {
    checkpoint_id id = 0;   // the barrier that pre-committed it
    std::string staging;    // relative to the output folder
    std::string committed;  // file name in the output folder

    bool operator==(const transaction&) const = default;
  };

  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  result<void> notify_checkpoint_complete(checkpoint_id id) override;
  result<void> notify_checkpoint_aborted(checkpoint_id id) override;
  result<void> end_input(record_output& out) override;

  const std::vector<transaction>& pre_committed() const { return pre_committed_; }
  bool has_open_transaction() const { return current_.is_open(); }
  // Whether every commit so far has been made durable (the output folder fsynced after it).
  bool commits_durable() const { return durable_commits_->load() == commits_; }
  const std::filesystem::path& output_folder() const { return output_; }

  static std::string encode_transactions(const std::vector<transaction>& txns);
  static result<std::vector<transaction>> decode_transactions(std::string_view bytes);

 private:
  std::filesystem::path staging_folder_of(std::uint32_t subtask) const;
  // <path>/.staging/<job>/<uid>: every subtask's staging folder of this operator in this job.
  std::filesystem::path staging_root() const;
  // part-<job>-<uid>-<subtask>-<suffix>
  std::string committed_name(const std::string& suffix) const;
  result<void> commit(const transaction& t);
  result<void> commit_up_to(checkpoint_id id);
  result<void> clean_owned_staging();
  // On the task thread, where no snapshot follows (end of input).
  result<void> sync_output_folder();

  std::filesystem::path output_;
  std::string uid_;
  std::string job_;  // file_safe_job of the job id
  std::uint32_t subtask_ = 0;
  std::uint32_t parallelism_ = 1;
  std::uint32_t attempt_ = 0;
  std::uint64_t next_txn_ = 0;
  sink_file current_;
  std::string current_relative_;
  checkpoint_id last_barrier_ = 0;
  std::vector<transaction> pre_committed_;
  // Commits (renames into the output folder) counted on the task thread, and the count an
  // fsync of the output folder has made durable, stored by the snapshot writer. A snapshot
  // taken while they differ fsyncs the folder; a failed fsync leaves them differing, so the
  // next snapshot tries again.
  std::uint64_t commits_ = 0;
  std::shared_ptr<std::atomic<std::uint64_t>> durable_commits_ =
      std::make_shared<std::atomic<std::uint64_t>>(0);
  std::string line_;  // the record being written, reused (no allocation per record)
};

}  // namespace snapflow
