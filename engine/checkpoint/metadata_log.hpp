#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "engine/checkpoint/posix_io.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// The record that a periodic checkpoint completed: its metadata appended to a log in the job's
// folder (`_checkpoints-<n>.log`), made durable by one fdatasync. The checkpoint's
// `chk-<id>/_metadata` is written too, for anyone who reads the folder, but not fsynced: a
// crash of the machine may leave it missing or torn, and recovery takes the log's copy
// (checkpoint_storage::recover, read_metadata).
//
// Why: on a virtual disk every fsync costs a journal commit and a cache flush, each a VM exit,
// and a checkpoint's own file needed two (the file's bytes and its entry in the folder). Into a
// segment whose blocks were written (zeros) and fsynced when it was made, an append changes no
// file-system metadata that a read depends on, so fdatasync writes the record's blocks and
// flushes, and commits no journal (docs/benchmarks.md, "What checkpoints cost a running job").
//
// Layout: a segment is zero-filled when made, then records follow each other from offset 0,
// each starting on a block (4 KiB) and padded to whole blocks, so an append never rewrites a
// block holding an earlier record. A record: magic "SFCKLOG1", the payload's length (u32 LE),
// the checkpoint id (u64 LE), a CRC-32C of those and the payload (u32 LE), 4 zero bytes, then
// the payload (the `_metadata` bytes). A failed append abandons its segment (whatever the
// failure left there is not appended after); the next append makes a new one. Segments are
// made ahead (prepare(), at a checkpoint's preparation) or as needed, and removed once the
// newer ones hold `keep` records: the retained checkpoints are always among those.
//
// A segment's size follows what it stores and the room there is: room for `records_ahead`
// records of the size of the latest (its header and padding included), at least
// `min_segment_bytes` and at most `segment_bytes` (4 MiB by default), never more than a
// `free_space_share`-th of the space left on the file system, and always at least what the
// record being appended needs. A job of kilobyte checkpoints thus writes 256 KiB segments, not
// 4 MiB ones. When the zero fill fails for lack of space (ENOSPC, EDQUOT), the segment is
// removed and made again at half the size, down to the record itself; when even that does not
// fit, the append fails with "not enough space in <job folder> for checkpoint N's metadata log
// record: B bytes needed, A available" (posix_io::out_of_space).
//
// Thread-safe: appends are serialised (the coordinator writes from its event thread or its
// I/O pool).
class metadata_log {
 public:
  static constexpr std::string_view segment_prefix = "_checkpoints-";
  static constexpr std::string_view segment_suffix = ".log";
  static constexpr std::uint64_t block_bytes = 4096;
  static constexpr std::uint64_t header_bytes = 32;
  static constexpr std::uint64_t default_segment_bytes = 4ull << 20;
  // A segment holds room for this many records of the latest record's size...
  static constexpr std::uint64_t records_ahead = 64;
  // ... but is at least this long (when segment_bytes allows it) ...
  static constexpr std::uint64_t min_segment_bytes = 64 * 1024;
  // ... and takes at most this share (1/n) of the free space of its file system.
  static constexpr std::uint64_t free_space_share = 8;

  struct record {
    checkpoint_id id = 0;
    std::string metadata;
  };
  struct scanned {
    std::vector<record> records;  // in log order (oldest segment first)
    // A segment that could not be read, or a damaged record followed by whole ones (a torn
    // last append is expected after a crash and not reported).
    std::vector<std::string> warnings;
  };
  // Every whole record in job_dir's segments. A missing job_dir is an empty result.
  static scanned scan(const std::filesystem::path& job_dir);
  // The newest whole record of `id` in job_dir's segments.
  static std::optional<std::string> find(const std::filesystem::path& job_dir, checkpoint_id id);
  // "_checkpoints-<n>.log" -> n.
  static std::optional<std::uint64_t> segment_number(std::string_view file_name);

  // Opens nothing yet: the first append looks at the segments there (an earlier run's are
  // counted towards `keep` and removed like this log's own) and starts a new one.
  explicit metadata_log(std::filesystem::path job_dir, std::size_t keep = 1,
                        std::uint64_t segment_bytes = default_segment_bytes);
  metadata_log(const metadata_log&) = delete;
  metadata_log& operator=(const metadata_log&) = delete;

  // Durable once it returns success.
  result<void> append(checkpoint_id id, std::string_view metadata);
  // Ahead of appends (at a checkpoint's preparation): opens a segment, or a new one when the
  // open one has less than `headroom` bytes left, so that an append rarely has to make one.
  // 0: room for two records of the latest record's size (two blocks before any record).
  result<void> prepare(std::uint64_t headroom = 0);
  // Whether an append of that much metadata would go into the open segment: otherwise it
  // first makes a segment (up to 4 MiB written and fsynced, and at the first append the earlier
  // segments read), which the coordinator keeps off its event thread.
  bool has_room(std::uint64_t metadata_bytes) const;

  // Removes every segment in the folder (the checkpoints it made durable are durable on their
  // own now, or gone). A later append starts a new segment.
  result<void> remove();
  // From now on every append and prepare fails (the job ended: a metadata write still on its
  // way must not leave a new segment behind); with `remove_segments`, remove() too.
  result<void> close(bool remove_segments = true);

  // The segments this log knows (its own and an earlier run's it found), oldest first.
  std::vector<std::filesystem::path> segments() const;

  // A test seam for a full disk: when set, the log sees `reported_free` bytes free on its file
  // system, and making a segment longer than `writable` bytes fails as a full disk would
  // (ENOSPC while writing its zeros). Unset (the default) the real file system answers.
  struct space_limit {
    std::uint64_t reported_free = 0;
    std::uint64_t writable = 0;
  };
  void simulate_space(std::optional<space_limit> limit);

 private:
  struct segment {
    std::filesystem::path path;
    std::size_t records = 0;
  };
  result<void> look_up_segments();
  // A segment with room for at least `min_bytes` (a record's whole blocks), sized as above;
  // `id` names the checkpoint in an out-of-space error (0: made ahead of any).
  result<void> start_segment(std::uint64_t min_bytes, checkpoint_id id);
  // One attempt at a segment of exactly `size` bytes; `out_of_space` is set when the disk was
  // full.
  result<void> make_segment(std::uint64_t size, bool& out_of_space);
  std::uint64_t wanted_segment_bytes(std::uint64_t min_bytes) const;
  void drop_old_segments();

  const std::filesystem::path job_dir_;
  const std::size_t keep_;
  const std::uint64_t segment_bytes_;
  mutable std::mutex mutex_;
  bool looked_up_ = false;
  bool closed_ = false;
  std::uint64_t next_number_ = 1;
  std::deque<segment> segments_;  // oldest first; the last is open while fd_ is
  posix_io::fd_guard fd_;
  std::uint64_t size_ = 0;    // of the open segment
  std::uint64_t offset_ = 0;  // where the next record goes in it
  // The latest record's whole blocks (or, before any, the room prepare() asked for).
  std::uint64_t recent_record_bytes_ = 0;
  std::optional<space_limit> space_limit_;
};

}  // namespace snapflow
