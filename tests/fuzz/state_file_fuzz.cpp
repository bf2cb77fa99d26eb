// state_file::decode (engine/runtime/state_file.hpp) and the streaming reader under it
// (state_file_reader.hpp): a subtask's state file or inline state read back on restore, of any
// of the versions 1 to 4, possibly torn, corrupt or forged. It must never crash, throw or
// over-allocate; what it accepts must survive encode and decode unchanged, and the reader must
// hand a sink, in ascending order, exactly the key groups decode returns.
//
// A mutated file almost never keeps a valid checksum, so each input is also decoded with its
// trailer (and, for versions 1 to 3, its body length) repaired: the body is then what reaches
// the body parser.
#include <string>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_reader.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

constexpr std::size_t version_end = 12 + 4;  // magic, version
constexpr std::size_t trailer_bytes = 4;     // CRC-32C

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

// Counts the groups handed and checks their order, keeping nothing.
class order_sink final : public snapflow::keyed_group_sink {
 public:
  snapflow::result<void> key_group(std::uint32_t group, snapflow::key_group_state& state) override {
    snapflow::fuzz::check(groups == 0 || group > last, "the reader handed key groups out of order");
    last = group;
    ++groups;
    state = {};
    return snapflow::success();
  }
  std::uint32_t last = 0;
  std::size_t groups = 0;
};

void decode_and_round_trip(std::string_view bytes) {
  using snapflow::state_file;
  auto decoded = state_file::decode(bytes);
  order_sink sink;
  snapflow::state_file_reader reader(bytes);
  auto streamed = reader.read(sink);
  snapflow::fuzz::check(streamed.ok() == decoded.ok(), "the reader and decode disagree");
  if (!decoded) return;
  snapflow::fuzz::check(sink.groups == decoded->keyed.key_groups.size(),
                        "the reader handed other key groups than decode returns");
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
