#pragma once

#include <filesystem>

namespace snapflow {

// A checkpoint's `_metadata`, created empty with its folder before completion
// (checkpoint_storage::prepare_location) and held open for writing until the metadata goes into
// it (checkpoint_storage::write_metadata). Creating a file, allocating its first page and the
// folder's fsync are the dearest steps of a durable write, and every path lookup is slow on a
// coordinator thread that was just woken: done while the job waits for the checkpoint, what is
// left at completion is one write and one fsync on a descriptor.
//
// A checkpoint that ends otherwise just drops it: the destructor closes the file, and the
// discard of the folder removes it. An empty `_metadata` is never read as a checkpoint
// (checkpoint_storage::read_metadata refuses it).
class prepared_metadata {
 public:
  prepared_metadata() = default;
  // Takes ownership of `fd`, open for writing on `folder`/_metadata. `logged`: the job's
  // metadata log makes it durable, so neither the file nor its entry is synced
  // (checkpoint_storage::prepare_options).
  prepared_metadata(std::filesystem::path folder, int fd, bool logged);
  ~prepared_metadata();
  prepared_metadata(prepared_metadata&& other) noexcept;
  prepared_metadata& operator=(prepared_metadata&& other) noexcept;
  prepared_metadata(const prepared_metadata&) = delete;
  prepared_metadata& operator=(const prepared_metadata&) = delete;

  bool is_open() const { return fd_ >= 0; }
  const std::filesystem::path& folder() const { return folder_; }
  bool logged() const { return logged_; }
  // Hands the descriptor over (the caller closes it); leaves this closed.
  int release();

 private:
  void close();

  std::filesystem::path folder_;
  int fd_ = -1;
  bool logged_ = false;
};

}  // namespace snapflow
