#include "engine/state/file_copy.hpp"

#include <cerrno>
#include <fcntl.h>
#include <string>
#include <unistd.h>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/checkpoint/posix_io.hpp"

namespace snapflow {

namespace {

constexpr std::size_t chunk_bytes = 1 << 20;

// Copies every byte of `from` to `to`, counting and checksumming them; `limit` stops a file
// longer than expected early (it is refused anyway).
result<file_copy::copied> copy(const std::filesystem::path& from, const std::filesystem::path& to,
                               bool sync, std::uint64_t limit) {
  posix_io::fd_guard in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return posix_io::os_error("open", from, errno);
  posix_io::fd_guard out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) return posix_io::os_error("create", to, errno);
  std::string buffer(chunk_bytes, '\0');
  file_copy::copied done;
  for (;;) {
    const ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return posix_io::os_error("read", from, errno);
    }
    if (n == 0) break;
    const std::string_view bytes(buffer.data(), static_cast<std::size_t>(n));
    int failed = 0;
    if (auto w = posix_io::write_all(out.get(), bytes, to, &failed); !w) {
      if (posix_io::is_out_of_space(failed))
        return posix_io::out_of_space(posix_io::parent_or_dot(to), "a copy of " + from.string(),
                                      bytes.size());
      return w.err();
    }
    done.checksum = crc32c(bytes, done.checksum);
    done.size += bytes.size();
    if (done.size > limit) break;
  }
  if (sync && ::fsync(out.get()) != 0) return posix_io::os_error("fsync", to, errno);
  return done;
}

}  // namespace

result<file_copy::copied> file_copy::copy_durably(const std::filesystem::path& from,
                                                  const std::filesystem::path& to) {
  return copy(from, to, true, UINT64_MAX);
}

result<void> file_copy::copy_verified(const std::filesystem::path& from,
                                      const std::filesystem::path& to, std::uint64_t size,
                                      std::uint32_t checksum) {
  auto done = copy(from, to, false, size);
  if (!done) return error{"refusing corrupt state: " + done.err().message};
  if (done->size != size)
    return error{"refusing corrupt state: " + from.string() + " is not " + std::to_string(size) +
                 " bytes long (torn or replaced)"};
  if (done->checksum != checksum)
    return error{"refusing corrupt state: " + from.string() + " fails its checksum"};
  return success();
}

}  // namespace snapflow
