#pragma once

#include <filesystem>

namespace snapflow {

// A checkpoint's `_metadata.tmp`, created with its folder at trigger time
// (checkpoint_storage::prepare_location) and held open for writing until the metadata goes into
// it (checkpoint_storage::write_metadata). Creating a file is the dearest step of the durable
// write on tmpfs and ext4 alike (a new inode and folder entry): done at trigger time, while the
// tasks work, it is off the path from the last acknowledgement to "complete".
//
// A checkpoint that ends otherwise just drops it: the destructor closes the file, and the
// discard of the folder removes it. An empty temp file is never mistaken for metadata (only
// `_metadata` is read, and only whole: checkpoint_storage::recover).
class prepared_metadata {
 public:
  prepared_metadata() = default;
  // Takes ownership of `fd`, open for writing on `folder`/_metadata.tmp.
  prepared_metadata(std::filesystem::path folder, int fd);
  ~prepared_metadata();
  prepared_metadata(prepared_metadata&& other) noexcept;
  prepared_metadata& operator=(prepared_metadata&& other) noexcept;
  prepared_metadata(const prepared_metadata&) = delete;
  prepared_metadata& operator=(const prepared_metadata&) = delete;

  bool is_open() const { return fd_ >= 0; }
  const std::filesystem::path& folder() const { return folder_; }
  // Hands the descriptor over (the caller closes it); leaves this closed.
  int release();

 private:
  void close();

  std::filesystem::path folder_;
  int fd_ = -1;
};

}  // namespace snapflow
