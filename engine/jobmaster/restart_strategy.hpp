#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace snapflow {

// How a failed job comes back (Flink's restart strategies). Defaults: exponential delay from
// 100 ms doubling to at most 10 s, reset after 60 s without failure, unlimited attempts — a
// streaming job should come back on its own, fast at first and without hammering a sick machine.
struct restart_strategy_config {
  enum class kind : std::uint8_t { none, fixed_delay, exponential_delay, failure_rate };
  kind type = kind::exponential_delay;
  std::int32_t max_attempts = -1;           // fixed_delay / exponential_delay; -1 = unlimited
  std::int64_t delay_ms = 1000;             // fixed_delay / failure_rate
  std::int64_t initial_backoff_ms = 100;    // exponential_delay
  std::int64_t max_backoff_ms = 10'000;     // exponential_delay
  double backoff_multiplier = 2.0;          // exponential_delay
  std::int64_t reset_backoff_after_ms = 60'000;  // exponential_delay: quiet time that resets
  std::int32_t max_failures_per_interval = 3;    // failure_rate
  std::int64_t failure_rate_interval_ms = 60'000;  // failure_rate

  std::optional<std::string> validate() const;
  bool operator==(const restart_strategy_config&) const = default;
};

std::string_view to_string(restart_strategy_config::kind k);
std::optional<restart_strategy_config::kind> parse_restart_strategy(std::string_view text);

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
