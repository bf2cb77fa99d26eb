#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Hands out checkpoint ids: the first is 1, and no id is ever handed out twice, across
// restarts too (a reused id would let a stale ack or state file pass for a new checkpoint's).
class checkpoint_id_counter {
 public:
  virtual ~checkpoint_id_counter() = default;

  // May do disk I/O: call it off the coordinator thread unless next_is_cheap().
  virtual result<checkpoint_id> get_and_increment() = 0;
  // True when the next get_and_increment needs no disk I/O.
  virtual bool next_is_cheap() const = 0;
  virtual checkpoint_id peek_next() const = 0;
  // Every later id is >= next (restoring past a savepoint's id); never moves back.
  virtual result<void> advance_to(checkpoint_id next) = 0;
};

// For tests and jobs without durable state. Thread-safe.
class in_memory_checkpoint_id_counter final : public checkpoint_id_counter {
 public:
  result<checkpoint_id> get_and_increment() override;
  bool next_is_cheap() const override { return true; }
  checkpoint_id peek_next() const override;
  result<void> advance_to(checkpoint_id next) override;

 private:
  mutable std::mutex mutex_;
  checkpoint_id next_ = 1;
};

// Persists a high-water mark in `<folder>/checkpoint_id_counter` and reserves ids in blocks, so
// most ids cost no disk I/O. The file holds the first id not yet reserved: every id handed out
// is below it, so a restarted counter resumes there (skipping at most one block of unused ids).
// Writes are durable (temp file, fsync, rename, fsync of the folder) and the file carries a
// CRC-32C: a corrupt file is an error, never a silent reset to 1. Thread-safe.
//
// File format (little-endian, 28 bytes): magic "SNAPFLOW-IDC", u32 format version (1),
// i64 next unreserved id, u32 CRC-32C of the preceding 24 bytes.
class file_checkpoint_id_counter final : public checkpoint_id_counter {
 public:
  static constexpr const char* file_name = "checkpoint_id_counter";

  // Reads the file if it exists (a corrupt one is an error); the folder is created, durably, by
  // the first write.
  static result<std::unique_ptr<file_checkpoint_id_counter>> open(std::filesystem::path folder,
                                                                  std::int64_t reserve_block = 64);

  result<checkpoint_id> get_and_increment() override;
  bool next_is_cheap() const override;
  checkpoint_id peek_next() const override;
  result<void> advance_to(checkpoint_id next) override;

  const std::filesystem::path& path() const { return path_; }
  // The first id not covered by the persisted reservation.
  checkpoint_id reserved_until() const;

  // The file's bytes for a given high-water mark, and back (exposed for tests).
  static std::string encode(checkpoint_id limit);
  static result<checkpoint_id> decode(std::string_view bytes);

 private:
  file_checkpoint_id_counter(std::filesystem::path path, std::int64_t reserve_block,
                             checkpoint_id next);
  result<void> persist_locked(checkpoint_id limit);

  const std::filesystem::path path_;
  const std::int64_t reserve_block_;
  mutable std::mutex mutex_;
  checkpoint_id next_;   // the id get_and_increment returns next
  checkpoint_id limit_;  // ids below this are durably reserved
};

}  // namespace snapflow
