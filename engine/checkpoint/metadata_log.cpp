#include "engine/checkpoint/metadata_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <utility>

#include "engine/checkpoint/crc32c.hpp"

namespace snapflow {

namespace fs = std::filesystem;
using posix_io::fd_guard;
using posix_io::os_error;

namespace {

constexpr std::string_view magic = "SFCKLOG1";
// A record's payload is a checkpoint's metadata, which checkpoint_storage caps far lower.
constexpr std::uint64_t max_payload_bytes = 1ull << 30;

void put_u32(char* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(char* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
std::uint64_t get_le(const char* at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(at[i])) << (8 * i);
  return v;
}
std::uint32_t get_u32(const char* at) { return static_cast<std::uint32_t>(get_le(at, 4)); }
std::uint64_t get_u64(const char* at) { return get_le(at, 8); }

std::uint64_t round_up(std::uint64_t n) {
  return (n + metadata_log::block_bytes - 1) / metadata_log::block_bytes *
         metadata_log::block_bytes;
}

// Magic, length and id (20 bytes), then the payload.
std::uint32_t record_crc(std::string_view head, std::string_view payload) {
  return crc32c(payload, crc32c(head.substr(0, 20)));
}

std::string encode_record(checkpoint_id id, std::string_view payload) {
  std::string out(round_up(metadata_log::header_bytes + payload.size()), '\0');
  std::memcpy(out.data(), magic.data(), magic.size());
  put_u32(out.data() + 8, static_cast<std::uint32_t>(payload.size()));
  put_u64(out.data() + 12, static_cast<std::uint64_t>(id));
  put_u32(out.data() + 20, record_crc(out, payload));
  std::memcpy(out.data() + metadata_log::header_bytes, payload.data(), payload.size());
  return out;
}

// The segments in job_dir by number.
std::map<std::uint64_t, fs::path> list_segments(const fs::path& job_dir,
                                                std::vector<std::string>* warnings) {
  std::map<std::uint64_t, fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(job_dir, ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory && warnings)
      warnings->push_back("cannot list " + job_dir.string() + ": " + ec.message());
    return out;
  }
  for (const fs::directory_iterator end; it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (auto n = metadata_log::segment_number(name)) out.emplace(*n, it->path());
  }
  if (ec && warnings)
    warnings->push_back("listing " + job_dir.string() + " stopped: " + ec.message());
  return out;
}

// Every whole record of one segment's bytes, appended to `out`.
void scan_segment(const fs::path& path, std::string_view bytes,
                  std::vector<metadata_log::record>& out, std::vector<std::string>& warnings) {
  std::uint64_t at = 0;
  // The first block that started no whole record and was not zeros; none: `whole_so_far`.
  constexpr std::uint64_t whole_so_far = ~std::uint64_t{0};
  std::uint64_t damaged_at = whole_so_far;
  while (at + metadata_log::header_bytes <= bytes.size()) {
    const std::string_view head = bytes.substr(at, metadata_log::header_bytes);
    const std::uint64_t length = get_u32(head.data() + 8);
    const bool whole = head.substr(0, magic.size()) == magic && length <= max_payload_bytes &&
                       at + metadata_log::header_bytes + length <= bytes.size() &&
                       get_u32(head.data() + 20) ==
                           record_crc(head, bytes.substr(at + metadata_log::header_bytes, length));
    if (!whole) {
      // Zeros after the last record, a torn append, or damage: look on at the next block.
      const bool zeros = head.find_first_not_of('\0') == std::string_view::npos;
      if (!zeros && damaged_at == whole_so_far) damaged_at = at;
      at += metadata_log::block_bytes;
      continue;
    }
    if (damaged_at != whole_so_far) {
      warnings.push_back(path.string() + ": a damaged record at offset " +
                         std::to_string(damaged_at) + " before whole ones");
      damaged_at = whole_so_far;
    }
    out.push_back({static_cast<checkpoint_id>(get_u64(head.data() + 12)),
                   std::string(bytes.substr(at + metadata_log::header_bytes, length))});
    at += round_up(metadata_log::header_bytes + length);
  }
}

result<std::string> read_whole(const fs::path& path) {
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return os_error("open", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return os_error("stat", path, errno);
  if (static_cast<std::uint64_t>(st.st_size) > max_payload_bytes * 2)
    return error{path.string() + " is larger than any checkpoint log segment"};
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd.get(), bytes.data() + done, bytes.size() - done,
                              static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_error("read", path, errno);
    }
    if (n == 0) break;  // shrank meanwhile
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

error closed_error(const fs::path& job_dir) {
  return error{"the checkpoint metadata log in " + job_dir.string() +
               " is closed: the job's checkpoints ended"};
}

}  // namespace

std::optional<std::uint64_t> metadata_log::segment_number(std::string_view name) {
  if (!name.starts_with(segment_prefix) || !name.ends_with(segment_suffix)) return std::nullopt;
  const std::string_view digits =
      name.substr(segment_prefix.size(),
                  name.size() - segment_prefix.size() - segment_suffix.size());
  if (digits.empty() || digits.size() > 19) return std::nullopt;
  std::uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  return n;
}

metadata_log::scanned metadata_log::scan(const fs::path& job_dir) {
  scanned out;
  for (const auto& [_, path] : list_segments(job_dir, &out.warnings)) {
    auto bytes = read_whole(path);
    if (!bytes) {
      out.warnings.push_back(bytes.err().message);
      continue;
    }
    // A segment is made whole blocks long, zeros, before anything goes into it.
    if (bytes->size() < block_bytes) {
      out.warnings.push_back(path.string() + " is not a checkpoint log segment (" +
                             std::to_string(bytes->size()) + " bytes)");
      continue;
    }
    scan_segment(path, *bytes, out.records, out.warnings);
  }
  return out;
}

std::optional<std::string> metadata_log::find(const fs::path& job_dir, checkpoint_id id) {
  scanned s = scan(job_dir);
  for (auto it = s.records.rbegin(); it != s.records.rend(); ++it)
    if (it->id == id) return std::move(it->metadata);
  return std::nullopt;
}

metadata_log::metadata_log(fs::path job_dir, std::size_t keep, std::uint64_t segment_bytes)
    : job_dir_(std::move(job_dir)),
      keep_(std::max<std::size_t>(keep, 1)),
      segment_bytes_(round_up(std::max(segment_bytes, block_bytes))) {}

std::vector<fs::path> metadata_log::segments() const {
  std::lock_guard lock(mutex_);
  std::vector<fs::path> out;
  for (const auto& s : segments_) out.push_back(s.path);
  return out;
}

result<void> metadata_log::look_up_segments() {
  std::vector<std::string> warnings;
  const auto found = list_segments(job_dir_, &warnings);
  if (!warnings.empty()) return error{warnings.front()};
  for (const auto& [n, path] : found) {
    segment s{path, 0};
    if (auto bytes = read_whole(path)) {
      std::vector<record> records;
      scan_segment(path, *bytes, records, warnings);
      s.records = records.size();
    }
    segments_.push_back(std::move(s));
    next_number_ = std::max(next_number_, n + 1);
  }
  looked_up_ = true;
  return success();
}

void metadata_log::simulate_space(std::optional<space_limit> limit) {
  std::lock_guard lock(mutex_);
  space_limit_ = limit;
}

std::uint64_t metadata_log::wanted_segment_bytes(std::uint64_t min_bytes) const {
  const std::uint64_t record = std::max(recent_record_bytes_, block_bytes);
  std::uint64_t size = std::min(record * records_ahead, segment_bytes_);
  size = std::max(size, std::min(min_segment_bytes, segment_bytes_));
  const std::optional<std::uint64_t> free =
      space_limit_ ? std::optional<std::uint64_t>(space_limit_->reported_free)
                   : posix_io::free_bytes(job_dir_);
  if (free) size = std::min(size, round_up(*free / free_space_share));
  return std::max(round_up(size), min_bytes);
}

result<void> metadata_log::make_segment(std::uint64_t size, bool& out_of_space) {
  out_of_space = false;
  const fs::path path = job_dir_ / (std::string(segment_prefix) +
                                    std::to_string(next_number_++) +
                                    std::string(segment_suffix));
  fd_guard fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    out_of_space = posix_io::is_out_of_space(errno);
    return os_error("create", path, errno);
  }
  // Zeros written, not fallocated: an unwritten extent would turn written at the first append,
  // a metadata change that fdatasync must commit.
  const std::string zeros(std::min<std::uint64_t>(size, 256 * 1024), '\0');
  result<void> r = success();
  int failed_errno = 0;
  if (space_limit_ && size > space_limit_->writable) {
    failed_errno = ENOSPC;
    r = os_error("write", path, ENOSPC);
  }
  for (std::uint64_t at = 0; r && at < size; at += zeros.size())
    r = posix_io::pwrite_all(fd.get(), std::string_view(zeros).substr(0, size - at), at, path,
                             &failed_errno);
  if (r && ::fsync(fd.get()) != 0) {
    failed_errno = errno;
    r = os_error("fsync", path, errno);
  }
  if (r) r = posix_io::fsync_dir(job_dir_);
  if (!r) {
    out_of_space = posix_io::is_out_of_space(failed_errno);
    ::unlink(path.c_str());
    return r;
  }
  segments_.push_back({path, 0});
  fd_ = std::move(fd);
  size_ = size;
  offset_ = 0;
  return success();
}

result<void> metadata_log::start_segment(std::uint64_t min_bytes, checkpoint_id id) {
  fd_.reset();
  min_bytes = round_up(std::max(min_bytes, block_bytes));
  // Smaller and smaller while the disk is full, down to the record alone.
  for (std::uint64_t size = wanted_segment_bytes(min_bytes);;
       size = std::max(min_bytes, round_up(size / 2))) {
    bool out_of_space = false;
    auto made = make_segment(size, out_of_space);
    if (made) return made;
    if (!out_of_space) return made;
    if (size == min_bytes)
      return posix_io::out_of_space(
          job_dir_,
          id > 0 ? "checkpoint " + std::to_string(id) + "'s metadata log record"
                 : std::string("the checkpoint metadata log"),
          min_bytes);
  }
}

void metadata_log::drop_old_segments() {
  // The newest `keep` records must stay: drop the oldest segment while the others hold them.
  for (;;) {
    if (segments_.size() < 2) return;
    std::size_t newer = 0;
    for (std::size_t i = 1; i < segments_.size(); ++i) newer += segments_[i].records;
    if (newer < keep_) return;
    // An unlink lost to a crash leaves older records only, which recovery ranks below these.
    // One that fails (in the folder the log just wrote to, hardly ever) is tried again after
    // the next append.
    if (::unlink(segments_.front().path.c_str()) != 0 && errno != ENOENT) return;
    segments_.pop_front();
  }
}

result<void> metadata_log::prepare(std::uint64_t headroom) {
  std::lock_guard lock(mutex_);
  if (closed_) return closed_error(job_dir_);
  if (!looked_up_)
    if (auto r = look_up_segments(); !r) return r;
  if (headroom == 0) headroom = 2 * std::max(recent_record_bytes_, block_bytes);
  if (fd_.get() >= 0 && offset_ + round_up(headroom) <= size_) return success();
  return start_segment(round_up(headroom), 0);
}

bool metadata_log::has_room(std::uint64_t metadata_bytes) const {
  std::lock_guard lock(mutex_);
  return looked_up_ && fd_.get() >= 0 &&
         offset_ + round_up(header_bytes + metadata_bytes) <= size_;
}

result<void> metadata_log::close(bool remove_segments) {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    fd_.reset();
  }
  return remove_segments ? remove() : success();
}

result<void> metadata_log::remove() {
  std::lock_guard lock(mutex_);
  fd_.reset();
  segments_.clear();
  looked_up_ = false;
  std::vector<std::string> warnings;
  for (const auto& [_, path] : list_segments(job_dir_, &warnings))
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return os_error("remove", path, errno);
  if (!warnings.empty()) return error{warnings.front()};
  return success();
}

result<void> metadata_log::append(checkpoint_id id, std::string_view metadata) {
  if (metadata.size() > max_payload_bytes)
    return error{"checkpoint " + std::to_string(id) + "'s metadata is too large for the log"};
  const std::string bytes = encode_record(id, metadata);
  std::lock_guard lock(mutex_);
  if (closed_) return closed_error(job_dir_);
  if (!looked_up_)
    if (auto r = look_up_segments(); !r) return r;
  recent_record_bytes_ = bytes.size();
  if (fd_.get() < 0 || offset_ + bytes.size() > size_)
    if (auto r = start_segment(bytes.size(), id); !r) return r;
  const fs::path& path = segments_.back().path;
  auto r = posix_io::pwrite_all(fd_.get(), bytes, offset_, path);
  if (r && ::fdatasync(fd_.get()) != 0) r = os_error("fdatasync", path, errno);
  if (!r) {
    // What the failure left in the segment is unknown (after a failed fdatasync even the page
    // cache cannot be trusted): nothing more goes into it.
    fd_.reset();
    return r;
  }
  offset_ += bytes.size();
  ++segments_.back().records;
  drop_old_segments();
  return success();
}

}  // namespace snapflow
