#include "engine/state/state_backend_kind.hpp"

#include <string>

#include "engine/state/heap_keyed_state_backend.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"

namespace snapflow {

std::string_view to_string(state_backend_kind kind) {
  switch (kind) {
    case state_backend_kind::hashmap:
      return "hashmap";
    case state_backend_kind::rocksdb:
      return "rocksdb";
  }
  return "unknown";
}

result<state_backend_kind> parse_state_backend(std::string_view name) {
  if (name == "hashmap") return state_backend_kind::hashmap;
  if (name == "rocksdb") return state_backend_kind::rocksdb;
  return error{"unknown state backend '" + std::string(name) + "' (expected hashmap or rocksdb)"};
}

result<std::unique_ptr<keyed_state_backend>> make_keyed_state_backend(
    state_backend_kind kind, std::uint32_t max_parallelism, key_group_range range,
    const std::filesystem::path& working_folder, bool incremental,
    std::size_t rocksdb_block_cache_bytes) {
  if (kind == state_backend_kind::hashmap)
    return std::unique_ptr<keyed_state_backend>(
        std::make_unique<heap_keyed_state_backend>(max_parallelism, range));
  auto db = rocksdb_keyed_state_backend::open(max_parallelism, range, working_folder,
                                              incremental, rocksdb_block_cache_bytes);
  if (!db) return db.err();
  return std::unique_ptr<keyed_state_backend>(std::move(db).value());
}

}  // namespace snapflow
