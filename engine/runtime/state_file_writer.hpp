#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/result.hpp"
#include "engine/checkpoint/completed_checkpoint.hpp"
#include "engine/runtime/state_file_encoder.hpp"
#include "engine/state/keyed_state_files.hpp"
#include "engine/state/keyed_snapshot_part.hpp"
#include "engine/state/keyed_state_snapshot.hpp"

namespace snapflow {

struct subtask_snapshot;

// Writes one state file as a stream: head(), key_group() for each key group in ascending order,
// finish(). The bytes go through a fixed buffer into `<file>.tmp`, the CRC-32C running over
// them; finish() fsyncs, renames over `file` and fsyncs the folder, as state_file::write always
// did. So a state of any size is written holding only the buffer (plus the one entry that
// overflows it) besides the key group the caller hands.
//
// With `inline_max` above 0, the bytes stay in memory until they pass it: a state that ends
// within it becomes an inline handle (no file), a larger one goes to the file from then on. The
// file is created only once the first bytes are due, so a writer whose state goes inline, or
// that is dropped, leaves nothing; one dropped after that removes its temporary file.
class state_file_writer final : public keyed_group_sink {
 public:
  static constexpr std::size_t default_buffer_bytes = std::size_t{1} << 20;

  struct written {
    state_handle handle;  // path: `file` as given; inline_bytes set when it went inline
    std::uint64_t key_groups = 0;
  };

  // `file` may be empty when only an inline state is possible: a state that outgrows
  // `inline_max` then fails (needs_location() says why).
  explicit state_file_writer(std::filesystem::path file,
                             std::size_t buffer_bytes = default_buffer_bytes,
                             std::size_t inline_max = 0);
  ~state_file_writer() override;
  state_file_writer(const state_file_writer&) = delete;
  state_file_writer& operator=(const state_file_writer&) = delete;

  result<void> head(const subtask_snapshot& s);
  result<void> key_group(std::uint32_t group, const key_group_state& state);
  // A deferred keyed snapshot streams into the writer (deferred_keyed_snapshot::write_to).
  result<void> key_group(std::uint32_t group, key_group_state& state) override {
    return key_group(group, static_cast<const key_group_state&>(state));
  }
  // A backend's key group written as it is walked.
  result<void> walked_key_group(std::uint32_t group, const key_group_walk& walk) override;
  result<written> finish(const std::optional<keyed_state_files>& files,
                         const std::vector<persisted_channel>& channels = {});

  // Key groups handed so far.
  std::uint64_t key_groups() const { return groups_; }
  // The most bytes the writer held at once (its buffer, before a flush).
  std::size_t peak_buffered_bytes() const { return encoder_.peak_buffered(); }
  // The state outgrew the inline limit and there was no file to write it to.
  bool needs_location() const { return needs_location_; }

 private:
  void flush(std::string_view bytes);
  result<void> open_file();
  result<void> status() const;
  result<void> next_group(std::uint32_t group);

  std::filesystem::path file_;
  std::filesystem::path tmp_;
  std::size_t buffer_bytes_;
  std::size_t inline_max_;
  state_file_encoder encoder_;
  int fd_ = -1;
  bool finishing_ = false;
  bool needs_location_ = false;
  std::optional<error> failed_;
  std::optional<std::string> inline_bytes_;
  std::optional<std::uint32_t> last_group_;
  std::uint64_t groups_ = 0;
};

}  // namespace snapflow
