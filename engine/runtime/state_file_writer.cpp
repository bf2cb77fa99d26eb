#include "engine/runtime/state_file_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/posix_io.hpp"
#include "engine/runtime/state_file.hpp"

namespace snapflow {

state_file_writer::state_file_writer(std::filesystem::path file, std::size_t buffer_bytes,
                                     std::size_t inline_max)
    : file_(std::move(file)),
      buffer_bytes_(std::max<std::size_t>(buffer_bytes, 1)),
      inline_max_(inline_max),
      // Until the file is open the first flush means "too large to go inline": it comes once the
      // bytes pass both the buffer and the inline limit.
      encoder_(inline_max > 0 ? std::max(buffer_bytes_, inline_max + 1) : buffer_bytes_,
               [this](std::string_view bytes) { flush(bytes); }) {
  if (!file_.empty()) {
    tmp_ = file_;
    tmp_ += ".tmp";
  }
}

state_file_writer::~state_file_writer() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

result<void> state_file_writer::status() const {
  if (failed_) return *failed_;
  return success();
}

result<void> state_file_writer::open_file() {
  if (file_.empty()) {
    needs_location_ = true;
    return error{"the state outgrew the inline limit of " + std::to_string(inline_max_) +
                 " bytes and there is no file to write it to"};
  }
  if (auto r = checkpoint_storage::create_folders_durably(posix_io::parent_or_dot(file_)); !r)
    return r;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return posix_io::os_error("create", tmp_, errno);
  encoder_.set_flush_at(buffer_bytes_);
  return success();
}

void state_file_writer::flush(std::string_view bytes) {
  if (failed_) return;
  if (fd_ < 0 && finishing_ && encoder_.size() <= inline_max_) {
    inline_bytes_ = std::string(bytes);
    return;
  }
  if (fd_ < 0)
    if (auto r = open_file(); !r) {
      failed_ = r.err();
      return;
    }
  int failed_errno = 0;
  if (auto r = posix_io::write_all(fd_, bytes, tmp_, &failed_errno); !r) {
    // A full disk says how much room the file needed at least, and where.
    failed_ = posix_io::is_out_of_space(failed_errno)
                  ? posix_io::out_of_space(posix_io::parent_or_dot(file_),
                                           file_.filename().string(), encoder_.size())
                  : r.err();
  }
}

result<void> state_file_writer::head(const subtask_snapshot& s) {
  encoder_.head(s);
  return status();
}

result<void> state_file_writer::next_group(std::uint32_t group) {
  if (last_group_ && group <= *last_group_)
    return error{"state file: key group " + std::to_string(group) + " handed after key group " +
                 std::to_string(*last_group_)};
  if (group == state_file::end_of_key_groups)
    return error{"state file: key group " + std::to_string(group) + " cannot be written"};
  last_group_ = group;
  ++groups_;
  return success();
}

result<void> state_file_writer::key_group(std::uint32_t group, const key_group_state& state) {
  if (auto r = next_group(group); !r) return r;
  encoder_.key_group(group, state);
  return status();
}

result<void> state_file_writer::walked_key_group(std::uint32_t group, const key_group_walk& walk) {
  if (auto r = next_group(group); !r) return r;
  encoder_.key_group(group, walk);
  return status();
}

result<state_file_writer::written> state_file_writer::finish(
    const std::optional<keyed_state_files>& files, const std::vector<persisted_channel>& channels) {
  if (failed_) return *failed_;
  finishing_ = true;
  encoder_.tail(files, channels);
  if (failed_) return *failed_;
  written out;
  out.key_groups = groups_;
  out.handle.size = encoder_.size();
  out.handle.checksum = encoder_.file_checksum();
  if (inline_bytes_) {
    out.handle.inline_bytes = std::move(inline_bytes_);
    return out;
  }
  const int fd = std::exchange(fd_, -1);
  posix_io::fd_guard guard(fd);
  if (::fsync(fd) != 0) {
    const int e = errno;
    guard.reset();
    ::unlink(tmp_.c_str());
    if (posix_io::is_out_of_space(e))
      return posix_io::out_of_space(posix_io::parent_or_dot(file_), file_.filename().string(),
                                    encoder_.size());
    return posix_io::os_error("fsync", tmp_, e);
  }
  guard.reset();
  if (::rename(tmp_.c_str(), file_.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp_.c_str());
    return posix_io::os_error("rename " + tmp_.filename().string() + " into", file_, e);
  }
  // The rename is only durable once the folder's entry is.
  if (auto r = posix_io::fsync_dir(posix_io::parent_or_dot(file_)); !r) return r.err();
  out.handle.path = file_.string();
  return out;
}

}  // namespace snapflow
