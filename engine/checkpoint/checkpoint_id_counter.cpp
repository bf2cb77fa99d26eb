#include "engine/checkpoint/checkpoint_id_counter.hpp"

#include <cassert>
#include <limits>
#include <system_error>
#include <utility>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"

namespace snapflow {

namespace {
constexpr std::string_view counter_magic = "SNAPFLOW-IDC";
constexpr std::uint32_t counter_version = 1;
constexpr std::size_t counter_file_bytes = 12 + 4 + 8 + 4;
constexpr checkpoint_id max_id = std::numeric_limits<checkpoint_id>::max();

error exhausted() { return error{"checkpoint id counter: ids exhausted"}; }

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
  assert(at + static_cast<std::size_t>(bytes) <= in.size());
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= std::uint64_t{static_cast<unsigned char>(in[at + static_cast<std::size_t>(i)])}
             << (8 * i);
  return value;
}
}  // namespace

// ---- in memory

result<checkpoint_id> in_memory_checkpoint_id_counter::get_and_increment() {
  std::lock_guard lock(mutex_);
  if (next_ == max_id) return exhausted();
  return next_++;
}

checkpoint_id in_memory_checkpoint_id_counter::peek_next() const {
  std::lock_guard lock(mutex_);
  return next_;
}

result<void> in_memory_checkpoint_id_counter::advance_to(checkpoint_id next) {
  std::lock_guard lock(mutex_);
  if (next > next_) next_ = next;
  return success();
}

// ---- file

std::string file_checkpoint_id_counter::encode(checkpoint_id limit) {
  assert(limit >= 1);
  std::string out;
  out.reserve(counter_file_bytes);
  out.append(counter_magic);
  put_le(out, counter_version, 4);
  put_le(out, static_cast<std::uint64_t>(limit), 8);
  put_le(out, crc32c(out), 4);
  assert(out.size() == counter_file_bytes);
  return out;
}

result<checkpoint_id> file_checkpoint_id_counter::decode(std::string_view bytes) {
  if (bytes.size() != counter_file_bytes)
    return error{"checkpoint id counter file has " + std::to_string(bytes.size()) +
                 " bytes, expected " + std::to_string(counter_file_bytes)};
  if (bytes.substr(0, counter_magic.size()) != counter_magic)
    return error{"checkpoint id counter file has a bad magic"};
  if (get_le(bytes, 24, 4) != crc32c(bytes.substr(0, 24)))
    return error{"checkpoint id counter file fails its checksum"};
  const std::uint64_t version = get_le(bytes, 12, 4);
  if (version != counter_version)
    return error{"checkpoint id counter file has unsupported version " + std::to_string(version)};
  const std::uint64_t value = get_le(bytes, 16, 8);
  if (value < 1 || value > static_cast<std::uint64_t>(max_id))
    return error{"checkpoint id counter file holds an impossible id " + std::to_string(value)};
  return static_cast<checkpoint_id>(value);
}

file_checkpoint_id_counter::file_checkpoint_id_counter(std::filesystem::path path,
                                                       std::int64_t reserve_block,
                                                       checkpoint_id next)
    : path_(std::move(path)), reserve_block_(reserve_block), next_(next), limit_(next) {
  assert(reserve_block_ >= 1);
  assert(next_ >= 1);
}

result<std::unique_ptr<file_checkpoint_id_counter>> file_checkpoint_id_counter::open(
    std::filesystem::path folder, std::int64_t reserve_block) {
  assert(reserve_block >= 1);
  assert(!folder.empty());
  std::filesystem::path path = folder / file_name;
  checkpoint_id next = 1;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (ec) return error{"checkpoint id counter: stat " + path.string() + ": " + ec.message()};
  if (exists) {
    auto bytes = checkpoint_storage::read_file(path, 4096);
    if (!bytes) return error{"checkpoint id counter: " + bytes.err().message};
    auto limit = decode(*bytes);
    if (!limit) return error{limit.err().message + " (" + path.string() + ")"};
    // Ids below the persisted limit may have been handed out before the restart.
    next = *limit;
  }
  // A leftover temp file is an interrupted write; the next persist overwrites it.
  return std::unique_ptr<file_checkpoint_id_counter>(
      new file_checkpoint_id_counter(std::move(path), reserve_block, next));
}

result<void> file_checkpoint_id_counter::persist_locked(checkpoint_id limit) {
  assert(limit >= limit_);
  auto r = checkpoint_storage::write_file_durably(path_, encode(limit));
  if (!r) return error{"checkpoint id counter: " + r.err().message};
  limit_ = limit;
  return success();
}

result<checkpoint_id> file_checkpoint_id_counter::get_and_increment() {
  std::lock_guard lock(mutex_);
  assert(next_ <= limit_);
  if (next_ == limit_) {
    if (next_ > max_id - reserve_block_) return exhausted();
    // Persist before handing out: an id is never used unless a restart would skip it.
    if (auto r = persist_locked(next_ + reserve_block_); !r) return r.err();
  }
  assert(next_ < limit_);
  return next_++;
}

bool file_checkpoint_id_counter::next_is_cheap() const {
  std::lock_guard lock(mutex_);
  return next_ < limit_;
}

checkpoint_id file_checkpoint_id_counter::peek_next() const {
  std::lock_guard lock(mutex_);
  return next_;
}

checkpoint_id file_checkpoint_id_counter::reserved_until() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

result<void> file_checkpoint_id_counter::advance_to(checkpoint_id next) {
  std::lock_guard lock(mutex_);
  if (next <= next_) return success();
  if (next > limit_) {
    if (next > max_id - reserve_block_) return exhausted();
    // Reserve a block past the target in the same write, so the next id is cheap again.
    if (auto r = persist_locked(next + reserve_block_); !r) return r;
  }
  next_ = next;
  assert(next_ <= limit_);
  return success();
}

}  // namespace snapflow
