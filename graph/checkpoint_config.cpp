#include "graph/checkpoint_config.hpp"

#include <sstream>

namespace snapflow {

std::string_view to_string(checkpointing_mode mode) {
  switch (mode) {
    case checkpointing_mode::exactly_once:
      return "exactly_once";
    case checkpointing_mode::at_least_once:
      return "at_least_once";
  }
  return "unknown";
}

std::string_view to_string(externalized_retention retention) {
  switch (retention) {
    case externalized_retention::delete_on_cancellation:
      return "delete_on_cancellation";
    case externalized_retention::retain_on_cancellation:
      return "retain_on_cancellation";
  }
  return "unknown";
}

std::optional<checkpointing_mode> parse_checkpointing_mode(std::string_view text) {
  if (text == "exactly_once" || text == "EXACTLY_ONCE") return checkpointing_mode::exactly_once;
  if (text == "at_least_once" || text == "AT_LEAST_ONCE") return checkpointing_mode::at_least_once;
  return std::nullopt;
}

std::optional<externalized_retention> parse_externalized_retention(std::string_view text) {
  if (text == "delete_on_cancellation" || text == "DELETE_ON_CANCELLATION")
    return externalized_retention::delete_on_cancellation;
  if (text == "retain_on_cancellation" || text == "RETAIN_ON_CANCELLATION")
    return externalized_retention::retain_on_cancellation;
  return std::nullopt;
}

namespace {
template <typename T>
std::string out_of_range(std::string_view setting, std::string_view range, T got) {
  std::ostringstream os;
  os << "checkpoint " << setting << " must be " << range << " (got " << got << ")";
  return os.str();
}
}  // namespace

std::optional<std::string> checkpoint_config::validate() const {
  // The upper bounds keep time arithmetic in microseconds far from overflow.
  if (interval && (*interval < min_interval || *interval > max_duration))
    return out_of_range("interval_ms", "between 1 and 2592000000 (30 days)", interval->count());
  if (timeout.count() < 1 || timeout > max_duration)
    return out_of_range("timeout_ms", "between 1 and 2592000000 (30 days)", timeout.count());
  if (min_pause.count() < 0 || min_pause > max_duration)
    return out_of_range("min_pause_ms", "between 0 and 2592000000 (30 days)", min_pause.count());
  if (max_concurrent < 1) return out_of_range("max_concurrent", ">= 1", max_concurrent);
  if (tolerable_failures < 0)
    return out_of_range("tolerable_failures", ">= 0", tolerable_failures);
  if (retained < 1 || retained > max_retained)
    return out_of_range("retained", "between 1 and 10000", retained);
  if (stats_history_size < 0 || stats_history_size > max_stats_history_size)
    return out_of_range("stats_history_size", "between 0 and 100000", stats_history_size);
  if (unaligned && mode != checkpointing_mode::exactly_once)
    return std::string(
        "checkpoint unaligned requires mode exactly_once (got at_least_once): unaligned "
        "checkpoints only exist for exactly-once alignment");
  if (aligned_checkpoint_timeout.count() < 0 || aligned_checkpoint_timeout > max_duration)
    return out_of_range("aligned_checkpoint_timeout_ms", "between 0 and 2592000000 (30 days)",
                        aligned_checkpoint_timeout.count());
  if (!unaligned && aligned_checkpoint_timeout.count() > 0)
    return std::string(
        "checkpoint aligned_checkpoint_timeout_ms needs unaligned = true: it is how long a "
        "checkpoint stays aligned before it goes unaligned");
  if (max_in_flight_bytes < 0 || max_in_flight_bytes > max_in_flight_bytes_limit)
    return out_of_range("max_in_flight_bytes", "between 0 and 1073741824 (1 GiB; 0: no byte bound)",
                        max_in_flight_bytes);
  if (buffer_debloat_target.count() < 1 || buffer_debloat_target > max_debloat_target)
    return out_of_range("buffer_debloat_target_ms", "between 1 and 600000 (10 minutes)",
                        buffer_debloat_target.count());
  if (buffer_debloat && max_in_flight_bytes == 0)
    return std::string(
        "checkpoint buffer_debloat needs max_in_flight_bytes > 0: it is the largest bound "
        "debloating may give a channel");
  if (unaligned && max_concurrent > 1)
    return out_of_range("max_concurrent", "1 when unaligned checkpoints are enabled",
                        max_concurrent);
  // Flink's names; any other is refused, not ignored.
  if (state_backend != "hashmap" && state_backend != "rocksdb")
    return "unknown checkpoint state_backend '" + state_backend +
           "' (expected hashmap, keyed state on the heap, or rocksdb, keyed state in an "
           "embedded RocksDB on the worker's local disk)";
  if (inline_state_max_bytes < 0 || inline_state_max_bytes > max_inline_state_bytes)
    return out_of_range("inline_state_max_bytes", "between 0 and 1048576 (1 MiB)",
                        inline_state_max_bytes);
  return std::nullopt;
}

void checkpoint_config::check() const {
  if (auto error = validate()) throw invalid_config(*error);
}

std::ostream& operator<<(std::ostream& os, const checkpoint_config& c) {
  os << "checkpoint_config{interval_ms=";
  if (c.interval)
    os << c.interval->count();
  else
    os << "off";
  os << ", timeout_ms=" << c.timeout.count() << ", min_pause_ms=" << c.min_pause.count()
     << ", max_concurrent=" << c.max_concurrent << ", tolerable_failures=" << c.tolerable_failures
     << ", mode=" << to_string(c.mode) << ", unaligned=" << c.unaligned
     << ", aligned_checkpoint_timeout_ms=" << c.aligned_checkpoint_timeout.count()
     << ", max_in_flight_bytes=" << c.max_in_flight_bytes
     << ", buffer_debloat=" << c.buffer_debloat
     << ", buffer_debloat_target_ms=" << c.buffer_debloat_target.count()
     << ", retained=" << c.retained << ", retention=" << to_string(c.retention)
     << ", checkpoint_dir=" << c.checkpoint_dir << ", savepoint_dir=" << c.savepoint_dir
     << ", stats_history_size=" << c.stats_history_size << ", state_backend=" << c.state_backend
     << ", incremental=" << c.incremental
     << ", inline_state_max_bytes=" << c.inline_state_max_bytes << "}";
  return os;
}

}  // namespace snapflow
