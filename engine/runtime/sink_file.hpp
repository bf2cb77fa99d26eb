#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace snapflow {

// An output file the file sinks write: appends go through a user-space buffer (one write call
// per 64 KiB, not per line), flush() hands the buffer to the kernel, close() flushes and closes.
// Durability is separate (fsync_file / fsync_folder), so a sink can fsync off the task thread.
class sink_file {
 public:
  static constexpr std::size_t buffer_bytes = 64 * 1024;

  sink_file() = default;
  ~sink_file();
  sink_file(const sink_file&) = delete;
  sink_file& operator=(const sink_file&) = delete;

  // Creates (truncate) or appends to `path`.
  result<void> open(const std::filesystem::path& path, bool append);
  bool is_open() const { return fd_ >= 0; }
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t bytes_written() const { return bytes_; }

  result<void> append(std::string_view bytes);
  result<void> flush();
  result<void> close();
  // fsync without closing.
  result<void> sync();

 private:
  int fd_ = -1;
  std::filesystem::path path_;
  std::string buffer_;
  std::uint64_t bytes_ = 0;
};

// fsync of a closed file (opened read-only for it) and of a folder (so a rename or a create in
// it survives a crash).
result<void> fsync_file(const std::filesystem::path& file);
result<void> fsync_folder(const std::filesystem::path& folder);

// A job id as the file sinks put it into file names (part-<job>-...): letters, digits and '_'
// only, so the job is the text between the first two '-' of a name. A generated id (32 hex
// digits) is kept as it is; any other character becomes '_', and an id that had to change or
// is longer than 64 characters gets the CRC-32C of the original appended, so two ids never
// share a name by accident. An empty id (an operator opened outside a job) is "job".
std::string file_safe_job(std::string_view job);

}  // namespace snapflow
