#include "engine/checkpoint/posix_io.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

namespace snapflow::posix_io {

namespace fs = std::filesystem;

error os_error(std::string_view what, const fs::path& path, int errno_value) {
  return error{std::string(what) + " " + path.string() + ": " +
               std::system_category().message(errno_value)};
}

void fd_guard::reset() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

result<void> write_all(int fd, std::string_view bytes, const fs::path& path, int* failed_errno) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (failed_errno) *failed_errno = errno;
      return os_error("write", path, errno);
    }
    assert(n > 0);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return success();
}

result<void> pwrite_all(int fd, std::string_view bytes, std::uint64_t offset,
                        const fs::path& path, int* failed_errno) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (failed_errno) *failed_errno = errno;
      return os_error("write", path, errno);
    }
    assert(n > 0);
    bytes.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return success();
}

result<void> fsync_dir(const fs::path& dir) {
  fd_guard fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return os_error("open folder", dir, errno);
  if (::fsync(fd.get()) != 0) return os_error("fsync folder", dir, errno);
  return success();
}

bool is_out_of_space(int errno_value) { return errno_value == ENOSPC || errno_value == EDQUOT; }

std::optional<std::uint64_t> free_bytes(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_bavail) * static_cast<std::uint64_t>(st.f_frsize);
}

error out_of_space(const fs::path& dir, std::string_view what, std::uint64_t needed) {
  std::string message = "not enough space in " + dir.string() + " for " + std::string(what) +
                        ": " + std::to_string(needed) + " bytes needed";
  if (auto free = free_bytes(dir)) message += ", " + std::to_string(*free) + " available";
  return error{std::move(message)};
}

fs::path parent_or_dot(const fs::path& p) {
  fs::path parent = p.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace snapflow::posix_io
