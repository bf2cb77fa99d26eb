#pragma once

#include <cstdint>
#include <optional>

namespace snapflow::cli {

// records/s from successive samples of a cumulative record count stamped with the time the
// coordinator received it (GET /jobs/:id: "source-records", "records-timestamp" in ms). The
// rate is computed between samples with different stamps, never from the polling times, so
// polling faster than workers heartbeat shows a steady rate instead of bursts and zeros.
class records_rate {
 public:
  // A stamp of 0 means no counters were reported yet and is ignored, as is a sample not newer
  // than the last one. A count lower than before (the job restarted and its tasks count from
  // zero again) starts over from that sample without a rate. `restarts` is the job's restart
  // count as GET /jobs/:id reports it: a new value starts a new attempt the same way.
  void add(std::uint64_t total, std::int64_t timestamp_ms, std::uint64_t restarts = 0);

  // The current attempt's count, as the coordinator reports it.
  std::uint64_t total() const { return last_total_; }
  // Records the sources emitted over every attempt of the job: the highest count seen in each
  // earlier attempt plus the current one's. The coordinator reports the counters of the
  // current attempt only (its tasks count from zero), so the sum is kept here rather than
  // asking REST for a cumulative count: REST stays a view of the attempts that exist, and this
  // command sees every attempt go by since it polls from submission to the end. An attempt's
  // records after its last report before a failure are not seen, and records a restarted
  // source replays from its checkpoint count again: this is work done, not distinct records.
  std::uint64_t total_across_restarts() const { return earlier_attempts_ + attempt_max_; }
  // How many attempts the samples came from (1 before any restart was seen).
  std::uint64_t attempts() const { return attempts_; }
  // Between the two newest distinct samples; nothing before there are two.
  std::optional<double> per_second() const { return rate_; }
  // From the first sample to the newest (since the latest restart); nothing before there are two.
  std::optional<double> average_per_second() const;

 private:
  void begin_attempt();

  bool started_ = false;
  bool fresh_attempt_ = false;  // the next accepted sample is the first of an attempt
  std::uint64_t first_total_ = 0, last_total_ = 0;
  std::int64_t first_ms_ = 0, last_ms_ = 0;
  std::optional<double> rate_;
  std::uint64_t restarts_ = 0;
  std::uint64_t earlier_attempts_ = 0;  // sum of the highest counts of finished attempts
  std::uint64_t attempt_max_ = 0;       // highest count of the current attempt
  std::uint64_t attempts_ = 1;
};

}  // namespace snapflow::cli
