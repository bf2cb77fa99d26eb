#include "engine/state/file_copy.hpp"

#include <cerrno>
#include <fcntl.h>
#include <algorithm>
#include <optional>
#include <string>
#include <unistd.h>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/checkpoint/posix_io.hpp"

namespace snapflow {

namespace {

constexpr std::size_t chunk_bytes = 1 << 20;

// Reads `in` (the file `path`) to its end in chunks, handing each to `chunk` and counting and
// checksumming them; `limit` stops a file longer than expected early (it is refused anyway).
template <class Chunk>
result<file_copy::copied> read_chunks(int in, const std::filesystem::path& path,
                                      std::uint64_t limit, Chunk&& chunk) {
  std::string buffer(chunk_bytes, '\0');
  file_copy::copied done;
  for (;;) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return posix_io::os_error("read", path, errno);
    }
    if (n == 0) break;
    const std::string_view bytes(buffer.data(), static_cast<std::size_t>(n));
    if (auto r = chunk(bytes); !r) return r.err();
    done.checksum = crc32c(bytes, done.checksum);
    done.size += bytes.size();
    if (done.size > limit) break;
  }
  return done;
}

// Writes `bytes` to `out` (the file `to`, a copy of `what`), naming a full disk as such.
result<void> write_out(int out, std::string_view bytes, const std::filesystem::path& to,
                       const std::string& what) {
  int failed = 0;
  if (auto w = posix_io::write_all(out, bytes, to, &failed); !w) {
    if (posix_io::is_out_of_space(failed))
      return posix_io::out_of_space(posix_io::parent_or_dot(to), what, bytes.size());
    return w.err();
  }
  return success();
}

// Copies the bytes of `from` to `to`, counting and checksumming them: all of them, or exactly
// the first `prefix` when it has a value (the file must have that many).
result<file_copy::copied> copy(const std::filesystem::path& from, const std::filesystem::path& to,
                               bool sync, std::uint64_t limit,
                               std::optional<std::uint64_t> prefix = std::nullopt) {
  posix_io::fd_guard in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return posix_io::os_error("open", from, errno);
  posix_io::fd_guard out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) return posix_io::os_error("create", to, errno);
  const std::string what = "a copy of " + from.string();
  file_copy::copied written;  // what went into `to`: a prefix of what was read
  auto done = read_chunks(in.get(), from, prefix.value_or(limit),
                          [&](std::string_view bytes) -> result<void> {
                            if (prefix)
                              bytes = bytes.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(
                                                          bytes.size(), *prefix - written.size)));
                            written.checksum = crc32c(bytes, written.checksum);
                            written.size += bytes.size();
                            return write_out(out.get(), bytes, to, what);
                          });
  if (!done) return done;
  if (prefix && written.size != *prefix)
    return error{from.string() + " has " + std::to_string(written.size) + " bytes, not the " +
                 std::to_string(*prefix) + " it had when its copy was asked for"};
  if (sync && ::fsync(out.get()) != 0) return posix_io::os_error("fsync", to, errno);
  return written;
}

// The size and checksum of `path`'s bytes, `limit` bytes at most (and one chunk more); synced
// first when `sync`.
result<file_copy::copied> read_back(const std::filesystem::path& path, bool sync,
                                    std::uint64_t limit) {
  posix_io::fd_guard in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return posix_io::os_error("open", path, errno);
  // A linked file is the writer's: sync it under this name too (nothing to write if it was).
  if (sync && ::fsync(in.get()) != 0) return posix_io::os_error("fsync", path, errno);
  return read_chunks(in.get(), path, limit, [](std::string_view) { return success(); });
}

// Makes `to` a hard link to `from` (replacing a file `to`). False when the filesystem cannot
// (another filesystem, links not supported or not allowed): the caller copies.
result<bool> try_link(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::unlink(to.c_str()) != 0 && errno != ENOENT) return posix_io::os_error("remove", to, errno);
  if (::link(from.c_str(), to.c_str()) == 0) return true;
  const int e = errno;
  if (e == EXDEV || e == EPERM || e == EMLINK || e == EOPNOTSUPP || e == ENOSYS) return false;
  return posix_io::os_error("link " + from.string() + " as", to, e);
}

result<void> verified(const std::filesystem::path& from, const result<file_copy::copied>& done,
                      std::uint64_t size, std::uint32_t checksum) {
  if (!done) return error{"refusing corrupt state: " + done.err().message};
  if (done->size != size)
    return error{"refusing corrupt state: " + from.string() + " is not " + std::to_string(size) +
                 " bytes long (torn or replaced)"};
  if (done->checksum != checksum)
    return error{"refusing corrupt state: " + from.string() + " fails its checksum"};
  return success();
}

}  // namespace

result<file_copy::copied> file_copy::copy_durably(const std::filesystem::path& from,
                                                  const std::filesystem::path& to) {
  return copy(from, to, true, UINT64_MAX);
}

result<file_copy::copied> file_copy::copy_durably(const std::filesystem::path& from,
                                                  const std::filesystem::path& to,
                                                  std::uint64_t size) {
  return copy(from, to, true, UINT64_MAX, size);
}

result<file_copy::copied> file_copy::write_durably(const std::filesystem::path& to,
                                                   std::string_view bytes) {
  posix_io::fd_guard out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) return posix_io::os_error("create", to, errno);
  if (auto w = write_out(out.get(), bytes, to, "a new file"); !w) return w.err();
  if (::fsync(out.get()) != 0) return posix_io::os_error("fsync", to, errno);
  return copied{bytes.size(), crc32c(bytes)};
}

result<void> file_copy::copy_verified(const std::filesystem::path& from,
                                      const std::filesystem::path& to, std::uint64_t size,
                                      std::uint32_t checksum) {
  return verified(from, copy(from, to, false, size), size, checksum);
}

result<file_copy::copied> file_copy::link_or_copy_durably(const std::filesystem::path& from,
                                                          const std::filesystem::path& to) {
  auto linked = try_link(from, to);
  if (!linked) return linked.err();
  if (!*linked) return copy_durably(from, to);
  return read_back(to, true, UINT64_MAX);
}

result<file_copy::copied> file_copy::link_or_copy_known(const std::filesystem::path& from,
                                                        const std::filesystem::path& to,
                                                        std::uint64_t size,
                                                        std::uint32_t checksum) {
  auto linked = try_link(from, to);
  if (!linked) return linked.err();
  if (!*linked) {
    auto done = copy_durably(from, to);
    if (auto r = verified(from, done, size, checksum); !r) return r.err();
    return done;
  }
  std::error_code ec;
  const std::uint64_t actual = std::filesystem::file_size(to, ec);
  if (ec) return error{"cannot read the size of " + to.string() + ": " + ec.message()};
  if (actual != size)
    return error{from.string() + " is " + std::to_string(actual) + " bytes long, its writer said " +
                 std::to_string(size)};
  return copied{size, checksum};
}

result<void> file_copy::link_or_copy_verified(const std::filesystem::path& from,
                                              const std::filesystem::path& to, std::uint64_t size,
                                              std::uint32_t checksum) {
  auto linked = try_link(from, to);
  if (!linked) {
    // A missing source is the corrupt state the caller must hear about, not a link failure.
    std::error_code ec;
    if (!std::filesystem::exists(from, ec))
      return error{"refusing corrupt state: " + linked.err().message};
    return linked.err();
  }
  if (!*linked) return copy_verified(from, to, size, checksum);
  return verified(from, read_back(to, false, size), size, checksum);
}

}  // namespace snapflow
