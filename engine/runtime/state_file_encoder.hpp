#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/channel_state.hpp"
#include "engine/state/key_group_walk.hpp"
#include "engine/state/keyed_state_files.hpp"
#include "engine/state/keyed_state_snapshot.hpp"

namespace snapflow {

struct subtask_snapshot;

// The one encoder of the current state file format (state_file.hpp), in the order a stream
// produces it: head() once, key_group() for each non-empty key group in ascending order, then
// tail() once. Nothing it writes depends on what comes later, so the CRC-32C runs over the bytes
// as they go and no field is ever patched: a file of any size is written in one pass.
//
// The bytes collect in a buffer. With a flush function, the buffer is handed to it (and emptied)
// whenever it holds at least `flush_at` bytes, checked between entries, so it never holds more
// than `flush_at` plus one entry; without one, the whole file stays in buffer()
// (state_file::encode).
class state_file_encoder {
 public:
  using flush_fn = std::function<void(std::string_view)>;

  state_file_encoder() = default;
  state_file_encoder(std::size_t flush_at, flush_fn flush);

  // Magic, version, the subtask, its operator state and the keyed state's max parallelism.
  void head(const subtask_snapshot& s);
  // A key group above the previous one, holding something.
  void key_group(std::uint32_t group, const key_group_state& state);
  // The same, written as its holder walks it (no neutral form in between).
  void key_group(std::uint32_t group, const key_group_walk& walk);
  // The end of the key groups, the keyed state files, the channel state and the trailer; hands
  // everything still buffered to the flush function, when there is one.
  void tail(const std::optional<keyed_state_files>& files,
            const std::vector<persisted_channel>& channels = {});

  // The flush threshold from now on (a writer that holds small states in memory first).
  void set_flush_at(std::size_t bytes) { flush_at_ = bytes; }
  // Bytes not handed to the flush function yet.
  std::string& buffer() { return buf_; }
  // Every byte encoded so far, flushed or not.
  std::uint64_t size() const { return flushed_ + buf_.size(); }
  // The most the buffer held at once.
  std::size_t peak_buffered() const { return peak_; }
  // After tail(): the CRC-32C of the whole file, trailer included (the state handle's checksum).
  std::uint32_t file_checksum() const { return file_crc_; }

 private:
  void u32(std::uint32_t v);
  void u64(std::uint64_t v);
  void str(std::string_view s);
  void count(std::size_t n);
  class walk_writer;
  void maybe_flush() {
    if (buf_.size() >= flush_at_ && flush_) flush();
  }
  void flush();

  std::string buf_;
  std::size_t flush_at_ = 0;
  flush_fn flush_;
  std::uint64_t flushed_ = 0;
  std::uint32_t crc_ = 0;  // of the flushed bytes
  std::size_t peak_ = 0;
  std::uint32_t file_crc_ = 0;
};

}  // namespace snapflow
