#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace snapflow {

enum class checkpointing_mode : std::uint8_t { exactly_once, at_least_once };

// What happens to the files of retained checkpoints when the job is cancelled.
enum class externalized_retention : std::uint8_t {
  delete_on_cancellation,
  retain_on_cancellation,
};

std::string_view to_string(checkpointing_mode mode);
std::string_view to_string(externalized_retention retention);
std::optional<checkpointing_mode> parse_checkpointing_mode(std::string_view text);
std::optional<externalized_retention> parse_externalized_retention(std::string_view text);

// Thrown by the user API when a setting is outside its allowed range. The message names the
// setting and the range, e.g. "checkpoint timeout_ms must be >= 1 (got 0)".
class invalid_config : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Everything the checkpoint coordinator is configured with. Plain data: validate() checks it as a
// whole (some settings constrain each other) and names the first offending setting.
struct checkpoint_config {
  // Periodic checkpoints are off when unset (checkpointing may still be used manually).
  std::optional<std::chrono::milliseconds> interval;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds min_pause{0};
  std::int32_t max_concurrent = 1;
  std::int32_t tolerable_failures = 0;
  checkpointing_mode mode = checkpointing_mode::exactly_once;
  bool unaligned = false;
  // With unaligned: a checkpoint starts aligned and a subtask switches it to unaligned once its
  // alignment took this long (Flink's execution.checkpointing.aligned-checkpoint-timeout);
  // 0: unaligned from the first barrier.
  std::chrono::milliseconds aligned_checkpoint_timeout{0};
  // The most bytes of records one channel holds on their way to its consumer (queued at the
  // consumer, not yet taken); a producer waits for room once they reach it, and a batch is cut
  // once its records reach it. One record larger than the bound still passes, alone. 0: only
  // the batch counts bound a channel (docs/unaligned-checkpoints.md, "Bounded in-flight data").
  std::int64_t max_in_flight_bytes = 0;
  // Buffer debloating (Flink's taskmanager.network.memory.buffer-debloat.*): each subtask bounds
  // its input channels to buffer_debloat_target's worth of the throughput it consumes, between
  // a small minimum and max_in_flight_bytes (which it needs).
  bool buffer_debloat = false;
  std::chrono::milliseconds buffer_debloat_target{1000};
  std::int32_t retained = 1;
  externalized_retention retention = externalized_retention::delete_on_cancellation;
  std::string checkpoint_dir;
  std::string savepoint_dir;
  std::int32_t stats_history_size = 10;
  std::string state_backend = "hashmap";
  // Incremental checkpoints (Flink's state.backend.incremental): the rocksdb backend uploads
  // only the files its previous confirmed checkpoint did not, into the job's shared/ folder.
  // Accepted and ignored with the hashmap backend, whose checkpoints are always full.
  bool incremental = false;
  // A subtask state that encodes to at most this many bytes travels inside the acknowledgement
  // and is kept in the checkpoint's _metadata instead of a state file of its own: no file, no
  // fsync, no hand-off to the snapshot threads (Flink's memory threshold). 0 writes every state
  // to a file. Restore sends a subtask every old state of its vertex, so keep it small.
  std::int32_t inline_state_max_bytes = 4096;

  static constexpr std::chrono::milliseconds min_interval{1};
  static constexpr std::chrono::milliseconds max_duration{30LL * 24 * 3600 * 1000};
  static constexpr std::int32_t max_stats_history_size = 100'000;
  static constexpr std::int32_t max_retained = 10'000;
  static constexpr std::int32_t max_inline_state_bytes = 1 << 20;
  static constexpr std::int64_t max_in_flight_bytes_limit = std::int64_t{1} << 30;
  static constexpr std::chrono::milliseconds max_debloat_target{600'000};

  bool periodic() const { return interval.has_value(); }

  // Empty when valid, otherwise a message naming the setting and its allowed range.
  std::optional<std::string> validate() const;
  // Throws invalid_config with validate()'s message.
  void check() const;

  bool operator==(const checkpoint_config&) const = default;
};

std::ostream& operator<<(std::ostream& os, const checkpoint_config& config);

}  // namespace snapflow
