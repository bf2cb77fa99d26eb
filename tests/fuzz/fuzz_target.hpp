#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

// The libFuzzer entry point every target here defines. fuzz_driver.cpp calls it with any
// compiler; with clang, -fsanitize=fuzzer links libFuzzer's own main instead.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace snapflow::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A property every input must keep (beyond not crashing). Aborting is how a fuzz target
// reports a finding: libFuzzer and the driver both keep the input that did it.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

}  // namespace snapflow::fuzz
