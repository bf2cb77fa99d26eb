#include "engine/runtime/state_file.hpp"

#include <cassert>
#include <cstdio>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file_encoder.hpp"
#include "engine/runtime/state_file_reader.hpp"
#include "engine/runtime/state_file_writer.hpp"

namespace snapflow {

namespace {

constexpr std::size_t trailer_bytes = 4;
// A state file of one subtask; far above anything the in-memory backend holds.
constexpr std::uint64_t max_state_file_bytes = 4ull << 30;

// The handle's checksum (CRC-32C of the whole file) of bytes encode() made. Their trailer is
// already the CRC of everything before it, so continuing it over the trailer's four bytes gives
// the whole file's CRC without a second pass over a state of many MiB.
std::uint32_t checksum_of_encoded(std::string_view bytes) {
  assert(bytes.size() >= trailer_bytes);
  const std::string_view trailer = bytes.substr(bytes.size() - trailer_bytes);
  std::uint32_t crc = 0;
  for (int i = 0; i < 4; ++i)
    crc |= std::uint32_t{static_cast<unsigned char>(trailer[i])} << (8 * i);
  return crc32c(trailer, crc);
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
  e.tail(s.keyed_files, s.channels);
  return std::move(e.buffer());
}

result<subtask_snapshot> state_file::decode(std::string_view bytes) {
  keyed_state_snapshot keyed;
  keyed_snapshot_collector groups(keyed);
  state_file_reader reader(bytes);
  auto decoded = reader.read(groups);
  if (!decoded) return decoded.err();
  decoded->keyed.key_groups = std::move(keyed.key_groups);
  return decoded;
}

result<state_handle> state_file::write(const std::filesystem::path& file,
                                       const subtask_snapshot& snapshot) {
  state_file_writer w(file);
  if (auto r = w.head(snapshot); !r) return r.err();
  for (const auto& [group, state] : snapshot.keyed.key_groups)
    if (auto r = w.key_group(group, state); !r) return r.err();
  auto written = w.finish(snapshot.keyed_files, snapshot.channels);
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
                     4 + 4 + 4 + 4;
  for (const auto& channel : snapshot.channels) {
    size += 16;
    for (const auto& r : channel.records) {
      size += 28 + r.payload.size();
      if (size > limit) return false;
    }
  }
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
  if (!handle.is_inline() && handle.size > max_state_file_bytes)
    return error{"state file " + handle.path + " is too large to load"};
  keyed_state_snapshot keyed;
  keyed_snapshot_collector groups(keyed);
  auto decoded = state_file_reader::read(handle, groups);
  if (!decoded) return decoded.err();
  decoded->keyed.key_groups = std::move(keyed.key_groups);
  return decoded;
}

}  // namespace snapflow
