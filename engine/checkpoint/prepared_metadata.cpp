#include "engine/checkpoint/prepared_metadata.hpp"

#include <unistd.h>

#include <cassert>
#include <utility>

namespace snapflow {

prepared_metadata::prepared_metadata(std::filesystem::path folder, int fd, bool logged)
    : folder_(std::move(folder)), fd_(fd), logged_(logged) {
  assert(fd_ >= 0);
  assert(!folder_.empty());
}

prepared_metadata::~prepared_metadata() { close(); }

prepared_metadata::prepared_metadata(prepared_metadata&& other) noexcept
    : folder_(std::move(other.folder_)),
      fd_(std::exchange(other.fd_, -1)),
      logged_(other.logged_) {}

prepared_metadata& prepared_metadata::operator=(prepared_metadata&& other) noexcept {
  if (this != &other) {
    close();
    folder_ = std::move(other.folder_);
    fd_ = std::exchange(other.fd_, -1);
    logged_ = other.logged_;
  }
  return *this;
}

int prepared_metadata::release() { return std::exchange(fd_, -1); }

void prepared_metadata::close() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

}  // namespace snapflow
