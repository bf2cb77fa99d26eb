#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "graph/ids.hpp"

namespace snapflow {

// What started a checkpoint, in priority order: savepoints first, then manual checkpoints, then
// periodic ones.
enum class checkpoint_trigger_kind : std::uint8_t { savepoint, manual, periodic };

std::string_view to_string(checkpoint_trigger_kind kind);

// Who owns a state file. Most belong to the one checkpoint whose folder holds them. An
// incremental checkpoint also names files in the job's `shared/` folder, which later
// checkpoints reuse instead of writing again: those belong to the shared-state registry, which
// deletes one only when no retained checkpoint uses it any more.
enum class handle_sharing : std::uint8_t {
  exclusive,      // this checkpoint's own (and every inline state)
  shared_new,     // written into shared/ for this checkpoint
  shared_reused,  // in shared/, written for an earlier checkpoint and used again by this one
};

std::string_view to_string(handle_sharing sharing);

// Where a subtask's state for one checkpoint is: a file it wrote, or, for a small state, the
// bytes themselves (`inline_bytes`, `path` empty), carried in the acknowledgement and kept in
// the checkpoint's `_metadata` (Flink's memory threshold: a tiny state is not worth a file, an
// fsync and a thread hop). `size` and `checksum` (CRC-32C) describe the bytes either way and are
// verified on restore, so a torn or corrupt state is never loaded.
struct state_handle {
  std::string path;
  std::uint64_t size = 0;
  std::uint32_t checksum = 0;
  std::optional<std::string> inline_bytes;
  handle_sharing sharing = handle_sharing::exclusive;

  bool is_inline() const { return inline_bytes.has_value(); }
  bool is_shared() const { return sharing != handle_sharing::exclusive; }
  bool operator==(const state_handle&) const = default;
};

// What a keyed subtask's state covers: the key groups [first_key_group, last_key_group] cut at
// `max_parallelism` (Flink's KeyGroupRange beside a KeyedStateHandle). A key lands in a key
// group by the max parallelism, so state cut at one max parallelism cannot be read at another:
// the coordinator refuses such a restore at submission and a worker before it reads a file.
struct keyed_state_scope {
  std::uint32_t max_parallelism = 0;
  std::uint32_t first_key_group = 0;
  std::uint32_t last_key_group = 0;

  // A non-empty range inside the max parallelism: what a peer must send.
  bool is_valid() const {
    return max_parallelism >= 1 && first_key_group <= last_key_group &&
           last_key_group < max_parallelism;
  }
  bool operator==(const keyed_state_scope&) const = default;
};

// Everything one subtask contributed to one checkpoint. `keyed` is absent for an operator
// without keyed state (and in metadata written before it was recorded).
struct subtask_state {
  std::vector<state_handle> handles;
  std::uint64_t state_size = 0;
  std::optional<keyed_state_scope> keyed;

  bool operator==(const subtask_state&) const = default;
};

// A checkpoint whose metadata is durable: what restore reads. `location` is its folder
// (`<state-dir>/<job-id>/chk-<id>` or a savepoint folder).
struct completed_checkpoint {
  job_id job;
  checkpoint_id id = 0;
  checkpoint_trigger_kind kind = checkpoint_trigger_kind::periodic;
  std::int64_t trigger_timestamp_us = 0;
  std::int64_t completion_timestamp_us = 0;
  std::string location;
  std::map<subtask_id, subtask_state> subtask_states;
  std::map<std::string, std::string> master_states;  // master hook name -> its bytes

  bool is_savepoint() const { return kind == checkpoint_trigger_kind::savepoint; }
  std::uint64_t state_size() const {
    std::uint64_t total = 0;
    for (const auto& [_, s] : subtask_states) total += s.state_size;
    return total;
  }
  // Every state file of every subtask (what discarding the checkpoint deletes).
  std::vector<state_handle> all_handles() const {
    std::vector<state_handle> out;
    for (const auto& [_, s] : subtask_states) out.insert(out.end(), s.handles.begin(), s.handles.end());
    return out;
  }

  bool operator==(const completed_checkpoint&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const state_handle& h) {
  os << "state_handle{" << h.path << ", size=" << h.size << ", crc=" << h.checksum;
  if (h.is_shared()) os << ", " << to_string(h.sharing);
  return os << "}";
}

inline std::ostream& operator<<(std::ostream& os, const completed_checkpoint& c) {
  return os << "completed_checkpoint{job=" << c.job << ", id=" << c.id
            << ", kind=" << to_string(c.kind) << ", location=" << c.location
            << ", subtasks=" << c.subtask_states.size() << ", hooks=" << c.master_states.size()
            << "}";
}

inline std::string_view to_string(handle_sharing sharing) {
  switch (sharing) {
    case handle_sharing::exclusive:
      return "exclusive";
    case handle_sharing::shared_new:
      return "shared_new";
    case handle_sharing::shared_reused:
      return "shared_reused";
  }
  return "unknown";
}

inline std::string_view to_string(checkpoint_trigger_kind kind) {
  switch (kind) {
    case checkpoint_trigger_kind::savepoint:
      return "savepoint";
    case checkpoint_trigger_kind::manual:
      return "manual";
    case checkpoint_trigger_kind::periodic:
      return "periodic";
  }
  return "unknown";
}

}  // namespace snapflow
