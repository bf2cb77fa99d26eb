#include "transport/peer_names.hpp"

#include <algorithm>

namespace snapflow::transport {

namespace {
constexpr std::size_t max_text_chars = 64;
constexpr std::size_t max_hex_bytes = 16;
}  // namespace

std::string printable_peer(std::string_view id) {
  const bool text = !id.empty() && id.size() <= max_text_chars &&
                    std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  if (text) return std::string(id);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = "0x";
  for (std::size_t i = 0; i < id.size() && i < max_hex_bytes; ++i) {
    const auto byte = static_cast<unsigned char>(id[i]);
    out += digits[byte >> 4];
    out += digits[byte & 0xf];
  }
  if (id.size() > max_hex_bytes) out += "...";
  return out;
}

}  // namespace snapflow::transport
