#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "common/result.hpp"
#include "engine/state/keyed_state_backend.hpp"

namespace snapflow {

// Where a job's keyed state lives (checkpoint_config::state_backend, Flink's names).
enum class state_backend_kind : std::uint8_t {
  hashmap,  // on the heap (heap_keyed_state_backend)
  rocksdb,  // in an embedded RocksDB instance on local disk (rocksdb_keyed_state_backend)
};

std::string_view to_string(state_backend_kind kind);
// The kind a configured name stands for, or an error naming the accepted ones.
result<state_backend_kind> parse_state_backend(std::string_view name);

// The block cache of each rocksdb instance unless the worker says otherwise
// (--rocksdb-block-cache-mb): index, filter and data blocks. Reads of state that misses it go
// to the files, and a keyed operator that reads per record falls behind: at 1 GiB of state an
// 8 MiB cache made each checkpoint's barrier wait 1.5 s behind records, 128 MiB did not.
constexpr std::size_t default_rocksdb_block_cache_bytes = std::size_t{128} << 20;

// A keyed state backend of `kind` for the key groups `range`. `working_folder` is where a
// backend that keeps state on disk puts it (its own, removed when the backend is gone); the
// heap backend ignores it, `incremental` (checkpoint_config::incremental) too (its checkpoints
// are always full), and `rocksdb_block_cache_bytes`.
result<std::unique_ptr<keyed_state_backend>> make_keyed_state_backend(
    state_backend_kind kind, std::uint32_t max_parallelism, key_group_range range,
    const std::filesystem::path& working_folder, bool incremental = false,
    std::size_t rocksdb_block_cache_bytes = default_rocksdb_block_cache_bytes);

}  // namespace snapflow
