#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <utility>

#include "common/result.hpp"

// Small POSIX helpers for the checkpoint storage's durable writes: every failure becomes an
// error naming the operation and the path.
namespace snapflow::posix_io {

error os_error(std::string_view what, const std::filesystem::path& path, int errno_value);

// Closes on scope exit; close errors after a successful fsync cannot lose data.
class fd_guard {
 public:
  explicit fd_guard(int fd = -1) : fd_(fd) {}
  ~fd_guard() { reset(); }
  fd_guard(fd_guard&& other) noexcept : fd_(other.release()) {}
  fd_guard& operator=(fd_guard&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  // Closes now (a close after a successful fsync loses nothing).
  void reset();

 private:
  int fd_;
};

// All of `bytes` at the file offset (write(2) repeated, EINTR retried). On failure,
// `failed_errno` (when given) receives the errno, so a caller can tell a full disk.
result<void> write_all(int fd, std::string_view bytes, const std::filesystem::path& path,
                       int* failed_errno = nullptr);
// All of `bytes` at `offset` (pwrite(2) repeated, EINTR retried).
result<void> pwrite_all(int fd, std::string_view bytes, std::uint64_t offset,
                        const std::filesystem::path& path, int* failed_errno = nullptr);
// ENOSPC or EDQUOT: the disk (or the user's quota) is full.
bool is_out_of_space(int errno_value);
// Bytes an unprivileged writer may still use on the file system holding `dir` (statvfs);
// nothing when that cannot be asked.
std::optional<std::uint64_t> free_bytes(const std::filesystem::path& dir);
// "not enough space in DIR for WHAT: N bytes needed, M available": the error a write that
// found the disk full returns, so that whoever reads it knows how much room to make, and where.
error out_of_space(const std::filesystem::path& dir, std::string_view what, std::uint64_t needed);
result<void> fsync_dir(const std::filesystem::path& dir);
// The parent of `p`, or "." for a bare name.
std::filesystem::path parent_or_dot(const std::filesystem::path& p);

}  // namespace snapflow::posix_io
