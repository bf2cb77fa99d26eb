#include "cmd/cli/records_rate.hpp"

namespace snapflow::cli {

void records_rate::begin_attempt() {
  earlier_attempts_ += attempt_max_;
  attempt_max_ = 0;
  ++attempts_;
  fresh_attempt_ = true;
}

void records_rate::add(std::uint64_t total, std::int64_t timestamp_ms, std::uint64_t restarts) {
  if (restarts != restarts_) {
    restarts_ = restarts;
    begin_attempt();
  }
  if (timestamp_ms <= 0) return;
  if (started_ && timestamp_ms <= last_ms_) return;
  // Counted afresh without the restart count changing (between two polls): a new attempt too.
  if (started_ && !fresh_attempt_ && total < last_total_) begin_attempt();
  if (total > attempt_max_) attempt_max_ = total;
  if (!started_ || fresh_attempt_) {
    started_ = true;
    fresh_attempt_ = false;
    first_total_ = last_total_ = total;
    first_ms_ = last_ms_ = timestamp_ms;
    rate_.reset();
    return;
  }
  rate_ = static_cast<double>(total - last_total_) * 1000.0 /
          static_cast<double>(timestamp_ms - last_ms_);
  last_total_ = total;
  last_ms_ = timestamp_ms;
}

std::optional<double> records_rate::average_per_second() const {
  if (!started_ || last_ms_ <= first_ms_) return std::nullopt;
  return static_cast<double>(last_total_ - first_total_) * 1000.0 /
         static_cast<double>(last_ms_ - first_ms_);
}

}  // namespace snapflow::cli
