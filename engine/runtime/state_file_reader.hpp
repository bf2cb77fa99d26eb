#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/state/keyed_snapshot_part.hpp"

namespace snapflow {

// The one decoder of the state file format (state_file.hpp, versions 1 to 5), as a stream: the
// head (the subtask, its operator state, the keyed state's max parallelism), then the key groups
// one at a time handed to a keyed_group_sink, then the tail (the keyed state files manifest and the channel state).
// Only the group being decoded is held, besides a fixed read buffer: a state larger than memory
// can be restored from its file. state_file::decode is this reader over bytes in memory.
//
// Every length and count is checked against the bytes that remain before it allocates or drives
// a loop, and key groups must be strictly ascending (every version was written in that order),
// so whatever the input the reader ends with an error, never a crash. A file is verified whole
// (size and CRC-32C against its handle, through a buffer) before a byte is decoded; the decoding
// pass computes the CRC again and compares it at the end (the file may change in between), so a
// sink can have taken some groups of a file that turns out to have changed: the caller fails.
class state_file_reader {
 public:
  static constexpr std::size_t default_buffer_bytes = std::size_t{1} << 20;

  // What the reader held beyond the sink's group (tests: a restore holds one group at a time).
  struct stats {
    std::uint64_t key_groups = 0;
    std::size_t buffer_bytes = 0;            // the read buffer (0: the bytes were in memory)
    std::uint64_t largest_group_bytes = 0;   // the most encoded bytes of one key group
  };
  // Called once the head is decoded and checked, before any key group: the snapshot without key
  // groups or keyed state files. An error stops the read and is returned.
  using head_fn = std::function<result<void>(const subtask_snapshot&)>;

  // Bytes in memory (encode()'s, or an inline handle's), whose checksum is checked up front.
  explicit state_file_reader(std::string_view bytes);
  // A state file (a handle with a path), read through a buffer of `buffer_bytes`.
  state_file_reader(const state_handle& handle, std::size_t buffer_bytes);
  ~state_file_reader();
  state_file_reader(const state_file_reader&) = delete;
  state_file_reader& operator=(const state_file_reader&) = delete;

  // Decodes everything once: the snapshot without its key groups (they went to `sink`; its keyed
  // max parallelism and keyed state files are set). Errors are not yet prefixed with the file.
  result<subtask_snapshot> read(keyed_group_sink& sink, const head_fn& on_head = {});

  const stats& statistics() const { return stats_; }

  // Verifies `handle` (size, CRC-32C: checkpoint_storage::verify_state), then decodes it, inline
  // or from its file; errors name the file. The restore path of every state file.
  static result<subtask_snapshot> read(const state_handle& handle, keyed_group_sink& sink,
                                       const head_fn& on_head = {},
                                       std::size_t buffer_bytes = default_buffer_bytes,
                                       stats* out_stats = nullptr);

 private:
  result<std::uint32_t> prologue();
  result<void> head(subtask_snapshot& s);
  result<void> key_groups(std::uint32_t file_version, keyed_group_sink& sink);
  result<void> key_group(bool int64_values, key_group_state& state);
  result<void> tail(std::uint32_t file_version, subtask_snapshot& s);
  // `timed`: each record carries its event timestamp (version 6 on).
  result<void> channels(subtask_snapshot& s, bool timed);

  // Bounded primitives: a short read or a count beyond what remains sets failed_ and yields
  // zeros, so a decoder walks on harmlessly and checks failed_ where it matters.
  bool take(char* out, std::size_t n);
  std::uint32_t u32();
  std::uint64_t u64();
  std::string str();
  std::string value(bool int64_values);
  std::uint32_t count(std::size_t min_bytes);
  std::uint64_t remaining() const { return limit_ - consumed_; }
  bool refill();
  // The error of a failed primitive: the file's read error, or a malformed body.
  error failure() const;

  std::string_view window_;  // the bytes at hand: all of them in memory, or the buffer's
  std::size_t pos_ = 0;      // in window_
  std::uint64_t size_ = 0;   // the whole file's
  std::uint64_t consumed_ = 0;
  std::uint64_t limit_ = 0;  // what the decoder may consume (the trailer is read on its own)
  bool failed_ = false;
  // A file: its descriptor and buffer, the bytes read so far and the CRC over the part before
  // the trailer (and over the whole file).
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
  std::uint64_t read_ = 0;
  std::uint32_t body_crc_ = 0;
  std::uint32_t file_crc_ = 0;
  std::uint32_t expected_crc_ = 0;  // the handle's
  std::optional<error> io_error_;
  // In memory: the checksum was checked up front.
  bool in_memory_ = false;
  // The last error already names the file, or is the caller's (head_fn, the sink).
  bool named_ = false;
  stats stats_;
};

}  // namespace snapflow
