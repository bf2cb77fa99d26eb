#include "engine/jobmaster/restart_strategy.hpp"

#include <algorithm>

namespace snapflow {

std::string_view to_string(restart_strategy_config::kind k) {
  switch (k) {
    case restart_strategy_config::kind::none:
      return "none";
    case restart_strategy_config::kind::fixed_delay:
      return "fixed_delay";
    case restart_strategy_config::kind::exponential_delay:
      return "exponential_delay";
    case restart_strategy_config::kind::failure_rate:
      return "failure_rate";
  }
  return "unknown";
}

std::optional<restart_strategy_config::kind> parse_restart_strategy(std::string_view text) {
  for (auto k : {restart_strategy_config::kind::none, restart_strategy_config::kind::fixed_delay,
                 restart_strategy_config::kind::exponential_delay,
                 restart_strategy_config::kind::failure_rate})
    if (to_string(k) == text) return k;
  return std::nullopt;
}

std::optional<std::string> restart_strategy_config::validate() const {
  if (max_attempts < -1) return std::string("restart max_attempts must be >= -1 (-1 = unlimited)");
  if (delay_ms < 0) return std::string("restart delay_ms must be >= 0");
  if (initial_backoff_ms < 1) return std::string("restart initial_backoff_ms must be >= 1");
  if (max_backoff_ms < initial_backoff_ms)
    return std::string("restart max_backoff_ms must be >= initial_backoff_ms");
  if (backoff_multiplier < 1.0) return std::string("restart backoff_multiplier must be >= 1");
  if (max_failures_per_interval < 1)
    return std::string("restart max_failures_per_interval must be >= 1");
  if (failure_rate_interval_ms < 1)
    return std::string("restart failure_rate_interval_ms must be >= 1");
  return std::nullopt;
}

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
