#include "engine/runtime/state_file_encoder.hpp"

#include <algorithm>
#include <cassert>
#include <limits>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"

namespace snapflow {

state_file_encoder::state_file_encoder(std::size_t flush_at, flush_fn flush)
    : flush_at_(flush_at), flush_(std::move(flush)) {}

// Little-endian, appended in one piece (a byte at a time, the appends cost more than the rest of
// a large snapshot's encoding).
void state_file_encoder::u32(std::uint32_t v) {
  char bytes[4];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xFFu);
  buf_.append(bytes, sizeof bytes);
}

void state_file_encoder::u64(std::uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xFFu);
  buf_.append(bytes, sizeof bytes);
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

// Writes what a key group walk visits, flushing between entries.
class state_file_encoder::walk_writer final : public key_group_visitor {
 public:
  explicit walk_writer(state_file_encoder& e) : e_(e) {}
  void value_states(std::size_t states) override { e_.count(states); }
  void value_state(std::string_view name, std::size_t keys) override { named(name, keys); }
  void value(std::uint64_t key, std::string_view bytes) override {
    e_.u64(key);
    e_.str(bytes);
    e_.maybe_flush();
  }
  void map_states(std::size_t states) override { e_.count(states); }
  void map_state(std::string_view name, std::size_t keys) override { named(name, keys); }
  void map_key(std::uint64_t key, std::size_t entries) override {
    e_.u64(key);
    e_.count(entries);
  }
  void map_entry(std::string_view map_key, std::string_view bytes) override {
    e_.str(map_key);
    e_.str(bytes);
    e_.maybe_flush();
  }

 private:
  // A state's head: its name and how many keys follow.
  void named(std::string_view name, std::size_t keys) {
    e_.str(name);
    e_.count(keys);
  }

  state_file_encoder& e_;
};

void state_file_encoder::key_group(std::uint32_t group, const key_group_state& state) {
  key_group(group, neutral_key_group_walk(state));
}

void state_file_encoder::key_group(std::uint32_t group, const key_group_walk& walk) {
  assert(group != state_file::end_of_key_groups);
  u32(group);
  walk_writer writer(*this);
  walk.walk(writer);
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
