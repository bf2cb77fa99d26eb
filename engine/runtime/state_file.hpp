#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <optional>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "engine/runtime/channel_state.hpp"
#include "engine/state/keyed_state_files.hpp"
#include "engine/state/keyed_state_snapshot.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Named non-keyed state of an operator (a source's offset, a sink's pending transactions).
struct operator_state_entry {
  std::string name;
  std::string bytes;

  bool operator==(const operator_state_entry&) const = default;
};

// Everything one subtask snapshotted for one checkpoint.
struct subtask_snapshot {
  std::string operator_uid;
  std::uint32_t subtask_index = 0;
  std::uint32_t parallelism = 1;
  checkpoint_id checkpoint = 0;
  std::vector<operator_state_entry> operator_state;
  keyed_state_snapshot keyed;
  // Keyed state stored as the backend's own files (an incremental rocksdb checkpoint): their
  // manifest. The files are the other handles of the subtask's state.
  std::optional<keyed_state_files> keyed_files;
  // An unaligned checkpoint's in-flight records, per channel (empty for an aligned one).
  std::vector<persisted_channel> channels;

  bool empty() const {
    return operator_state.empty() && keyed.key_groups.empty() && !keyed_files &&
           channels.empty();
  }
  bool operator==(const subtask_snapshot&) const = default;
};

// The state file of one subtask for one checkpoint, in the checkpoint's folder. Format
// (integers little-endian, strings as u32 length + bytes, n x (...) a u32 count then entries):
//   magic "SNAPFLOW-STA" | u32 version (6) | body | u32 CRC-32C of all before
//   body: str uid | u32 subtask | u32 parallelism | i64 checkpoint id |
//         n x (str name, str bytes)                               -- operator state
//         u32 max parallelism |                                   -- keyed state:
//         key group records in strictly ascending key group order, each
//           u32 key group | n x (str state, n x (u64 key, str value)) |
//           n x (str state, n x (u64 key, n x (str map key, str value)))
//         u32 0xFFFFFFFF (end of key groups) |
//         u32 keyed state files 0/1 [| keyed state files:
//          u32 max parallelism | u32 first key group | u32 last key group |
//          n x (str local name, str handle name, u64 size, u32 CRC-32C, u32 shared 0/1)] |
//         n x (u32 side 0 input / 1 output, u32 gate, u32 channel,   -- channel state
//              n x (u64 key, i64 seq, i64 value, str payload, i64 event timestamp))
// Nothing in it depends on what follows, so it is written in one pass with a running CRC
// (state_file_encoder, state_file_writer): a state larger than memory streams to its file.
// Version 5 is version 6 without a channel record's event timestamp (read as none); version 4 is
// version 5 without the channel state. Version 3 is the same body with a u64 body length after the version and a u32 count of key
// groups before them instead of the terminator. Versions 1 and 2, written before state values
// were bytes, are version 3 with i64 where a value's str is (read as int64_state_value.hpp's 8
// bytes), without the 0/1 word, and the keyed state files present exactly in version 2. All
// six are read; only version 6 is written.
// The handle's checksum (CRC-32C of the whole file, checkpoint_storage::verify_state) is checked
// before a byte is decoded; the trailer and every length are checked again while decoding, so a
// file that passes the handle's check but was produced by a bug still cannot crash a restore.
// The decoding is state_file_reader's, a stream of key groups; decode() and read() collect them,
// a restore hands them to the backend one at a time.
class state_file {
 public:
  static constexpr std::string_view magic = "SNAPFLOW-STA";
  static constexpr std::uint32_t version = 6;
  // Read only: channel records without their event timestamps.
  static constexpr std::uint32_t version_untimed_channels = 5;
  // Read only: no channel state.
  static constexpr std::uint32_t version_without_channels = 4;
  // Read only: a body length and a key group count up front.
  static constexpr std::uint32_t version_bytes_counted = 3;
  // Read only (int64 values): without and with keyed state files.
  static constexpr std::uint32_t version_int64 = 1;
  static constexpr std::uint32_t version_int64_with_files = 2;
  // Ends the key group records of versions 4 to 6; never a key group (they are below max parallelism).
  static constexpr std::uint32_t end_of_key_groups = 0xFFFFFFFFu;

  // "<uid>-<subtask>-<attempt>.state", the uid reduced to file-name-safe characters plus a
  // checksum of the original so two uids never share a name.
  static std::string file_name(std::string_view uid, std::uint32_t subtask_index,
                               std::uint32_t attempt);

  static std::string encode(const subtask_snapshot& snapshot);
  static result<subtask_snapshot> decode(std::string_view bytes);

  // Writes durably (temp file, fsync, rename, fsync the folder) through state_file_writer, the
  // bytes never held whole, and returns the handle the acknowledgement carries.
  static result<state_handle> write(const std::filesystem::path& file,
                                    const subtask_snapshot& snapshot);
  // The same for bytes encode() already made.
  static result<state_handle> write_encoded(const std::filesystem::path& file, std::string bytes);
  // A handle that carries encode()'s bytes itself (no file): for states of at most
  // checkpoint_config::inline_state_max_bytes.
  static state_handle make_inline(std::string bytes);
  // False when the encoded snapshot is surely over `limit` bytes. Walks at most about `limit`
  // bytes' worth of entries, so it is cheap on the task thread whatever the state's size.
  static bool may_fit(const subtask_snapshot& snapshot, std::size_t limit);
  // Verifies the handle's size and checksum first: a corrupt or torn file (or inline state) is
  // refused with an error naming it, never loaded. The whole state in memory (tests, tools): a
  // restore streams instead (state_file_reader::read).
  static result<subtask_snapshot> read(const state_handle& handle);
};

// A uid reduced to [A-Za-z0-9_-] plus the hex CRC-32C of the original: safe in a file name,
// and distinct for distinct uids.
std::string file_safe_uid(std::string_view uid);

}  // namespace snapflow
