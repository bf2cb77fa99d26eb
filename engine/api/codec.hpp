#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <msgpack.hpp>

#include "common/result.hpp"
#include "graph/record.hpp"

namespace snapflow::api {

// A payload (or a typed state entry) that does not hold a value of the expected type. Thrown
// inside the callables the typed layer hands to the runtime, which turn it into the task's
// failure (engine/runtime/user_operators.hpp): the bytes come from outside, so a bad one is an
// error to report, never a crash.
class decode_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Containers nest at most this deep in a typed value: deeper input is refused before it is
// converted (a recursion the converters would otherwise follow).
inline constexpr std::size_t max_value_depth = 32;

// msgpack bytes of `value`: T needs a msgpack adaptor (MSGPACK_DEFINE_MAP or the user's own).
template <typename T>
std::string encode(const T& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return std::string(buffer.data(), buffer.size());
}

// One msgpack value spanning all of `bytes`, unpacked with limits sized to `bytes` (a forged
// length cannot make the unpacker reserve more than the input could hold). Never throws.
result<msgpack::object_handle> unpack_bounded(std::string_view bytes);

// The T that `bytes` hold, or why not (malformed, truncated, trailing bytes, another type).
template <typename T>
result<T> decode(std::string_view bytes) {
  auto handle = unpack_bounded(bytes);
  if (!handle) return handle.err();
  try {
    return handle->get().template as<T>();
  } catch (const std::exception& e) {
    return error{std::string("msgpack value is not of the expected type (") + e.what() + ")"};
  }
}

// decode(), throwing decode_error that says what was decoded (`what`) and why it failed.
template <typename T>
T decode_or_throw(std::string_view bytes, std::string_view what) {
  auto decoded = decode<T>(bytes);
  if (!decoded)
    throw decode_error("cannot decode " + std::string(what) + " (" +
                       std::to_string(bytes.size()) + " bytes): " + decoded.err().message);
  return std::move(decoded).value();
}

// The T a record's payload holds, for operator `op`; decode_error naming both otherwise.
template <typename T>
T decode_payload(const record& r, std::string_view op) {
  return decode_or_throw<T>(r.payload, "the payload of record " + std::to_string(r.seq) +
                                           " entering '" + std::string(op) + "'");
}

}  // namespace snapflow::api
