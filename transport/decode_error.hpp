#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace snapflow::wire {

// Why a frame could not be turned into a message. Every one is the peer's fault (or an
// attacker's), never ours: the caller counts it, logs it rate-limited and carries on.
enum class decode_errc {
  not_msgpack = 1,            // a byte that starts no msgpack value, or bytes after the envelope
  truncated,                  // the frame ends inside a value, or before a declared length
  too_large_declared_length,  // a string/bin/array/map declares more than any frame may hold
  too_deep,                   // containers nested deeper than max_nesting_depth
  not_a_map,                  // the envelope is not a msgpack map
  missing_field,              // a required key is absent (or nil)
  wrong_type,                 // a key holds the wrong msgpack type
  invalid_value,              // right type, impossible value: out of range, unknown enum name
  unknown_type,               // "t" names no message this build knows
  unsupported_version,        // "v" is not a version this build speaks
  frame_too_large,            // the frame itself is over the frame size limit
};

std::string_view to_string(decode_errc code);
const std::error_category& decode_category();
std::error_code make_error_code(decode_errc code);

struct decode_error {
  decode_errc code = decode_errc::not_msgpack;
  std::string detail;         // what and where, e.g. "field 'attempt.vertex': expected uint"
  std::uint64_t version = 0;  // the frame's "v", when it was readable

  bool operator==(const decode_error&) const = default;
};

std::ostream& operator<<(std::ostream& os, decode_errc code);
std::ostream& operator<<(std::ostream& os, const decode_error& e);

}  // namespace snapflow::wire

template <>
struct std::is_error_code_enum<snapflow::wire::decode_errc> : std::true_type {};
