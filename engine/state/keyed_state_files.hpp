#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace snapflow {

// One file of a keyed snapshot kept as the backend's own files (an incremental rocksdb
// checkpoint): the name the backend's instance knows it by and the state handle it was stored as.
struct keyed_state_file {
  std::string local_name;   // in the instance's folder: "000012.sst", "MANIFEST-000005", ...
  std::string handle_name;  // the last component of its handle's path (unique in the handle set)
  std::uint64_t size = 0;
  std::uint32_t checksum = 0;  // CRC-32C
  bool shared = false;         // in the job's shared/ folder (else the checkpoint's own)

  bool operator==(const keyed_state_file&) const = default;
};

// The manifest of such a snapshot, carried in the subtask's state file: which key groups the
// instance held and which handle is which of its files, so a restore can rebuild its folder.
struct keyed_state_files {
  std::uint32_t max_parallelism = 0;
  std::uint32_t first_key_group = 0;
  std::uint32_t last_key_group = 0;
  std::vector<keyed_state_file> files;

  bool operator==(const keyed_state_files&) const = default;
};

// One old subtask's files to restore from: its manifest and, per manifest file in the same
// order, where the file is now (the absolute path its handle was resolved to).
struct keyed_files_restore {
  keyed_state_files manifest;
  std::vector<std::filesystem::path> paths;
};

}  // namespace snapflow
