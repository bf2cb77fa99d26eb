#pragma once

// State files built by hand, byte by byte, in any format version (docs/protocol.md, section 9):
// for tests of what the reader accepts and refuses that the encoder would never write.

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"

namespace snapflow::runtime_test {

struct hand_state_file {
  std::string body;

  // Little-endian, as every integer of the format.
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) body.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    body.append(s);
  }
  // The head every version shares: uid "h", subtask `subtask` of `parallelism`, checkpoint 9,
  // operator state {"o": "p"}, max parallelism 16.
  void head(std::uint32_t subtask = 0, std::uint32_t parallelism = 1) {
    str("h");
    u32(subtask);
    u32(parallelism);
    u64(9);
    u32(1);
    str("o");
    str("p");
    u32(16);
  }
  // The whole file: magic | version | [u64 body length] | body | CRC-32C of all before.
  std::string file(std::uint32_t version, bool body_length) const {
    hand_state_file out;
    out.body = std::string(state_file::magic);
    out.u32(version);
    if (body_length) out.u64(body.size());
    out.body += body;
    out.u32(crc32c(out.body));
    return out.body;
  }
};

}  // namespace snapflow::runtime_test
