#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "engine/state/keyed_state_backend.hpp"
#include "graph/result.hpp"

namespace snapflow {

// Where a job's keyed state lives (checkpoint_config::state_backend, Flink's names).
enum class state_backend_kind : std::uint8_t {
  hashmap,  // on the heap (heap_keyed_state_backend)
  rocksdb,  // in an embedded RocksDB instance on local disk (rocksdb_keyed_state_backend)
};

std::string_view to_string(state_backend_kind kind);
// The kind a configured name stands for, or an error naming the accepted ones.
result<state_backend_kind> parse_state_backend(std::string_view name);

// A keyed state backend of `kind` for the key groups `range`. `working_folder` is where a
// backend that keeps state on disk puts it (its own, removed when the backend is gone); the
// heap backend ignores it, and `incremental` (checkpoint_config::incremental) too: its
// checkpoints are always full.
result<std::unique_ptr<keyed_state_backend>> make_keyed_state_backend(
    state_backend_kind kind, std::uint32_t max_parallelism, key_group_range range,
    const std::filesystem::path& working_folder, bool incremental = false);

}  // namespace snapflow
