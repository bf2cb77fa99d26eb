#include "graph/restart_strategy_config.hpp"

namespace snapflow {

std::string_view to_string(restart_strategy_config::kind k) {
  switch (k) {
    case restart_strategy_config::kind::none:
      return "none";
    case restart_strategy_config::kind::fixed_delay:
      return "fixed_delay";
    case restart_strategy_config::kind::exponential_delay:
      return "exponential_backoff";
    case restart_strategy_config::kind::failure_rate:
      return "failure_rate";
  }
  return "unknown";
}

std::optional<restart_strategy_config::kind> parse_restart_strategy(std::string_view text) {
  if (text == "exponential_delay") return restart_strategy_config::kind::exponential_delay;
  for (auto k : {restart_strategy_config::kind::none, restart_strategy_config::kind::fixed_delay,
                 restart_strategy_config::kind::exponential_delay,
                 restart_strategy_config::kind::failure_rate})
    if (to_string(k) == text) return k;
  return std::nullopt;
}

bool restart_setting_applies(restart_strategy_config::kind k, std::string_view setting) {
  using kind = restart_strategy_config::kind;
  switch (k) {
    case kind::none:
      return false;
    case kind::fixed_delay:
      return setting == "max_attempts" || setting == "delay_ms";
    case kind::exponential_delay:
      return setting == "max_attempts" || setting == "initial_backoff_ms" ||
             setting == "max_backoff_ms" || setting == "backoff_multiplier" ||
             setting == "reset_backoff_after_ms";
    case kind::failure_rate:
      return setting == "delay_ms" || setting == "max_failures_per_interval" ||
             setting == "failure_rate_interval_ms";
  }
  return false;
}

namespace {

std::optional<std::string> duration_problem(std::string_view setting, std::int64_t value,
                                            std::int64_t min) {
  if (value >= min && value <= restart_strategy_config::max_duration_ms) return std::nullopt;
  return "restart " + std::string(setting) + " must be between " + std::to_string(min) + " and " +
         std::to_string(restart_strategy_config::max_duration_ms) + " (got " +
         std::to_string(value) + ")";
}

}  // namespace

std::optional<std::string> restart_strategy_config::validate() const {
  if (max_attempts < -1)
    return "restart max_attempts must be >= -1 (-1 = unlimited) (got " +
           std::to_string(max_attempts) + ")";
  if (auto p = duration_problem("delay_ms", delay_ms, 0)) return p;
  if (auto p = duration_problem("initial_backoff_ms", initial_backoff_ms, 1)) return p;
  if (auto p = duration_problem("max_backoff_ms", max_backoff_ms, 1)) return p;
  if (max_backoff_ms < initial_backoff_ms)
    return "restart max_backoff_ms must be >= initial_backoff_ms (" +
           std::to_string(initial_backoff_ms) + ") (got " + std::to_string(max_backoff_ms) + ")";
  // Written so NaN fails too.
  if (!(backoff_multiplier >= 1.0 && backoff_multiplier <= max_backoff_multiplier))
    return "restart backoff_multiplier must be between 1 and 1000 (got " +
           std::to_string(backoff_multiplier) + ")";
  if (auto p = duration_problem("reset_backoff_after_ms", reset_backoff_after_ms, 1)) return p;
  if (max_failures_per_interval < 1)
    return "restart max_failures_per_interval must be >= 1 (got " +
           std::to_string(max_failures_per_interval) + ")";
  if (auto p = duration_problem("failure_rate_interval_ms", failure_rate_interval_ms, 1)) return p;
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, const restart_strategy_config& c) {
  os << "restart{" << to_string(c.type);
  using kind = restart_strategy_config::kind;
  switch (c.type) {
    case kind::none:
      break;
    case kind::fixed_delay:
      os << ", max_attempts=" << c.max_attempts << ", delay_ms=" << c.delay_ms;
      break;
    case kind::exponential_delay:
      os << ", max_attempts=" << c.max_attempts << ", initial_backoff_ms=" << c.initial_backoff_ms
         << ", max_backoff_ms=" << c.max_backoff_ms
         << ", backoff_multiplier=" << c.backoff_multiplier
         << ", reset_backoff_after_ms=" << c.reset_backoff_after_ms;
      break;
    case kind::failure_rate:
      os << ", delay_ms=" << c.delay_ms
         << ", max_failures_per_interval=" << c.max_failures_per_interval
         << ", failure_rate_interval_ms=" << c.failure_rate_interval_ms;
      break;
  }
  return os << "}";
}

}  // namespace snapflow
