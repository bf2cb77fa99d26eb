#include "engine/checkpoint/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define SNAPFLOW_CRC32C_SSE42 1
#endif

namespace snapflow {

namespace {

// Reflected Castagnoli polynomial.
constexpr std::uint32_t polynomial = 0x82F63B78u;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of byte b followed by
// k zero bytes, which lets the loop fold eight input bytes per step.
using crc_tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr crc_tables make_tables() {
  crc_tables t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? polynomial : 0u);
    t[0][b] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::uint32_t b = 0; b < 256; ++b)
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}

constexpr crc_tables tables = make_tables();

static_assert(tables[0][1] == 0xF26B8303u, "CRC-32C table");

// Both loops work on the running register value (seed inverted, inverted again at the end).
std::uint32_t update_portable(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  while (n >= 8) {
    // Byte-wise loads keep this independent of alignment and endianness.
    const std::uint32_t lo = crc ^ (std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 |
                                    std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24);
    crc = tables[7][lo & 0xFFu] ^ tables[6][(lo >> 8) & 0xFFu] ^ tables[5][(lo >> 16) & 0xFFu] ^
          tables[4][lo >> 24] ^ tables[3][p[4]] ^ tables[2][p[5]] ^ tables[1][p[6]] ^
          tables[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    crc = (crc >> 8) ^ tables[0][(crc ^ *p) & 0xFFu];
    ++p;
    --n;
  }
  return crc;
}

#ifdef SNAPFLOW_CRC32C_SSE42
// SSE4.2's crc32 instruction computes exactly this reflected Castagnoli CRC; x86 is little
// endian, so an 8-byte load feeds the bytes in stream order. Compiled for SSE4.2 on its own and
// only called after the run-time check, so the rest of the binary keeps the baseline ISA.
__attribute__((target("sse4.2"))) std::uint32_t update_sse42(std::uint32_t crc,
                                                            const unsigned char* p,
                                                            std::size_t n) {
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0) {
    crc = _mm_crc32_u8(crc, *p++);
    --n;
  }
  std::uint64_t wide = crc;
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
    p += 8;
    n -= 8;
  }
  crc = static_cast<std::uint32_t>(wide);
  while (n > 0) {
    crc = _mm_crc32_u8(crc, *p++);
    --n;
  }
  return crc;
}

bool cpu_has_sse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

}  // namespace

std::uint32_t crc32c(std::string_view data, std::uint32_t seed) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#ifdef SNAPFLOW_CRC32C_SSE42
  if (detail::crc32c_uses_hardware()) return ~update_sse42(~seed, p, data.size());
#endif
  return ~update_portable(~seed, p, data.size());
}

namespace detail {

std::uint32_t crc32c_portable(std::string_view data, std::uint32_t seed) {
  return ~update_portable(~seed, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

bool crc32c_uses_hardware() {
#ifdef SNAPFLOW_CRC32C_SSE42
  static const bool hardware = cpu_has_sse42();
  return hardware;
#else
  return false;
#endif
}

}  // namespace detail

}  // namespace snapflow
