#include "engine/runtime/sink_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

#include "engine/checkpoint/crc32c.hpp"

namespace snapflow {

namespace {

error os_error(std::string_view what, const std::filesystem::path& path, int e) {
  return error{std::string(what) + " " + path.string() + ": " + std::system_category().message(e)};
}

result<void> fsync_open(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return os_error("open", path, errno);
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return os_error("fsync", path, e);
  return success();
}

}  // namespace

sink_file::~sink_file() {
  if (fd_ >= 0) ::close(fd_);
}

result<void> sink_file::open(const std::filesystem::path& path, bool append) {
  if (fd_ >= 0) {
    if (auto r = close(); !r) return r;
  }
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) return os_error("create", path, errno);
  path_ = path;
  bytes_ = 0;
  buffer_.clear();
  buffer_.reserve(buffer_bytes);
  return success();
}

result<void> sink_file::append(std::string_view bytes) {
  buffer_.append(bytes);
  bytes_ += bytes.size();
  if (buffer_.size() >= buffer_bytes) return flush();
  return success();
}

result<void> sink_file::flush() {
  std::string_view rest = buffer_;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_error("write", path_, errno);
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  buffer_.clear();
  return success();
}

result<void> sink_file::close() {
  if (fd_ < 0) return success();
  auto flushed = flush();
  const int rc = ::close(fd_);
  const int e = errno;
  fd_ = -1;
  if (!flushed) return flushed;
  if (rc != 0) return os_error("close", path_, e);
  return success();
}

result<void> sink_file::sync() {
  if (auto r = flush(); !r) return r;
  if (::fsync(fd_) != 0) return os_error("fsync", path_, errno);
  return success();
}

result<void> fsync_file(const std::filesystem::path& file) {
  return fsync_open(file, O_RDONLY);
}

result<void> fsync_folder(const std::filesystem::path& folder) {
  return fsync_open(folder, O_RDONLY | O_DIRECTORY);
}

std::string file_safe_job(std::string_view job) {
  if (job.empty()) return "job";
  std::string out;
  out.reserve(job.size());
  bool changed = false;
  for (char c : job) {
    const bool safe =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out.push_back(safe ? c : '_');
    changed = changed || !safe;
  }
  if (!changed && out.size() <= 64) return out;
  if (out.size() > 55) out.resize(55);
  char hex[10];
  std::snprintf(hex, sizeof hex, "_%08x", crc32c(job));
  out.append(hex);
  return out;
}

}  // namespace snapflow
