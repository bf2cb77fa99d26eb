#pragma once

#include <filesystem>
#include <string_view>

namespace snapflow {

// A folder for a process's local working files (a rocksdb backend's instances), named uniquely
// under the system's temporary folder and removed with everything in it when this is destroyed.
// Nothing is created until someone writes under path().
class scratch_folder {
 public:
  // <temp>/<prefix>-<pid>-<n>, n counting the scratch folders this process made.
  explicit scratch_folder(std::string_view prefix);
  ~scratch_folder();
  scratch_folder(const scratch_folder&) = delete;
  scratch_folder& operator=(const scratch_folder&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace snapflow
