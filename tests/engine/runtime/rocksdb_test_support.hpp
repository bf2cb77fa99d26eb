#pragma once

// A job's checkpoint folders (chk-<id>, shared) and rocksdb backends' working folders in one
// temporary folder, for tests of incremental checkpoints and restores from their files.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "engine/state/key_groups.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"
#include "tests/support/temp_folder.hpp"

namespace snapflow::runtime_test {

struct rocksdb_job_dir {
  std::uint32_t max_parallelism = 128;
  snapflow::testing::temp_folder dir;
  int made = 0;

  std::filesystem::path shared() const { return dir.path() / "job" / "shared"; }
  std::filesystem::path checkpoint(checkpoint_id id) const {
    return dir.path() / "job" / ("chk-" + std::to_string(id));
  }

  // A new incremental backend for subtask `index` of `parallelism`.
  std::unique_ptr<rocksdb_keyed_state_backend> make(std::uint32_t index,
                                                    std::uint32_t parallelism) {
    auto b = rocksdb_keyed_state_backend::open(
        max_parallelism, key_groups::range_for_subtask(index, parallelism, max_parallelism),
        dir.path() / "local" / ("backend-" + std::to_string(made++)), /*incremental=*/true);
    REQUIRE(b);
    return std::move(b).value();
  }

  // Checkpoint `id` of `b`, stored as its files.
  incremental_keyed_snapshot::stored store(rocksdb_keyed_state_backend& b, checkpoint_id id,
                                           const std::string& prefix = "sum-0-0") {
    auto snapshot = b.snapshot_incremental(id);
    REQUIRE(snapshot);
    REQUIRE(*snapshot);
    std::filesystem::create_directories(checkpoint(id));
    auto stored = (*snapshot)->store(shared(), checkpoint(id), prefix);
    if (!stored) FAIL(stored.err().message);
    return std::move(stored).value();
  }

  // What a restore is handed for a stored checkpoint: its manifest, the files where they are.
  keyed_files_restore restore_part(const incremental_keyed_snapshot::stored& s,
                                   checkpoint_id id) const {
    keyed_files_restore part;
    part.manifest = s.manifest;
    for (const auto& f : s.manifest.files)
      part.paths.push_back(f.shared ? shared() / f.handle_name : checkpoint(id) / f.handle_name);
    return part;
  }

  // store(), as a restore is handed it.
  keyed_files_restore store_part(rocksdb_keyed_state_backend& b, checkpoint_id id,
                                 const std::string& prefix) {
    return restore_part(store(b, id, prefix), id);
  }
};

}  // namespace snapflow::runtime_test
