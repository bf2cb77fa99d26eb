// state_file::decode (engine/runtime/state_file.hpp): a subtask's state file or inline state read
// back on restore, of any of the versions 1 to 4, possibly torn, corrupt or forged. It must
// never crash, throw or over-allocate; what it accepts must survive encode and decode unchanged.
//
// A mutated file almost never keeps a valid checksum, so each input is also decoded with its
// trailer (and, for versions 1 to 3, its body length) repaired: the body is then what reaches
// the body parser.
#include <string>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

constexpr std::size_t version_end = 12 + 4;  // magic, version
constexpr std::size_t trailer_bytes = 4;     // CRC-32C

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

void decode_and_round_trip(std::string_view bytes) {
  using snapflow::state_file;
  auto decoded = state_file::decode(bytes);
  if (!decoded) return;
  auto again = state_file::decode(state_file::encode(*decoded));
  snapflow::fuzz::check(again.ok(), "the encoding of a decoded state file does not decode");
  snapflow::fuzz::check(*again == *decoded, "encode and decode changed a state file");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = snapflow::fuzz::as_text(data, size);
  decode_and_round_trip(bytes);
  if (bytes.size() < version_end + trailer_bytes) return 0;
  std::string repaired(bytes.substr(0, bytes.size() - trailer_bytes));
  // Versions 1 to 3: the body length after the version word, made to match.
  const auto version = static_cast<unsigned char>(repaired[12]);
  if (version >= 1 && version <= 3 && repaired.size() >= version_end + 8) {
    std::string length;
    put_le(length, repaired.size() - version_end - 8, 8);
    repaired.replace(version_end, 8, length);
  }
  put_le(repaired, snapflow::crc32c(repaired), 4);
  decode_and_round_trip(repaired);
  return 0;
}
