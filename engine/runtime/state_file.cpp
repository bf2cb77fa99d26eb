#include "engine/runtime/state_file.hpp"

#include <cassert>
#include <cstdio>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file_encoder.hpp"
#include "engine/runtime/state_file_writer.hpp"
#include "engine/state/int64_state_value.hpp"

namespace snapflow {

namespace {

constexpr std::size_t trailer_bytes = 4;
// A state file of one subtask; far above anything the in-memory backend holds.
constexpr std::uint64_t max_state_file_bytes = 4ull << 30;

// Reads with bounds checks: any short or inconsistent read sets failed() and yields zeros.
class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}

  std::uint32_t u32() {
    if (!need(4)) return 0;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= std::uint32_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
    pos_ += 4;
    return v;
  }
  std::uint64_t u64() {
    if (!need(8)) return 0;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= std::uint64_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
    pos_ += 8;
    return v;
  }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  std::string str() {
    const std::uint32_t n = u32();
    if (!need(n)) return {};
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // An element count; each element takes at least `min_bytes`, so a forged count larger than
  // the rest of the body fails here instead of driving a huge loop.
  std::uint32_t count(std::size_t min_bytes) {
    const std::uint32_t n = u32();
    if (failed_ || std::uint64_t{n} * min_bytes > in_.size() - pos_) {
      failed_ = true;
      return 0;
    }
    return n;
  }
  bool failed() const { return failed_; }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  bool need(std::size_t n) {
    if (failed_ || in_.size() - pos_ < n) {
      failed_ = true;
      return false;
    }
    return true;
  }

  std::string_view in_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

// The handle's checksum (CRC-32C of the whole file) of bytes encode() made. Their trailer is
// already the CRC of everything before it, so continuing it over the trailer's four bytes gives
// the whole file's CRC without a second pass over a state of many MiB.
std::uint32_t checksum_of_encoded(std::string_view bytes) {
  assert(bytes.size() >= trailer_bytes);
  const std::string_view trailer = bytes.substr(bytes.size() - trailer_bytes);
  reader r(trailer);
  return crc32c(trailer, r.u32());
}

}  // namespace

std::string file_safe_uid(std::string_view uid) {
  std::string out;
  out.reserve(uid.size() + 9);
  for (char c : uid) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
    out.push_back(safe ? c : '_');
  }
  if (out.size() > 64) out.resize(64);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(uid));
  out.push_back('-');
  out.append(hex);
  return out;
}

std::string state_file::file_name(std::string_view uid, std::uint32_t subtask_index,
                                  std::uint32_t attempt) {
  return file_safe_uid(uid) + "-" + std::to_string(subtask_index) + "-" + std::to_string(attempt) +
         ".state";
}

std::string state_file::encode(const subtask_snapshot& s) {
  state_file_encoder e;
  e.head(s);
  for (const auto& [group, state] : s.keyed.key_groups) e.key_group(group, state);
  e.tail(s.keyed_files);
  return std::move(e.buffer());
}

namespace {

// The body of a version 4 file (between the version word and the trailer), or of versions 1-3
// (after the body length). Every count is checked against what remains before it drives a loop.
result<subtask_snapshot> decode_body(std::string_view body, std::uint32_t file_version) {
  // Versions 1 and 2 held int64 values: read as the bytes int64 state is stored as now.
  const bool int64_values =
      file_version == state_file::version_int64 ||
      file_version == state_file::version_int64_with_files;
  const auto value = [&](reader& r) {
    return int64_values ? encode_int64_state(r.i64()) : r.str();
  };
  const std::size_t value_min_bytes = int64_values ? 8 : 4;
  // Version 4 ends its key groups with a terminator instead of counting them first.
  const bool terminated = file_version == state_file::version;

  reader r(body);
  subtask_snapshot s;
  s.operator_uid = r.str();
  s.subtask_index = r.u32();
  s.parallelism = r.u32();
  s.checkpoint = r.i64();
  const std::uint32_t n_ops = r.count(8);
  for (std::uint32_t i = 0; i < n_ops && !r.failed(); ++i) {
    operator_state_entry e;
    e.name = r.str();
    e.bytes = r.str();
    s.operator_state.push_back(std::move(e));
  }
  s.keyed.max_parallelism = r.u32();
  // Counted: at most n_groups rounds. Terminated: each round reads at least 12 bytes, so the
  // rounds end with the body (r.failed()) if no terminator does.
  const std::uint32_t n_groups = terminated ? 0 : r.count(12);
  std::optional<std::uint32_t> previous;
  for (std::uint32_t g = 0; !r.failed(); ++g) {
    if (!terminated && g == n_groups) break;
    const std::uint32_t group = r.u32();
    if (group == state_file::end_of_key_groups) {
      if (terminated) break;
      // Versions 1-3 count their key groups; the terminator is never one.
      if (!r.failed()) return error{"state file: 4294967295 is not a key group"};
    }
    if (terminated && previous && group <= *previous)
      return error{"state file: key group " + std::to_string(group) + " follows key group " +
                   std::to_string(*previous) + " (not ascending)"};
    previous = group;
    key_group_state state;
    const std::uint32_t n_values = r.count(8);
    for (std::uint32_t i = 0; i < n_values && !r.failed(); ++i) {
      auto& keys = state.values[r.str()];
      const std::uint32_t n_keys = r.count(8 + value_min_bytes);
      for (std::uint32_t k = 0; k < n_keys && !r.failed(); ++k) {
        const std::uint64_t key = r.u64();
        keys[key] = value(r);
      }
    }
    const std::uint32_t n_maps = r.count(8);
    for (std::uint32_t i = 0; i < n_maps && !r.failed(); ++i) {
      auto& keys = state.maps[r.str()];
      const std::uint32_t n_keys = r.count(12);
      for (std::uint32_t k = 0; k < n_keys && !r.failed(); ++k) {
        auto& entries = keys[r.u64()];
        const std::uint32_t n_entries = r.count(4 + value_min_bytes);
        for (std::uint32_t e = 0; e < n_entries && !r.failed(); ++e) {
          std::string map_key = r.str();
          entries[std::move(map_key)] = value(r);
        }
      }
    }
    if (r.failed()) break;
    if (!s.keyed.key_groups.emplace(group, std::move(state)).second)
      return error{"state file: key group " + std::to_string(group) + " appears twice"};
  }
  bool has_files = file_version == state_file::version_int64_with_files;
  if (file_version == state_file::version || file_version == state_file::version_bytes_counted) {
    const std::uint32_t flag = r.u32();
    if (!r.failed() && flag > 1)
      return error{"state file: the keyed state files flag is not 0 or 1"};
    has_files = flag == 1;
  }
  if (has_files) {
    keyed_state_files f;
    f.max_parallelism = r.u32();
    f.first_key_group = r.u32();
    f.last_key_group = r.u32();
    const std::uint32_t n_files = r.count(24);
    for (std::uint32_t i = 0; i < n_files && !r.failed(); ++i) {
      keyed_state_file file;
      file.local_name = r.str();
      file.handle_name = r.str();
      file.size = r.u64();
      file.checksum = r.u32();
      const std::uint32_t shared = r.u32();
      if (!r.failed() && shared > 1)
        return error{"state file: a keyed state file's shared flag is not 0 or 1"};
      file.shared = shared == 1;
      f.files.push_back(std::move(file));
    }
    s.keyed_files = std::move(f);
  }
  if (r.failed()) return error{"state file: truncated or malformed body"};
  if (!r.at_end()) return error{"state file: trailing bytes after the body"};
  if (s.parallelism == 0 || s.subtask_index >= s.parallelism)
    return error{"state file: subtask " + std::to_string(s.subtask_index) + " of parallelism " +
                 std::to_string(s.parallelism) + " is impossible"};
  return s;
}

}  // namespace

result<subtask_snapshot> state_file::decode(std::string_view bytes) {
  constexpr std::size_t version_end = 12 + 4;
  if (bytes.size() < version_end + trailer_bytes)
    return error{"state file: " + std::to_string(bytes.size()) +
                 " bytes is shorter than the header"};
  if (bytes.substr(0, magic.size()) != magic)
    return error{"state file: bad magic (not a snapflow state file)"};
  reader header(bytes.substr(magic.size(), 4));
  const std::uint32_t file_version = header.u32();
  if (file_version != version && file_version != version_bytes_counted &&
      file_version != version_int64 && file_version != version_int64_with_files)
    return error{"state file: unsupported format version " + std::to_string(file_version)};
  std::size_t body_start = version_end;
  if (file_version != version) {
    // Versions 1-3 give the body's length before it.
    body_start += 8;
    if (bytes.size() < body_start + trailer_bytes)
      return error{"state file: " + std::to_string(bytes.size()) +
                   " bytes is shorter than the header"};
    reader length(bytes.substr(version_end, 8));
    if (length.u64() != bytes.size() - body_start - trailer_bytes)
      return error{"state file: body length does not match the file (torn write?)"};
  }
  reader trailer(bytes.substr(bytes.size() - trailer_bytes));
  if (trailer.u32() != crc32c(bytes.substr(0, bytes.size() - trailer_bytes)))
    return error{"state file: checksum mismatch"};
  return decode_body(bytes.substr(body_start, bytes.size() - body_start - trailer_bytes),
                     file_version);
}

result<state_handle> state_file::write(const std::filesystem::path& file,
                                       const subtask_snapshot& snapshot) {
  state_file_writer w(file);
  if (auto r = w.head(snapshot); !r) return r.err();
  for (const auto& [group, state] : snapshot.keyed.key_groups)
    if (auto r = w.key_group(group, state); !r) return r.err();
  auto written = w.finish(snapshot.keyed_files);
  if (!written) return written.err();
  return std::move(written->handle);
}

result<state_handle> state_file::write_encoded(const std::filesystem::path& file,
                                               std::string bytes) {
  if (auto written = checkpoint_storage::write_file_durably(file, bytes); !written)
    return written.err();
  return state_handle{file.string(), bytes.size(), checksum_of_encoded(bytes), std::nullopt};
}

state_handle state_file::make_inline(std::string bytes) {
  state_handle h;
  h.size = bytes.size();
  h.checksum = checksum_of_encoded(bytes);
  h.inline_bytes = std::move(bytes);
  return h;
}

bool state_file::may_fit(const subtask_snapshot& snapshot, std::size_t limit) {
  // A lower bound of encode()'s size: header, trailer and every length and payload byte of the
  // entries walked so far; stops as soon as it passes the limit.
  std::size_t size = magic.size() + 4 + 4 + snapshot.operator_uid.size() + 4 + 4 + 8 + 4 + 4 +
                     4 + 4 + 4;
  for (const auto& entry : snapshot.operator_state) {
    size += 8 + entry.name.size() + entry.bytes.size();
    if (size > limit) return false;
  }
  for (const auto& [group, state] : snapshot.keyed.key_groups) {
    for (const auto& [name, values] : state.values) {
      size += 8 + name.size() + values.size() * 12;
      if (size > limit) return false;
    }
    for (const auto& [name, per_key] : state.maps) {
      size += 8 + name.size();
      for (const auto& [key, entries] : per_key) {
        size += 12 + entries.size() * 8;
        if (size > limit) return false;
      }
    }
  }
  return size <= limit;
}

result<subtask_snapshot> state_file::read(const state_handle& handle) {
  if (auto verified = checkpoint_storage::verify_state(handle); !verified)
    return error{"refusing corrupt state: " + verified.err().message};
  if (handle.is_inline()) {
    auto decoded = decode(*handle.inline_bytes);
    if (!decoded) return error{decoded.err().message + " (inline state)"};
    return decoded;
  }
  if (handle.size > max_state_file_bytes)
    return error{"state file " + handle.path + " is too large to load"};
  auto bytes = checkpoint_storage::read_file(handle.path, handle.size);
  if (!bytes) return bytes.err();
  // Verified a moment ago; read again, so compare once more (the file may have changed).
  if (bytes->size() != handle.size || crc32c(*bytes) != handle.checksum)
    return error{"refusing corrupt state: state file " + handle.path +
                 " changed while it was read"};
  auto decoded = decode(*bytes);
  if (!decoded) return error{decoded.err().message + " (" + handle.path + ")"};
  return decoded;
}

}  // namespace snapflow
