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
  // zero again) starts over from that sample without a rate.
  void add(std::uint64_t total, std::int64_t timestamp_ms);

  std::uint64_t total() const { return last_total_; }
  // Between the two newest distinct samples; nothing before there are two.
  std::optional<double> per_second() const { return rate_; }
  // From the first sample to the newest (since the latest restart); nothing before there are two.
  std::optional<double> average_per_second() const;

 private:
  bool started_ = false;
  std::uint64_t first_total_ = 0, last_total_ = 0;
  std::int64_t first_ms_ = 0, last_ms_ = 0;
  std::optional<double> rate_;
};

}  // namespace snapflow::cli
