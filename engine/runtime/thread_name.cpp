#include "engine/runtime/thread_name.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>

namespace snapflow {

void name_this_thread(std::string_view name) {
  std::array<char, 16> buffer{};  // 15 bytes and the terminator: the kernel's limit
  const std::size_t n = std::min(name.size(), buffer.size() - 1);
  std::copy_n(name.begin(), n, buffer.begin());
  (void)::pthread_setname_np(::pthread_self(), buffer.data());
}

}  // namespace snapflow
