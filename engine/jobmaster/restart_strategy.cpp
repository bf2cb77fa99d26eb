#include "engine/jobmaster/restart_strategy.hpp"

#include <algorithm>

namespace snapflow {

restart_strategy::restart_strategy(restart_strategy_config config) : config_(config) {}

std::optional<std::int64_t> restart_strategy::on_failure(std::int64_t now_us) {
  using k = restart_strategy_config::kind;
  switch (config_.type) {
    case k::none:
      return std::nullopt;
    case k::fixed_delay:
      if (config_.max_attempts >= 0 && attempts_ >= config_.max_attempts) return std::nullopt;
      ++attempts_;
      return config_.delay_ms * 1000;
    case k::exponential_delay: {
      if (config_.max_attempts >= 0 && attempts_ >= config_.max_attempts) return std::nullopt;
      const bool quiet = last_failure_us_ &&
                         now_us - *last_failure_us_ > config_.reset_backoff_after_ms * 1000;
      if (current_backoff_ms_ == 0 || quiet) {
        current_backoff_ms_ = config_.initial_backoff_ms;
      } else {
        current_backoff_ms_ = std::min<std::int64_t>(
            config_.max_backoff_ms,
            static_cast<std::int64_t>(static_cast<double>(current_backoff_ms_) *
                                      config_.backoff_multiplier));
      }
      last_failure_us_ = now_us;
      ++attempts_;
      return current_backoff_ms_ * 1000;
    }
    case k::failure_rate: {
      recent_failures_us_.push_back(now_us);
      while (!recent_failures_us_.empty() &&
             now_us - recent_failures_us_.front() > config_.failure_rate_interval_ms * 1000)
        recent_failures_us_.pop_front();
      if (static_cast<std::int32_t>(recent_failures_us_.size()) >
          config_.max_failures_per_interval)
        return std::nullopt;
      ++attempts_;
      return config_.delay_ms * 1000;
    }
  }
  return std::nullopt;
}

}  // namespace snapflow
