#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace snapflow {

// How keyed state holds an int64 (a sum, a count): 8 bytes, big-endian, so a backend that sorts
// values bytewise (none does today) would sort non-negative ones numerically. State values are
// bytes (typed state serialises on top); this is the encoding the built-in operators use.
inline std::string encode_int64_state(std::int64_t v) {
  std::string out(8, '\0');
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((u >> (8 * (7 - i))) & 0xFFu);
  return out;
}

// The int64 in `bytes`, or nothing when they are not 8 bytes long (a value of another type).
inline std::optional<std::int64_t> decode_int64_state(std::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  std::uint64_t u = 0;
  for (unsigned char c : bytes) u = (u << 8) | c;
  return static_cast<std::int64_t>(u);
}

}  // namespace snapflow
