#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "common/result.hpp"

namespace snapflow {

// Copies of whole files for keyed snapshots kept as files: uploads into checkpoint folders and
// the rebuilding of a local instance from them. Every failure is an error naming the file.
class file_copy {
 public:
  struct copied {
    std::uint64_t size = 0;
    std::uint32_t checksum = 0;  // CRC-32C of the bytes copied
  };

  // Copies `from` into a new file `to` (an existing one is replaced) and fsyncs it; the size
  // and checksum are those of the bytes written. The caller fsyncs `to`'s folder.
  static result<copied> copy_durably(const std::filesystem::path& from,
                                     const std::filesystem::path& to);
  // The same for the first `size` bytes of `from` (a file its writer appends to, as it was at
  // a point where it had `size` bytes); a shorter file is an error naming it.
  static result<copied> copy_durably(const std::filesystem::path& from,
                                     const std::filesystem::path& to, std::uint64_t size);
  // Writes `bytes` into a new file `to` (an existing one is replaced) and fsyncs it.
  static result<copied> write_durably(const std::filesystem::path& to, std::string_view bytes);
  // Copies `from` into `to` (not synced: a local working copy) and refuses it, naming `from`,
  // unless it has exactly `size` bytes with CRC-32C `checksum`: a missing, torn or corrupt file
  // is never used.
  static result<void> copy_verified(const std::filesystem::path& from,
                                    const std::filesystem::path& to, std::uint64_t size,
                                    std::uint32_t checksum);

  // The same for files that never change once written (RocksDB's SST files): `to` becomes a
  // hard link to `from` when both lie on one filesystem, so nothing is written but a folder
  // entry; the file is read once for its size and checksum (and, durably, synced). Across
  // filesystems, or where links are not allowed, they copy. Never for a file a program appends
  // to (a RocksDB MANIFEST): the link would carry the appends into the other name.
  static result<copied> link_or_copy_durably(const std::filesystem::path& from,
                                             const std::filesystem::path& to);
  // link_or_copy_durably() for a file whose writer already synced it and gave its size and
  // checksum (RocksDB records a CRC-32C of each SST it writes): a link is not read at all, only
  // its size checked (a file of another size is refused), and the caller's fsync of `to`'s
  // folder makes the new name durable. A copy is checked against `checksum` as it is written.
  static result<copied> link_or_copy_known(const std::filesystem::path& from,
                                           const std::filesystem::path& to, std::uint64_t size,
                                           std::uint32_t checksum);
  static result<void> link_or_copy_verified(const std::filesystem::path& from,
                                            const std::filesystem::path& to, std::uint64_t size,
                                            std::uint32_t checksum);
};

}  // namespace snapflow
