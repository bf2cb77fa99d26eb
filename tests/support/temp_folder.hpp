#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace snapflow::testing {

// A fresh folder of our own (mkdtemp: nobody else's, even with parallel test processes),
// removed with everything in it when this goes. The one temporary-folder type of the tests and
// benchmarks; `prefix` names the folder after its user, `parent` defaults to the system's
// temporary directory.
class temp_folder {
 public:
  explicit temp_folder(const std::string& prefix = "snapflow",
                       const std::filesystem::path& parent = std::filesystem::temp_directory_path()) {
    std::string pattern = (parent / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(),
                              "cannot create a temporary folder under " + parent.string());
    path_ = pattern;
  }
  ~temp_folder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace snapflow::testing
