#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace snapflow {

// How a failed job comes back (Flink's restart strategies): plain data, carried in the job graph
// when the job sets its own (a [restart] table, stream_environment::set_restart_strategy) and
// otherwise the coordinator's default. The job master's restart_strategy
// (engine/jobmaster/restart_strategy.hpp) applies it.
//
// Defaults: exponential backoff from 10 ms, times 1.5 after each failure (Flink's multiplier)
// up to 1 s, reset after 60 s without a failure, unlimited attempts: a streaming job should come
// back on its own and at once (a crashed worker is seen in milliseconds, so the backoff would
// otherwise be all of the recovery time), and a crash loop restarts at most once a second, as
// Flink's classic fixed-delay default did. Seven failures in a minute wait 10, 15, 23, 34, 51,
// 76 and 114 ms, not the 11 s of a 100 ms start doubling to 10 s.
struct restart_strategy_config {
  // The wire encodes the declaration index: never reorder.
  enum class kind : std::uint8_t { none, fixed_delay, exponential_delay, failure_rate };
  kind type = kind::exponential_delay;
  std::int32_t max_attempts = -1;                // fixed_delay / exponential_delay; -1 = unlimited
  std::int64_t delay_ms = 1000;                  // fixed_delay / failure_rate
  std::int64_t initial_backoff_ms = 10;          // exponential_delay
  std::int64_t max_backoff_ms = 1'000;           // exponential_delay
  double backoff_multiplier = 1.5;               // exponential_delay
  std::int64_t reset_backoff_after_ms = 60'000;  // exponential_delay: quiet time that resets
  std::int32_t max_failures_per_interval = 3;    // failure_rate
  std::int64_t failure_rate_interval_ms = 60'000;  // failure_rate

  // Every duration is at most this: a larger one is a typo, and the strategy computes in
  // microseconds, which must not overflow.
  static constexpr std::int64_t max_duration_ms = 30LL * 24 * 3600 * 1000;  // 30 days
  static constexpr double max_backoff_multiplier = 1000.0;

  // The first setting out of range, as "restart <setting> must be ... (got ...)", the setting
  // named as in a job file's [restart] table.
  std::optional<std::string> validate() const;
  bool operator==(const restart_strategy_config&) const = default;
};

// Names as written in job files: "none", "fixed_delay", "exponential_backoff", "failure_rate".
// Parsing also accepts "exponential_delay", Flink's name for the same strategy.
std::string_view to_string(restart_strategy_config::kind k);
std::optional<restart_strategy_config::kind> parse_restart_strategy(std::string_view text);

// Whether `setting` (a [restart] key other than "strategy") is used by strategy `k`.
bool restart_setting_applies(restart_strategy_config::kind k, std::string_view setting);

std::ostream& operator<<(std::ostream& os, const restart_strategy_config& c);

}  // namespace snapflow
