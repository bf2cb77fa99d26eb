// checkpoint_storage::decode_metadata (engine/checkpoint/checkpoint_storage.hpp): a _metadata
// file read back on restore, possibly torn or corrupt. It must never crash, throw or
// over-allocate; what it accepts must survive encode and decode unchanged.
//
// A mutated file almost never keeps a valid checksum, so each input is also decoded with its
// header and checksum repaired: the bytes between them are then taken as the msgpack body,
// which is what reaches the body parser.
#include <string>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

constexpr std::size_t header_bytes = 12 + 4 + 8;  // magic, version, body length
constexpr std::size_t trailer_bytes = 4;          // CRC-32C

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

void decode_and_round_trip(std::string_view bytes) {
  using snapflow::checkpoint_storage;
  auto decoded = checkpoint_storage::decode_metadata(bytes);
  if (!decoded) return;
  auto again = checkpoint_storage::decode_metadata(checkpoint_storage::encode_metadata(*decoded));
  snapflow::fuzz::check(again.ok(), "the encoding of decoded metadata does not decode");
  snapflow::fuzz::check(*again == *decoded, "encode and decode changed checkpoint metadata");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using snapflow::checkpoint_storage;
  const std::string_view bytes = snapflow::fuzz::as_text(data, size);
  decode_and_round_trip(bytes);
  if (bytes.size() < header_bytes + trailer_bytes) return 0;
  const std::string_view body =
      bytes.substr(header_bytes, bytes.size() - header_bytes - trailer_bytes);
  std::string repaired(checkpoint_storage::metadata_magic);
  put_le(repaired, checkpoint_storage::metadata_version, 4);
  put_le(repaired, body.size(), 8);
  repaired.append(body);
  put_le(repaired, snapflow::crc32c(repaired), 4);
  decode_and_round_trip(repaired);
  return 0;
}
