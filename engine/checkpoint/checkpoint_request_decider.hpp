#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint/checkpoint_failure_reason.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"

namespace snapflow {

// A request for a checkpoint or savepoint, waiting for the decider to let it run.
struct checkpoint_request {
  std::uint64_t request_id = 0;  // assigned by the coordinator, increasing
  checkpoint_trigger_kind kind = checkpoint_trigger_kind::periodic;
  std::int64_t submitted_us = 0;
  std::string target_dir;  // savepoints only

  bool operator==(const checkpoint_request&) const = default;
};

std::ostream& operator<<(std::ostream& os, const checkpoint_request& request);

// The coordinator's state when deciding.
struct coordinator_load {
  bool triggering = false;  // a trigger is mid-way (id allocation, master hooks)
  int pending = 0;          // pending (not yet completed/aborted) checkpoints
  std::optional<std::int64_t> last_completion_us;  // min pause is measured from here
  std::int64_t now_us = 0;
};

// Decides which queued request runs next (after Flink's CheckpointRequestDecider), plus
// coalescing of periodic requests. Pure: the caller passes its load and the time, executes
// what the decision says and fails what it lists. Coordinator thread only.
//
// Priority: savepoints, then manual checkpoints, then periodic ones; older first within a kind.
// Savepoints ignore max concurrent and min pause (a user waits for them, and they do not take
// part in the regular cadence); manual checkpoints respect max concurrent only; periodic ones
// respect both. Nothing runs while a trigger is mid-way, so one trigger's id allocation and
// master hooks never interleave with another's.
class checkpoint_request_decider {
 public:
  checkpoint_request_decider(int max_concurrent, std::int64_t min_pause_us,
                             std::size_t max_queued = 1000);

  struct decision {
    std::optional<checkpoint_request> execute;  // run this one now
    // The caller fails these (their futures, stats and failure manager).
    std::vector<std::pair<checkpoint_request, checkpoint_failure_reason>> failed;
    // A periodic request hit the min pause: schedule the next periodic trigger this far out.
    std::optional<std::int64_t> reschedule_periodic_in_us;
    bool coalesced = false;  // the submitted periodic request merged into one already queued
  };

  // Queues `request` (or coalesces or refuses it) and decides what runs now.
  decision submit(checkpoint_request request, const coordinator_load& load);
  // Decides again after a trigger finished or a checkpoint ended.
  decision next(const coordinator_load& load);
  // Shutdown: returns every queued request in priority order and clears the queue.
  std::vector<checkpoint_request> drain();

  std::size_t queued() const;
  void set_min_pause_us(std::int64_t min_pause_us);
  void set_max_concurrent(int max_concurrent);

  int max_concurrent() const { return max_concurrent_; }
  std::int64_t min_pause_us() const { return min_pause_us_; }
  std::size_t max_queued() const { return max_queued_; }

 private:
  static constexpr std::size_t kind_count = 3;

  std::deque<checkpoint_request>& queue_of(checkpoint_trigger_kind kind);
  void enqueue(checkpoint_request request);
  // The request with the lowest priority among the queued ones and `submitted`.
  bool submitted_is_lowest(const checkpoint_request& submitted) const;
  checkpoint_request remove_lowest();
  void choose(const coordinator_load& load, decision& out);

  int max_concurrent_;
  std::int64_t min_pause_us_;
  std::size_t max_queued_;
  // One queue per kind, indexed by checkpoint_trigger_kind (its order is the priority), each
  // ordered by request id.
  std::deque<checkpoint_request> queues_[kind_count];
};

}  // namespace snapflow
