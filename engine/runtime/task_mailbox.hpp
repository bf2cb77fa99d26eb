#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>
#include <vector>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "engine/runtime/task_wakeup.hpp"

namespace snapflow {

// Control messages for a task, posted from other threads (the worker's control-plane thread,
// the coordinator's executor in local_cluster) and run on the task thread between records
// (Flink's mailbox). Posting never blocks.
struct trigger_message {
  checkpoint_id id = 0;
  std::int64_t timestamp_us = 0;
  checkpoint_options options;
};
struct complete_message {
  checkpoint_id id = 0;
  std::int64_t timestamp_us = 0;
};
struct abort_message {
  checkpoint_id id = 0;
  checkpoint_id latest_completed_id = 0;
};
// An exhausted source may end now: a checkpoint taken after every source's last record
// completed (the final-checkpoint rule; see task_status_listener::on_source_exhausted).
struct finish_message {};

using task_message = std::variant<trigger_message, complete_message, abort_message, finish_message>;

class task_mailbox {
 public:
  // Far more than the coordinator ever has in flight for one task: only a task that stopped
  // taking its mail reaches it, and then new messages are dropped (and counted) rather than
  // kept: every message is either a trigger (a lost one expires its checkpoint) or a
  // notification that a later one subsumes.
  static constexpr std::size_t capacity = 4096;

  explicit task_mailbox(std::shared_ptr<task_wakeup> wakeup) : wakeup_(std::move(wakeup)) {}

  // false when the message was dropped.
  bool post(task_message message) {
    if (!post_without_wakeup(std::move(message))) return false;
    wakeup_->notify();
    return true;
  }

  // Queues without waking the task: for a poster that will run the mailbox itself or wake the
  // task next (stream_task::trigger_checkpoint).
  bool post_without_wakeup(task_message message) {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= capacity) {
      ++dropped_;
      return false;
    }
    queue_.push_back(std::move(message));
    return true;
  }

  // The queued message when it is the only one and a trigger; nothing (and nothing taken)
  // otherwise. What stream_task::trigger_checkpoint runs on its caller's thread: exactly one
  // barrier, which the outputs were checked to take without waiting.
  std::optional<trigger_message> take_sole_trigger() {
    std::lock_guard lock(mutex_);
    if (queue_.size() != 1 || !std::holds_alternative<trigger_message>(queue_.front()))
      return std::nullopt;
    trigger_message m = std::move(std::get<trigger_message>(queue_.front()));
    queue_.pop_front();
    return m;
  }

  std::vector<task_message> take_all() {
    std::vector<task_message> out;
    std::lock_guard lock(mutex_);
    out.reserve(queue_.size());
    for (auto& m : queue_) out.push_back(std::move(m));
    queue_.clear();
    return out;
  }

  // The newest checkpoint a queued complete_message confirms, the messages left queued: an
  // incremental snapshot learns of a completion that arrived just ahead of its barrier.
  std::optional<checkpoint_id> newest_queued_completion() const {
    std::lock_guard lock(mutex_);
    std::optional<checkpoint_id> newest;
    for (const auto& m : queue_)
      if (const auto* c = std::get_if<complete_message>(&m); c && (!newest || c->id > *newest))
        newest = c->id;
    return newest;
  }
  bool empty() const {
    std::lock_guard lock(mutex_);
    return queue_.empty();
  }
  std::uint64_t dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  std::shared_ptr<task_wakeup> wakeup_;
  mutable std::mutex mutex_;
  std::deque<task_message> queue_;
  std::uint64_t dropped_ = 0;
};

}  // namespace snapflow
