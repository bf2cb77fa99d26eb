#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>

namespace snapflow::testing {

// A fresh folder under the system's temporary directory, removed with everything in it at the
// end of the test. The name carries the process id, a counter and the time, so parallel test
// processes never share one.
class temp_folder {
 public:
  temp_folder() {
    static std::atomic<int> counter{0};
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("snapflow-checkpoint-parts-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++) + "-" + std::to_string(now));
    std::filesystem::create_directories(path_);
  }
  ~temp_folder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace snapflow::testing
