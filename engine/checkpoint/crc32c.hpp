#pragma once

#include <cstdint>
#include <string_view>

namespace snapflow {

// CRC-32C (Castagnoli), the checksum of metadata files, the id counter file and state files.
// `seed` is the CRC of the bytes before `data`, so a stream can be checksummed in pieces:
// crc32c(b, crc32c(a)) == crc32c(a + b). Software only (slicing-by-8): fast enough for
// metadata and state files, and the same result on every machine.
std::uint32_t crc32c(std::string_view data, std::uint32_t seed = 0);

}  // namespace snapflow
