#include "engine/runtime/state_file_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/checkpoint/posix_io.hpp"
#include "engine/state/int64_state_value.hpp"

namespace snapflow {

namespace {

constexpr std::size_t magic_end = 12;
constexpr std::size_t version_end = magic_end + 4;
constexpr std::size_t body_length_bytes = 8;
constexpr std::size_t trailer_bytes = 4;

std::uint32_t le32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

}  // namespace

state_file_reader::state_file_reader(std::string_view bytes)
    : window_(bytes), size_(bytes.size()), in_memory_(true) {}

state_file_reader::state_file_reader(const state_handle& handle, std::size_t buffer_bytes)
    : size_(handle.size),
      path_(handle.path),
      buffer_(std::max<std::size_t>(buffer_bytes, 64), '\0'),
      expected_crc_(handle.checksum) {
  stats_.buffer_bytes = buffer_.size();
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) io_error_ = posix_io::os_error("open state file", path_, errno);
}

state_file_reader::~state_file_reader() {
  if (fd_ >= 0) ::close(fd_);
}

bool state_file_reader::refill() {
  if (in_memory_ || fd_ < 0 || read_ >= size_) return false;
  const std::size_t want =
      static_cast<std::size_t>(std::min<std::uint64_t>(buffer_.size(), size_ - read_));
  ssize_t n = 0;
  do {
    n = ::read(fd_, buffer_.data(), want);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    io_error_ = n < 0 ? posix_io::os_error("read state file", path_, errno)
                      : error{"refusing corrupt state: state file " + path_ +
                              " changed while it was read"};
    named_ = true;
    return false;
  }
  const auto got = static_cast<std::size_t>(n);
  const std::string_view chunk(buffer_.data(), got);
  file_crc_ = crc32c(chunk, file_crc_);
  // The trailer is the CRC of everything before it.
  const std::uint64_t body_end = size_ - trailer_bytes;
  if (read_ < body_end)
    body_crc_ = crc32c(
        chunk.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(got, body_end - read_))),
        body_crc_);
  read_ += got;
  window_ = chunk;
  pos_ = 0;
  return true;
}

bool state_file_reader::take(char* out, std::size_t n) {
  if (failed_ || n > remaining()) {
    failed_ = true;
    return false;
  }
  consumed_ += n;
  while (n > 0) {
    if (pos_ == window_.size() && !refill()) {
      failed_ = true;
      return false;
    }
    const std::size_t part = std::min(n, window_.size() - pos_);
    std::memcpy(out, window_.data() + pos_, part);
    pos_ += part;
    out += part;
    n -= part;
  }
  return true;
}

std::uint32_t state_file_reader::u32() {
  char b[4];
  return take(b, 4) ? le32(b) : 0;
}

std::uint64_t state_file_reader::u64() {
  char b[8];
  if (!take(b, 8)) return 0;
  return std::uint64_t{le32(b)} | (std::uint64_t{le32(b + 4)} << 32);
}

std::string state_file_reader::str() {
  const std::uint32_t n = u32();
  // Checked before the allocation: a forged length never allocates beyond the file.
  if (failed_ || n > remaining()) {
    failed_ = true;
    return {};
  }
  std::string s(n, '\0');
  take(s.data(), n);
  return s;
}

std::string state_file_reader::value(bool int64_values) {
  // Versions 1 and 2 held int64 values: read as the bytes int64 state is stored as now.
  return int64_values ? encode_int64_state(static_cast<std::int64_t>(u64())) : str();
}

std::uint32_t state_file_reader::count(std::size_t min_bytes) {
  // Each element takes at least `min_bytes`, so a forged count larger than the rest of the file
  // fails here instead of driving a huge loop.
  const std::uint32_t n = u32();
  if (failed_ || std::uint64_t{n} * min_bytes > remaining()) {
    failed_ = true;
    return 0;
  }
  return n;
}

error state_file_reader::failure() const {
  if (io_error_) return *io_error_;
  return error{"state file: truncated or malformed body"};
}

result<std::uint32_t> state_file_reader::prologue() {
  if (size_ < version_end + trailer_bytes)
    return error{"state file: " + std::to_string(size_) + " bytes is shorter than the header"};
  limit_ = size_ - trailer_bytes;
  char magic[magic_end];
  if (!take(magic, magic_end)) return failure();
  if (std::string_view(magic, magic_end) != state_file::magic)
    return error{"state file: bad magic (not a snapflow state file)"};
  const std::uint32_t file_version = u32();
  if (failed_) return failure();
  if (file_version != state_file::version &&
      file_version != state_file::version_untimed_channels &&
      file_version != state_file::version_without_channels &&
      file_version != state_file::version_bytes_counted &&
      file_version != state_file::version_int64 &&
      file_version != state_file::version_int64_with_files)
    return error{"state file: unsupported format version " + std::to_string(file_version)};
  if (file_version < state_file::version_without_channels) {
    // Versions 1-3 give the body's length before it.
    const std::uint64_t body_start = version_end + body_length_bytes;
    if (size_ < body_start + trailer_bytes)
      return error{"state file: " + std::to_string(size_) + " bytes is shorter than the header"};
    const std::uint64_t length = u64();
    if (failed_) return failure();
    if (length != size_ - body_start - trailer_bytes)
      return error{"state file: body length does not match the file (torn write?)"};
  }
  if (in_memory_ &&
      le32(window_.data() + size_ - trailer_bytes) !=
          crc32c(window_.substr(0, size_ - trailer_bytes)))
    return error{"state file: checksum mismatch"};
  return file_version;
}

result<void> state_file_reader::head(subtask_snapshot& s) {
  s.operator_uid = str();
  s.subtask_index = u32();
  s.parallelism = u32();
  s.checkpoint = static_cast<checkpoint_id>(u64());
  const std::uint32_t n_ops = count(8);
  for (std::uint32_t i = 0; i < n_ops && !failed_; ++i) {
    operator_state_entry e;
    e.name = str();
    e.bytes = str();
    s.operator_state.push_back(std::move(e));
  }
  s.keyed.max_parallelism = u32();
  if (failed_) return failure();
  if (s.parallelism == 0 || s.subtask_index >= s.parallelism)
    return error{"state file: subtask " + std::to_string(s.subtask_index) + " of parallelism " +
                 std::to_string(s.parallelism) + " is impossible"};
  return success();
}

result<void> state_file_reader::key_group(bool int64_values, key_group_state& state) {
  const std::size_t value_min_bytes = int64_values ? 8 : 4;
  const std::uint32_t n_values = count(8);
  for (std::uint32_t i = 0; i < n_values && !failed_; ++i) {
    auto& keys = state.values[str()];
    const std::uint32_t n_keys = count(8 + value_min_bytes);
    for (std::uint32_t k = 0; k < n_keys && !failed_; ++k) {
      const std::uint64_t key = u64();
      keys[key] = value(int64_values);
    }
  }
  const std::uint32_t n_maps = count(8);
  for (std::uint32_t i = 0; i < n_maps && !failed_; ++i) {
    auto& keys = state.maps[str()];
    const std::uint32_t n_keys = count(12);
    for (std::uint32_t k = 0; k < n_keys && !failed_; ++k) {
      auto& entries = keys[u64()];
      const std::uint32_t n_entries = count(4 + value_min_bytes);
      for (std::uint32_t e = 0; e < n_entries && !failed_; ++e) {
        std::string map_key = str();
        entries[std::move(map_key)] = value(int64_values);
      }
    }
  }
  if (failed_) return failure();
  return success();
}

result<void> state_file_reader::key_groups(std::uint32_t file_version, keyed_group_sink& sink) {
  const bool int64_values = file_version == state_file::version_int64 ||
                            file_version == state_file::version_int64_with_files;
  // Versions 4 to 6 end their key groups with a terminator; versions 1-3 count them first. Each
  // round reads at least four bytes, so the rounds end with the file if no terminator does.
  const bool terminated = file_version >= state_file::version_without_channels;
  const std::uint32_t n_groups = terminated ? 0 : count(12);
  if (failed_) return failure();
  key_group_state state;
  std::optional<std::uint32_t> previous;
  for (std::uint32_t g = 0; terminated || g < n_groups; ++g) {
    const std::uint64_t start = consumed_;
    const std::uint32_t group = u32();
    if (failed_) return failure();
    if (group == state_file::end_of_key_groups) {
      if (terminated) break;
      return error{"state file: 4294967295 is not a key group"};
    }
    // Ascending in every version (they were all written from an ordered map): what lets a
    // restore stream the groups of several files in order, and catches a group twice.
    if (previous && group <= *previous)
      return error{"state file: key group " + std::to_string(group) + " follows key group " +
                   std::to_string(*previous) + " (not ascending)"};
    previous = group;
    if (auto r = key_group(int64_values, state); !r) return r;
    stats_.largest_group_bytes = std::max(stats_.largest_group_bytes, consumed_ - start);
    ++stats_.key_groups;
    if (auto r = sink.key_group(group, state); !r) {
      named_ = true;
      return r;
    }
    state = key_group_state{};
  }
  return success();
}

result<void> state_file_reader::tail(std::uint32_t file_version, subtask_snapshot& s) {
  bool has_files = file_version == state_file::version_int64_with_files;
  if (file_version >= state_file::version_bytes_counted) {
    const std::uint32_t flag = u32();
    if (!failed_ && flag > 1) return error{"state file: the keyed state files flag is not 0 or 1"};
    has_files = flag == 1;
  }
  if (has_files) {
    keyed_state_files f;
    f.max_parallelism = u32();
    f.first_key_group = u32();
    f.last_key_group = u32();
    const std::uint32_t n_files = count(24);
    for (std::uint32_t i = 0; i < n_files && !failed_; ++i) {
      keyed_state_file file;
      file.local_name = str();
      file.handle_name = str();
      file.size = u64();
      file.checksum = u32();
      const std::uint32_t shared = u32();
      if (!failed_ && shared > 1)
        return error{"state file: a keyed state file's shared flag is not 0 or 1"};
      file.shared = shared == 1;
      f.files.push_back(std::move(file));
    }
    s.keyed_files = std::move(f);
  }
  if (file_version >= state_file::version_untimed_channels)
    if (auto r = channels(s, file_version >= state_file::version); !r) return r;
  if (failed_) return failure();
  if (remaining() != 0) return error{"state file: trailing bytes after the body"};
  if (in_memory_) return success();  // its checksum was checked up front
  limit_ = size_;
  const std::uint32_t trailer = u32();
  if (failed_) return failure();
  if (file_crc_ != expected_crc_) {
    named_ = true;
    return error{"refusing corrupt state: state file " + path_ + " changed while it was read"};
  }
  if (trailer != body_crc_) return error{"state file: checksum mismatch"};
  return success();
}

result<void> state_file_reader::channels(subtask_snapshot& s, bool timed) {
  const std::uint32_t n_channels = count(16);
  for (std::uint32_t i = 0; i < n_channels && !failed_; ++i) {
    persisted_channel c;
    const std::uint32_t side = u32();
    if (!failed_ && side > 1)
      return error{"state file: a channel's side is " + std::to_string(side) +
                   ", not 0 (input) or 1 (output)"};
    c.side = static_cast<channel_side>(side);
    c.gate = u32();
    c.channel = u32();
    // The smallest record: three u64 and an empty string's length (and its timestamp).
    const std::uint32_t n_records = count(timed ? 36 : 28);
    for (std::uint32_t r = 0; r < n_records && !failed_; ++r) {
      record rec;
      rec.key = u64();
      rec.seq = static_cast<std::int64_t>(u64());
      rec.value = static_cast<std::int64_t>(u64());
      rec.payload = str();
      if (timed) rec.timestamp = static_cast<std::int64_t>(u64());
      c.records.push_back(std::move(rec));
    }
    s.channels.push_back(std::move(c));
  }
  return success();
}

result<subtask_snapshot> state_file_reader::read(keyed_group_sink& sink, const head_fn& on_head) {
  named_ = false;
  if (io_error_) {
    named_ = true;
    return *io_error_;
  }
  auto file_version = prologue();
  if (!file_version) return file_version.err();
  subtask_snapshot s;
  if (auto r = head(s); !r) return r.err();
  if (on_head) {
    if (auto r = on_head(s); !r) {
      named_ = true;
      return r.err();
    }
  }
  if (auto r = key_groups(*file_version, sink); !r) return r.err();
  if (auto r = tail(*file_version, s); !r) return r.err();
  return s;
}

result<subtask_snapshot> state_file_reader::read(const state_handle& handle,
                                                 keyed_group_sink& sink, const head_fn& on_head,
                                                 std::size_t buffer_bytes, stats* out_stats) {
  if (auto verified = checkpoint_storage::verify_state(handle); !verified)
    return error{"refusing corrupt state: " + verified.err().message};
  const bool is_inline = handle.is_inline();
  std::optional<state_file_reader> reader;
  if (is_inline)
    reader.emplace(std::string_view(*handle.inline_bytes));
  else
    reader.emplace(handle, buffer_bytes);
  auto out = reader->read(sink, on_head);
  if (out_stats) *out_stats = reader->statistics();
  if (!out && !reader->named_)
    return error{out.err().message + (is_inline ? " (inline state)" : " (" + handle.path + ")")};
  return out;
}

}  // namespace snapflow
