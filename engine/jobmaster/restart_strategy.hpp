#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "graph/restart_strategy_config.hpp"

namespace snapflow {

// Decides, failure by failure, whether and when to restart. Times are microseconds.
class restart_strategy {
 public:
  explicit restart_strategy(restart_strategy_config config);

  // A failure happened at now_us: the delay before restarting, or nothing when exhausted.
  std::optional<std::int64_t> on_failure(std::int64_t now_us);
  std::int32_t attempts() const { return attempts_; }
  const restart_strategy_config& config() const { return config_; }

 private:
  restart_strategy_config config_;
  std::int32_t attempts_ = 0;
  std::int64_t current_backoff_ms_ = 0;
  std::optional<std::int64_t> last_failure_us_;
  std::deque<std::int64_t> recent_failures_us_;
};

}  // namespace snapflow
