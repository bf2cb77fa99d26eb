#include "engine/paths/scratch_folder.hpp"

#include <unistd.h>

#include <atomic>
#include <string>
#include <system_error>

namespace snapflow {

namespace {
std::atomic<unsigned> made{0};
}  // namespace

scratch_folder::scratch_folder(std::string_view prefix) {
  std::error_code ec;
  std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  if (ec) temp = "/tmp";
  path_ = temp / (std::string(prefix) + "-" + std::to_string(::getpid()) + "-" +
                  std::to_string(made.fetch_add(1)));
}

scratch_folder::~scratch_folder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace snapflow
