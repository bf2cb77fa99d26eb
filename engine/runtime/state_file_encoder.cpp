#include "engine/runtime/state_file_encoder.hpp"

#include <algorithm>
#include <cassert>
#include <limits>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"

namespace snapflow {

state_file_encoder::state_file_encoder(std::size_t flush_at, flush_fn flush)
    : flush_at_(flush_at), flush_(std::move(flush)) {}

void state_file_encoder::u32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

void state_file_encoder::u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

void state_file_encoder::str(std::string_view s) {
  assert(s.size() <= std::numeric_limits<std::uint32_t>::max());
  u32(static_cast<std::uint32_t>(s.size()));
  buf_.append(s);
}

void state_file_encoder::count(std::size_t n) {
  assert(n <= std::numeric_limits<std::uint32_t>::max());
  u32(static_cast<std::uint32_t>(n));
}

void state_file_encoder::flush() {
  peak_ = std::max(peak_, buf_.size());
  crc_ = crc32c(buf_, crc_);
  flush_(buf_);
  flushed_ += buf_.size();
  buf_.clear();
}

void state_file_encoder::head(const subtask_snapshot& s) {
  buf_.append(state_file::magic);
  u32(state_file::version);
  str(s.operator_uid);
  u32(s.subtask_index);
  u32(s.parallelism);
  u64(static_cast<std::uint64_t>(s.checkpoint));
  count(s.operator_state.size());
  for (const auto& e : s.operator_state) {
    str(e.name);
    str(e.bytes);
    maybe_flush();
  }
  u32(s.keyed.max_parallelism);
  maybe_flush();
}

void state_file_encoder::key_group(std::uint32_t group, const key_group_state& state) {
  assert(group != state_file::end_of_key_groups);
  u32(group);
  count(state.values.size());
  for (const auto& [name, keys] : state.values) {
    str(name);
    count(keys.size());
    for (const auto& [key, value] : keys) {
      u64(key);
      str(value);
      maybe_flush();
    }
  }
  count(state.maps.size());
  for (const auto& [name, keys] : state.maps) {
    str(name);
    count(keys.size());
    for (const auto& [key, entries] : keys) {
      u64(key);
      count(entries.size());
      for (const auto& [map_key, value] : entries) {
        str(map_key);
        str(value);
        maybe_flush();
      }
    }
  }
  maybe_flush();
}

void state_file_encoder::tail(const std::optional<keyed_state_files>& files,
                              const std::vector<persisted_channel>& channels) {
  u32(state_file::end_of_key_groups);
  u32(files ? 1 : 0);
  if (files) {
    u32(files->max_parallelism);
    u32(files->first_key_group);
    u32(files->last_key_group);
    count(files->files.size());
    for (const auto& file : files->files) {
      str(file.local_name);
      str(file.handle_name);
      u64(file.size);
      u32(file.checksum);
      u32(file.shared ? 1 : 0);
    }
  }
  count(channels.size());
  for (const auto& c : channels) {
    u32(static_cast<std::uint32_t>(c.side));
    u32(c.gate);
    u32(c.channel);
    count(c.records.size());
    for (const auto& r : c.records) {
      u64(r.key);
      u64(static_cast<std::uint64_t>(r.seq));
      u64(static_cast<std::uint64_t>(r.value));
      str(r.payload);
      u64(static_cast<std::uint64_t>(r.timestamp));
      maybe_flush();
    }
  }
  const std::uint32_t trailer = crc32c(buf_, crc_);
  u32(trailer);
  // The trailer is the CRC of everything before it: continuing over its four bytes gives the
  // whole file's without a second pass.
  file_crc_ = crc32c(std::string_view(buf_).substr(buf_.size() - 4), trailer);
  peak_ = std::max(peak_, buf_.size());
  if (flush_) {
    flush_(buf_);
    flushed_ += buf_.size();
    buf_.clear();
  }
}

}  // namespace snapflow
