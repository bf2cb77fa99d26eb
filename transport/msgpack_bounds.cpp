#include "transport/msgpack_bounds.hpp"

#include <cstdint>
#include <string>
#include <array>
#include <vector>

namespace snapflow::wire {

namespace {

// What a big-endian length after the first byte counts.
enum class length_kind : std::uint8_t { none, payload, ext_payload, array, map };

// What one header says comes after it.
struct header {
  std::uint64_t payload_bytes = 0;  // raw bytes to skip (numbers, strings, bins, exts)
  std::uint64_t elements = 0;       // values that follow (arrays: n, maps: 2n)
  bool container = false;
  std::size_t length_bytes = 0;  // size of the length that follows the first byte
  length_kind kind = length_kind::none;
};

// Splits the first byte of a value into what follows it. False for 0xc1, which msgpack never
// uses.
bool classify(std::uint8_t b, header& h) {
  if (b <= 0x7f || b >= 0xe0) return true;  // positive / negative fixint
  if (b <= 0x8f) {
    h.container = true;
    h.elements = 2 * std::uint64_t{b & 0x0fu};
    return true;
  }
  if (b <= 0x9f) {
    h.container = true;
    h.elements = b & 0x0fu;
    return true;
  }
  if (b <= 0xbf) {
    h.payload_bytes = b & 0x1fu;
    return true;
  }
  switch (b) {
    case 0xc0:  // nil
    case 0xc2:  // false
    case 0xc3:  // true
      return true;
    case 0xc1:
      return false;
    case 0xc4:  // bin 8/16/32
    case 0xd9:  // str 8
      h.length_bytes = 1;
      h.kind = length_kind::payload;
      return true;
    case 0xc5:
    case 0xda:
      h.length_bytes = 2;
      h.kind = length_kind::payload;
      return true;
    case 0xc6:
    case 0xdb:
      h.length_bytes = 4;
      h.kind = length_kind::payload;
      return true;
    case 0xc7:  // ext 8/16/32: the length counts the data, a type byte comes first
      h.length_bytes = 1;
      h.kind = length_kind::ext_payload;
      return true;
    case 0xc8:
      h.length_bytes = 2;
      h.kind = length_kind::ext_payload;
      return true;
    case 0xc9:
      h.length_bytes = 4;
      h.kind = length_kind::ext_payload;
      return true;
    case 0xca:  // float 32
      h.payload_bytes = 4;
      return true;
    case 0xcb:  // float 64
      h.payload_bytes = 8;
      return true;
    case 0xcc:  // uint 8..64, int 8..64
    case 0xd0:
      h.payload_bytes = 1;
      return true;
    case 0xcd:
    case 0xd1:
      h.payload_bytes = 2;
      return true;
    case 0xce:
    case 0xd2:
      h.payload_bytes = 4;
      return true;
    case 0xcf:
    case 0xd3:
      h.payload_bytes = 8;
      return true;
    case 0xd4:  // fixext 1/2/4/8/16, plus the type byte
      h.payload_bytes = 2;
      return true;
    case 0xd5:
      h.payload_bytes = 3;
      return true;
    case 0xd6:
      h.payload_bytes = 5;
      return true;
    case 0xd7:
      h.payload_bytes = 9;
      return true;
    case 0xd8:
      h.payload_bytes = 17;
      return true;
    case 0xdc:  // array 16/32
      h.container = true;
      h.length_bytes = 2;
      h.kind = length_kind::array;
      return true;
    case 0xdd:
      h.container = true;
      h.length_bytes = 4;
      h.kind = length_kind::array;
      return true;
    case 0xde:  // map 16/32
      h.container = true;
      h.length_bytes = 2;
      h.kind = length_kind::map;
      return true;
    case 0xdf:
      h.container = true;
      h.length_bytes = 4;
      h.kind = length_kind::map;
      return true;
    default:
      return false;  // unreachable: every byte value is covered above
  }
}

// A stack of element counts that lives inline up to a depth every message fits, and on the
// heap only beyond it.
class open_containers {
 public:
  explicit open_containers(std::size_t max_depth) {
    if (max_depth > inline_depth) heap_.resize(max_depth);
  }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  void push_back(std::uint64_t elements) { data()[size_++] = elements; }
  std::uint64_t& back() { return data()[size_ - 1]; }
  void pop_back() { --size_; }

 private:
  static constexpr std::size_t inline_depth = 32;
  std::uint64_t* data() { return heap_.empty() ? inline_.data() : heap_.data(); }
  std::array<std::uint64_t, inline_depth> inline_;
  std::vector<std::uint64_t> heap_;
  std::size_t size_ = 0;
};

decode_error make(decode_errc code, std::string detail) { return {code, std::move(detail), 0}; }

std::string at(std::size_t offset) { return " at byte " + std::to_string(offset); }

}  // namespace

std::optional<decode_error> check_msgpack_bounds(std::string_view frame,
                                                 std::size_t max_frame_bytes,
                                                 std::size_t max_depth) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(frame.data());
  const std::uint64_t size = frame.size();
  if (size > max_frame_bytes)
    return make(decode_errc::frame_too_large, "a frame of " + std::to_string(size) +
                                                  " bytes is over the " +
                                                  std::to_string(max_frame_bytes) +
                                                  "-byte frame limit");
  std::uint64_t pos = 0;
  // Values still to read in each open container, innermost last; at most max_depth entries,
  // which every caller's depth fits inline (no allocation per frame).
  open_containers open(max_depth);

  for (;;) {
    if (pos >= size)
      return make(decode_errc::truncated, frame.empty() ? "empty frame" : "frame ends" + at(pos));
    const std::uint64_t start = pos;
    const std::uint8_t first = bytes[pos++];
    header h;
    if (!classify(first, h))
      return make(decode_errc::not_msgpack, "reserved byte 0xc1" + at(start));

    if (h.length_bytes > 0) {
      if (h.length_bytes > size - pos)
        return make(decode_errc::truncated, "frame ends in a length" + at(start));
      std::uint64_t length = 0;
      for (std::size_t i = 0; i < h.length_bytes; ++i) length = (length << 8) | bytes[pos++];
      switch (h.kind) {
        case length_kind::none:
          break;
        case length_kind::payload:
          h.payload_bytes = length;
          break;
        case length_kind::ext_payload:
          h.payload_bytes = length + 1;  // the type byte
          break;
        case length_kind::array:
          h.elements = length;
          break;
        case length_kind::map:
          h.elements = 2 * length;
          break;
      }
    }

    // A declared size no acceptable frame could hold is a lie, whatever follows; one that
    // merely runs past the end of this frame means the frame was cut short.
    const std::uint64_t declared = h.container ? h.elements : h.payload_bytes;
    const char* unit = h.container ? " elements" : " bytes";
    if (declared > max_frame_bytes)
      return make(decode_errc::too_large_declared_length,
                  "declares " + std::to_string(declared) + unit + ", above the " +
                      std::to_string(max_frame_bytes) + "-byte frame limit" + at(start));
    if (declared > size - pos)
      return make(decode_errc::truncated, "declares " + std::to_string(declared) + unit +
                                              ", frame has " + std::to_string(size - pos) +
                                              " left" + at(start));

    if (h.container) {
      if (open.size() + 1 > max_depth)
        return make(decode_errc::too_deep,
                    "nesting deeper than " + std::to_string(max_depth) + at(start));
      if (h.elements > 0) {
        open.push_back(h.elements);
        continue;
      }
    } else {
      pos += h.payload_bytes;
    }

    // One value is complete: it may complete its container, and that one its own, and so on.
    while (!open.empty() && --open.back() == 0) open.pop_back();
    if (open.empty()) break;
  }

  if (pos != size)
    return make(decode_errc::not_msgpack,
                std::to_string(size - pos) + " bytes after the envelope" + at(pos));
  return std::nullopt;
}

}  // namespace snapflow::wire
