#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_failure_reason.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "engine/checkpoint/latency_histogram.hpp"
#include "graph/checkpoint_config.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// What one subtask reported with its ack.
struct subtask_checkpoint_stats {
  subtask_id subtask;
  std::int64_t ack_timestamp_us = 0;
  std::int64_t end_to_end_duration_us = 0;
  std::uint64_t state_size = 0;
  // What this checkpoint wrote for the subtask (Flink's checkpointed size): its state files
  // and inline state, without the shared files it reused from earlier checkpoints. Equal to
  // state_size unless the subtask checkpoints incrementally.
  std::uint64_t checkpointed_size = 0;
  std::int64_t sync_duration_us = 0;
  std::int64_t async_duration_us = 0;
  std::int64_t alignment_duration_us = 0;
  std::uint64_t bytes_processed_during_alignment = 0;
  // Records held back by alignment / processed past the barrier (see checkpoint_metrics).
  std::uint64_t records_held_during_alignment = 0;
  std::uint64_t records_after_barrier = 0;
  // The checkpoint went unaligned at the subtask, which persisted this many bytes of in-flight
  // records as channel state (Flink's unalignedCheckpoint, persistedData).
  bool unaligned = false;
  std::uint64_t persisted_data_bytes = 0;
  // Trigger to the barrier reaching the subtask (Flink's checkpoint start delay); 0 when the
  // worker did not measure it.
  std::int64_t start_delay_us = 0;
  // When the subtask handled the notification that the checkpoint completed, on its worker's
  // clock (us since the epoch), as its worker's next heartbeat reported it; unknown until then.
  std::optional<std::int64_t> notified_timestamp_us;

  bool operator==(const subtask_checkpoint_stats&) const = default;
};

enum class checkpoint_stats_status : std::uint8_t { in_progress, completed, failed };

std::string_view to_string(checkpoint_stats_status status);

struct checkpoint_stats {
  checkpoint_id id = 0;
  checkpoint_trigger_kind kind = checkpoint_trigger_kind::periodic;
  checkpoint_stats_status status = checkpoint_stats_status::in_progress;
  std::int64_t trigger_timestamp_us = 0;
  std::int64_t latest_ack_timestamp_us = 0;
  std::optional<std::int64_t> end_timestamp_us;
  std::size_t num_subtasks = 0;
  std::size_t num_acknowledged = 0;
  std::uint64_t state_size = 0;
  std::uint64_t checkpointed_size = 0;  // see subtask_checkpoint_stats
  // Until the end: trigger to the latest ack; after it: trigger to completion or failure.
  std::int64_t end_to_end_duration_us = 0;
  std::int64_t max_alignment_duration_us = 0;
  // Any subtask went unaligned; the in-flight bytes the subtasks persisted as channel state,
  // and the bytes they processed while aligning (Flink's persistedData, processedData).
  bool unaligned = false;
  std::uint64_t persisted_data_bytes = 0;
  std::uint64_t processed_data_bytes = 0;
  // Completed checkpoints: how many subtasks reported handling the completion notification,
  // the latest of those times, and, once every subtask reported, trigger to that latest time
  // (the time until all subtasks were notified). A subtask that never reports (its worker was
  // lost, or it dropped old notifications) leaves the duration unknown rather than wrong.
  std::size_t num_notified = 0;
  std::int64_t latest_notified_timestamp_us = 0;
  std::optional<std::int64_t> notified_duration_us;
  std::optional<checkpoint_failure_reason> failure_reason;
  std::string failure_message;
  std::string external_path;
  std::vector<subtask_checkpoint_stats> subtasks;  // in ack order
};

// count, min, max and average of the values, and nearest-rank percentiles: pN is the smallest
// value with at least N% of the values at or below it (so always one of the values).
struct stats_summary {
  std::int64_t count = 0;
  double min = 0, max = 0, avg = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0;
};

// triggered == in_progress + completed + failed + failed_savepoints (a request that failed
// before it had an id counts as triggered and failed). A savepoint that fails counts in
// failed_savepoints, never in failed: as in Flink, the failed-checkpoint count (and the
// tolerable-failure streak) is about checkpoints.
struct checkpoint_counts {
  std::int64_t triggered = 0, in_progress = 0, completed = 0, failed = 0, restored = 0;
  std::int64_t failed_savepoints = 0;
};

// Checkpoint statistics for the REST API and metrics (after Flink's CheckpointStatsTracker):
// counts, a bounded history, per-subtask ack stats and summaries over completed checkpoints.
//
// Built for the ack path: report_ack is O(1) (the checkpoint is found through a one-entry cache
// in front of a small ordered map, never a lookup by subtask; the per-subtask vector is reserved
// when the checkpoint starts). The coordinator has already dropped duplicate acks; acks beyond
// the number of subtasks are ignored so the vector stays bounded anyway.
//
// In-progress checkpoints are always tracked (find() sees them) even when the history is
// smaller than the number in progress; a finished checkpoint is dropped once it is no longer
// among the newest `history_size`. latest_completed/failed/savepoint() survive that.
// Pointers returned stay valid until the next report_* call. Coordinator thread only.
class checkpoint_stats_tracker {
 public:
  // Summaries cover the latest this many completed checkpoints.
  static constexpr std::size_t summary_window = 10'000;

  checkpoint_stats_tracker(std::size_t history_size, checkpoint_config config);

  void report_pending(checkpoint_id id, checkpoint_trigger_kind kind, std::int64_t trigger_us,
                      std::size_t num_subtasks);
  // Only while the checkpoint is in progress: an ack after it failed or completed changes no
  // statistic (Flink ignores late acks too); unknown ids are ignored.
  void report_ack(checkpoint_id id, const subtask_checkpoint_stats& ack);
  void report_completed(checkpoint_id id, std::int64_t completion_us, std::string external_path);
  void report_failed(checkpoint_id id, std::int64_t failure_us, checkpoint_failure_reason reason,
                     std::string message);
  // A request failed before it had an id (`savepoint`: a savepoint request).
  void report_failed_without_checkpoint(std::int64_t failure_us, checkpoint_failure_reason reason,
                                        bool savepoint = false);
  void report_restored(checkpoint_id id, std::int64_t restore_us, std::string external_path,
                       bool savepoint);
  // `subtask` handled the notification that `id` completed at `notified_us` (its worker's
  // clock). Ignored unless `id` is a tracked, completed checkpoint the subtask acknowledged and
  // this is the subtask's first report for it. O(log subtasks), once an index of the
  // checkpoint's subtasks is built on its first report.
  void report_notified(checkpoint_id id, const subtask_id& subtask, std::int64_t notified_us);

  checkpoint_counts counts() const { return counts_; }
  // Over the completed checkpoints in the summary window.
  stats_summary end_to_end_duration_us() const { return durations_us_.summary(); }
  stats_summary state_size() const { return state_sizes_.summary(); }
  stats_summary checkpointed_size() const { return checkpointed_sizes_.summary(); }
  // The maximum alignment of each completed checkpoint.
  stats_summary alignment_duration_us() const { return alignments_us_.summary(); }
  // Trigger to all subtasks notified, over the completed checkpoints that know it.
  stats_summary notified_duration_us() const { return notified_us_.summary(); }
  // Every ack reported so far, by stage (cumulative, for /metrics).
  const checkpoint_stage_histograms& stage_histograms() const { return stages_; }

  // In progress or in history; null otherwise.
  const checkpoint_stats* find(checkpoint_id id) const;
  // Newest first, at most history_size, including in-progress and failed ones; valid like
  // find(). Pointers, not copies: each entry holds one record per subtask, and the REST API
  // reads the history on the coordinator thread (at 10,000 subtasks and a history of 100,
  // copying it was 90 MB per request).
  std::vector<const checkpoint_stats*> history() const;
  const checkpoint_stats* latest_completed() const { return latest_completed_.get(); }
  const checkpoint_stats* latest_failed() const { return latest_failed_.get(); }
  const checkpoint_stats* latest_savepoint() const { return latest_savepoint_.get(); }

  struct restored_info {
    checkpoint_id id;
    std::int64_t restore_us;
    std::string external_path;
    bool savepoint;
  };
  std::optional<restored_info> latest_restored() const { return latest_restored_; }
  const checkpoint_config& config() const { return config_; }
  std::size_t history_size() const { return history_size_; }
  // How many checkpoints are tracked (history plus older ones still in progress).
  std::size_t tracked() const { return tracked_.size(); }

 private:
  // The latest `summary_window` values, overwritten oldest first.
  class window {
   public:
    void add(double value);
    stats_summary summary() const;

   private:
    std::vector<double> values_;
    std::size_t next_ = 0;  // the slot the next value overwrites once full
  };

  checkpoint_stats* lookup(checkpoint_id id);
  void evict();
  // The position of `subtask` in stats.subtasks, through notify_index_; null if it has none.
  subtask_checkpoint_stats* find_subtask(checkpoint_stats& stats, const subtask_id& subtask);

  const std::size_t history_size_;
  const checkpoint_config config_;
  // Keyed by id, so "newest" is the end. Shared so latest_* outlive eviction from here.
  std::map<checkpoint_id, std::shared_ptr<checkpoint_stats>> tracked_;
  // The checkpoint the last ack went to: acks arrive in runs for one checkpoint.
  checkpoint_id cached_id_ = 0;
  checkpoint_stats* cached_ = nullptr;
  std::shared_ptr<checkpoint_stats> latest_completed_;
  std::shared_ptr<checkpoint_stats> latest_failed_;
  std::shared_ptr<checkpoint_stats> latest_savepoint_;
  std::optional<restored_info> latest_restored_;
  checkpoint_counts counts_;
  window durations_us_;
  window state_sizes_;
  window checkpointed_sizes_;
  window alignments_us_;
  window notified_us_;
  // For each completed checkpoint some but not all of whose subtasks reported their
  // notification: positions in its `subtasks` (ack order) sorted by subtask, so a report finds
  // its subtask without a scan. Dropped once all reported or the checkpoint is evicted.
  std::map<checkpoint_id, std::vector<std::uint32_t>> notify_index_;
  checkpoint_stage_histograms stages_;
};

}  // namespace snapflow
