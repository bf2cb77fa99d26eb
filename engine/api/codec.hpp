#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
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

namespace codec_detail {
// msgpack's packer writes here, straight into the string (msgpack::sbuffer would reserve 8 KiB
// per value and then be copied).
struct string_writer {
  std::string& out;
  void write(const char* data, std::size_t size) { out.append(data, size); }
};
}  // namespace codec_detail

// msgpack bytes of `value`: T needs a msgpack adaptor (MSGPACK_DEFINE, MSGPACK_DEFINE_MAP or the
// user's own).
template <typename T>
std::string encode(const T& value) {
  std::string out;
  codec_detail::string_writer writer{out};
  msgpack::pack(writer, value);
  return out;
}

// One msgpack value spanning all of `bytes`, unpacked into `zone` with limits sized to `bytes`
// (a forged length cannot make the unpacker reserve more than the input could hold). Never
// throws.
result<msgpack::object> unpack_bounded(msgpack::zone& zone, std::string_view bytes);

namespace codec_detail {
// The zone decode() unpacks into: one per thread, emptied after each value, so that a decode
// allocates nothing for the unpacked object once the zone has grown to the values it sees. A
// decode inside another (a user adaptor that decodes) takes a zone of its own.
class scratch_zone {
 public:
  scratch_zone() : zone_(depth_++ == 0 ? shared() : own_.emplace()) {}
  ~scratch_zone() {
    zone_.clear();
    --depth_;
  }
  scratch_zone(const scratch_zone&) = delete;
  scratch_zone& operator=(const scratch_zone&) = delete;
  msgpack::zone& get() { return zone_; }

 private:
  static msgpack::zone& shared() {
    thread_local msgpack::zone zone;
    return zone;
  }
  static inline thread_local int depth_ = 0;
  std::optional<msgpack::zone> own_;
  msgpack::zone& zone_;
};
}  // namespace codec_detail

// The T that `bytes` hold, or why not (malformed, truncated, trailing bytes, another type).
template <typename T>
result<T> decode(std::string_view bytes) {
  codec_detail::scratch_zone zone;
  auto object = unpack_bounded(zone.get(), bytes);
  if (!object) return object.err();
  try {
    return object->template as<T>();
  } catch (const std::exception& e) {
    return error{std::string("msgpack value is not of the expected type (") + e.what() + ")"};
  }
}

// decode(), throwing decode_error that says what was decoded and why it failed. `what` is a
// string or a callable that makes one: only a failure pays for the text.
template <typename T, typename What>
T decode_or_throw(std::string_view bytes, const What& what) {
  auto decoded = decode<T>(bytes);
  if (!decoded) {
    std::string named;
    if constexpr (std::is_invocable_v<const What&>)
      named = what();
    else
      named = std::string(std::string_view(what));
    throw decode_error("cannot decode " + named + " (" + std::to_string(bytes.size()) +
                       " bytes): " + decoded.err().message);
  }
  return std::move(decoded).value();
}

// The T a record's payload holds, for operator `op`; decode_error naming both otherwise.
template <typename T>
T decode_payload(const record& r, std::string_view op) {
  return decode_or_throw<T>(r.payload, [&] {
    return "the payload of record " + std::to_string(r.seq) + " entering '" + std::string(op) + "'";
  });
}

}  // namespace snapflow::api
