#pragma once

#include <cstdint>
#include <string_view>

namespace snapflow {

// CRC-32C (Castagnoli), the checksum of metadata files, the id counter file and state files.
// `seed` is the CRC of the bytes before `data`, so a stream can be checksummed in pieces:
// crc32c(b, crc32c(a)) == crc32c(a + b). Uses the CPU's CRC32 instruction where there is one
// (x86-64 with SSE4.2, checked at run time: about 5x the software speed, which matters for
// state files of many MiB), else slicing-by-8 tables; both give the same result everywhere.
std::uint32_t crc32c(std::string_view data, std::uint32_t seed = 0);

namespace detail {
// The table implementation alone, whatever the CPU has: for tests that compare the two.
std::uint32_t crc32c_portable(std::string_view data, std::uint32_t seed = 0);
// Whether crc32c() uses the CPU instruction on this machine.
bool crc32c_uses_hardware();
}  // namespace detail

}  // namespace snapflow
