#include "engine/checkpoint/checkpoint_stats_tracker.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <utility>

namespace snapflow {

std::string_view to_string(checkpoint_stats_status status) {
  switch (status) {
    case checkpoint_stats_status::in_progress:
      return "in_progress";
    case checkpoint_stats_status::completed:
      return "completed";
    case checkpoint_stats_status::failed:
      return "failed";
  }
  return "unknown";
}

void checkpoint_stats_tracker::window::add(double value) {
  if (values_.size() < summary_window) {
    values_.push_back(value);
    return;
  }
  assert(next_ < values_.size());
  values_[next_] = value;
  next_ = (next_ + 1) % values_.size();
}

stats_summary checkpoint_stats_tracker::window::summary() const {
  stats_summary s;
  if (values_.empty()) return s;
  std::vector<double> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  long double sum = 0;
  for (double v : sorted) sum += v;
  // Nearest rank in integers: no floating error decides which value p99.9 picks.
  const auto at = [&](std::size_t per, std::size_t of) {
    const std::size_t rank = std::max<std::size_t>(1, (n * per + of - 1) / of);
    assert(rank <= n);
    return sorted[rank - 1];
  };
  s.count = static_cast<std::int64_t>(n);
  s.min = sorted.front();
  s.max = sorted.back();
  s.avg = static_cast<double>(sum / static_cast<long double>(n));
  s.p50 = at(50, 100);
  s.p90 = at(90, 100);
  s.p95 = at(95, 100);
  s.p99 = at(99, 100);
  s.p999 = at(999, 1000);
  return s;
}

checkpoint_stats_tracker::checkpoint_stats_tracker(std::size_t history_size,
                                                   checkpoint_config config)
    : history_size_(history_size), config_(std::move(config)) {}

void checkpoint_stats_tracker::report_pending(checkpoint_id id, checkpoint_trigger_kind kind,
                                              std::int64_t trigger_us, std::size_t num_subtasks) {
  assert(id >= 1);
  auto stats = std::make_shared<checkpoint_stats>();
  stats->id = id;
  stats->kind = kind;
  stats->status = checkpoint_stats_status::in_progress;
  stats->trigger_timestamp_us = trigger_us;
  stats->num_subtasks = num_subtasks;
  // Reserved once so the ack path never reallocates.
  stats->subtasks.reserve(num_subtasks);
  const bool inserted = tracked_.emplace(id, std::move(stats)).second;
  assert(inserted && "checkpoint id reported pending twice");
  (void)inserted;
  ++counts_.triggered;
  ++counts_.in_progress;
  evict();
}

checkpoint_stats* checkpoint_stats_tracker::lookup(checkpoint_id id) {
  if (cached_ != nullptr && cached_id_ == id) return cached_;
  if (auto it = tracked_.find(id); it != tracked_.end()) {
    cached_id_ = id;
    cached_ = it->second.get();
    return cached_;
  }
  // A failed checkpoint already out of the history still takes its late acks.
  if (latest_failed_ && latest_failed_->id == id) return latest_failed_.get();
  return nullptr;
}

void checkpoint_stats_tracker::report_ack(checkpoint_id id, const subtask_checkpoint_stats& ack) {
  checkpoint_stats* stats = lookup(id);
  if (stats == nullptr || stats->status != checkpoint_stats_status::in_progress) return;
  if (stats->num_acknowledged >= stats->num_subtasks) return;
  assert(stats->subtasks.size() == stats->num_acknowledged);
  assert(stats->subtasks.capacity() >= stats->num_subtasks);
  stats->subtasks.push_back(ack);
  ++stats->num_acknowledged;
  stats->state_size += ack.state_size;
  stats->checkpointed_size += ack.checkpointed_size;
  stats->latest_ack_timestamp_us = std::max(stats->latest_ack_timestamp_us, ack.ack_timestamp_us);
  stats->max_alignment_duration_us =
      std::max(stats->max_alignment_duration_us, ack.alignment_duration_us);
  stats->unaligned = stats->unaligned || ack.unaligned;
  stats->persisted_data_bytes += ack.persisted_data_bytes;
  stats->processed_data_bytes += ack.bytes_processed_during_alignment;
  stats->end_to_end_duration_us = stats->latest_ack_timestamp_us - stats->trigger_timestamp_us;
  // What the subtask measured, and the rest of its end-to-end time: the ack on its way (and
  // waiting in queues) after the snapshot was written.
  const std::int64_t snapshot_us = ack.sync_duration_us + ack.async_duration_us;
  stages_.trigger_to_barrier.observe(ack.start_delay_us);
  stages_.barrier_to_aligned.observe(ack.alignment_duration_us);
  stages_.aligned_to_snapshot_done.observe(snapshot_us);
  stages_.snapshot_done_to_ack.observe(ack.end_to_end_duration_us - ack.start_delay_us -
                                       ack.alignment_duration_us - snapshot_us);
}

void checkpoint_stats_tracker::report_completed(checkpoint_id id, std::int64_t completion_us,
                                                std::string external_path) {
  auto it = tracked_.find(id);
  // In-progress checkpoints are never evicted, so a miss is a stale or repeated report.
  if (it == tracked_.end()) return;
  const std::shared_ptr<checkpoint_stats>& stats = it->second;
  if (stats->status != checkpoint_stats_status::in_progress) return;
  stats->status = checkpoint_stats_status::completed;
  stats->end_timestamp_us = completion_us;
  stats->end_to_end_duration_us = completion_us - stats->trigger_timestamp_us;
  stats->external_path = std::move(external_path);
  assert(counts_.in_progress > 0);
  --counts_.in_progress;
  ++counts_.completed;
  durations_us_.add(static_cast<double>(stats->end_to_end_duration_us));
  state_sizes_.add(static_cast<double>(stats->state_size));
  checkpointed_sizes_.add(static_cast<double>(stats->checkpointed_size));
  alignments_us_.add(static_cast<double>(stats->max_alignment_duration_us));
  if (!latest_completed_ || latest_completed_->id < id) latest_completed_ = stats;
  if (stats->kind == checkpoint_trigger_kind::savepoint &&
      (!latest_savepoint_ || latest_savepoint_->id < id))
    latest_savepoint_ = stats;
  evict();
}

void checkpoint_stats_tracker::report_failed(checkpoint_id id, std::int64_t failure_us,
                                             checkpoint_failure_reason reason,
                                             std::string message) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return;
  const std::shared_ptr<checkpoint_stats>& stats = it->second;
  if (stats->status != checkpoint_stats_status::in_progress) return;
  stats->status = checkpoint_stats_status::failed;
  stats->end_timestamp_us = failure_us;
  stats->end_to_end_duration_us = failure_us - stats->trigger_timestamp_us;
  stats->failure_reason = reason;
  stats->failure_message = std::move(message);
  assert(counts_.in_progress > 0);
  --counts_.in_progress;
  ++(stats->kind == checkpoint_trigger_kind::savepoint ? counts_.failed_savepoints
                                                       : counts_.failed);
  if (!latest_failed_ || latest_failed_->id < id) latest_failed_ = stats;
  evict();
}

void checkpoint_stats_tracker::report_failed_without_checkpoint(std::int64_t failure_us,
                                                                 checkpoint_failure_reason reason,
                                                                 bool savepoint) {
  // Nothing to keep but the count: there is no checkpoint to show.
  (void)failure_us;
  (void)reason;
  ++counts_.triggered;
  ++(savepoint ? counts_.failed_savepoints : counts_.failed);
}

void checkpoint_stats_tracker::report_restored(checkpoint_id id, std::int64_t restore_us,
                                               std::string external_path, bool savepoint) {
  ++counts_.restored;
  latest_restored_ = restored_info{id, restore_us, std::move(external_path), savepoint};
}

subtask_checkpoint_stats* checkpoint_stats_tracker::find_subtask(checkpoint_stats& stats,
                                                                 const subtask_id& subtask) {
  auto [it, inserted] = notify_index_.try_emplace(stats.id);
  std::vector<std::uint32_t>& order = it->second;
  if (inserted) {
    assert(stats.subtasks.size() <= std::numeric_limits<std::uint32_t>::max());
    order.resize(stats.subtasks.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return stats.subtasks[a].subtask < stats.subtasks[b].subtask;
    });
  }
  auto pos = std::lower_bound(
      order.begin(), order.end(), subtask,
      [&](std::uint32_t i, const subtask_id& s) { return stats.subtasks[i].subtask < s; });
  if (pos == order.end() || stats.subtasks[*pos].subtask != subtask) return nullptr;
  return &stats.subtasks[*pos];
}

void checkpoint_stats_tracker::report_notified(checkpoint_id id, const subtask_id& subtask,
                                               std::int64_t notified_us) {
  auto it = tracked_.find(id);
  // Evicted, never known, or a stale report from before a restart: nothing to attach it to.
  if (it == tracked_.end()) return;
  checkpoint_stats& stats = *it->second;
  // Only completed checkpoints are notified; a savepoint never is, and anything else is a
  // confused or hostile peer.
  if (stats.status != checkpoint_stats_status::completed) return;
  if (stats.kind == checkpoint_trigger_kind::savepoint) return;
  if (stats.notified_duration_us) return;  // every subtask reported already
  subtask_checkpoint_stats* sub = find_subtask(stats, subtask);
  if (sub == nullptr || sub->notified_timestamp_us) return;  // not one of its subtasks, or again
  sub->notified_timestamp_us = notified_us;
  ++stats.num_notified;
  stats.latest_notified_timestamp_us =
      stats.num_notified == 1 ? notified_us
                              : std::max(stats.latest_notified_timestamp_us, notified_us);
  assert(stats.num_notified <= stats.subtasks.size());
  if (stats.num_notified < stats.num_subtasks) return;
  stats.notified_duration_us = stats.latest_notified_timestamp_us - stats.trigger_timestamp_us;
  notified_us_.add(static_cast<double>(*stats.notified_duration_us));
  notify_index_.erase(id);
}

void checkpoint_stats_tracker::evict() {
  if (tracked_.size() <= history_size_) return;
  // The oldest entries outside the history window go, unless still in progress.
  std::size_t outside = tracked_.size() - history_size_;
  for (auto it = tracked_.begin(); outside > 0 && it != tracked_.end(); --outside) {
    if (it->second->status == checkpoint_stats_status::in_progress) {
      ++it;
      continue;
    }
    if (cached_ == it->second.get()) cached_ = nullptr;
    notify_index_.erase(it->first);
    it = tracked_.erase(it);
  }
}

const checkpoint_stats* checkpoint_stats_tracker::find(checkpoint_id id) const {
  auto it = tracked_.find(id);
  return it == tracked_.end() ? nullptr : it->second.get();
}

std::vector<const checkpoint_stats*> checkpoint_stats_tracker::history() const {
  std::vector<const checkpoint_stats*> out;
  out.reserve(std::min(history_size_, tracked_.size()));
  for (auto it = tracked_.rbegin(); it != tracked_.rend() && out.size() < history_size_; ++it)
    out.push_back(it->second.get());
  return out;
}

}  // namespace snapflow
