#pragma once

#include <cassert>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "transport/decode_error.hpp"
#include "transport/frame_limits.hpp"
#include "transport/messages.hpp"

// One message is one ZeroMQ frame: a msgpack map {"v": version, "t": type name, ...fields}.
// Fields are looked up by key, so unknown keys are skipped and optional fields may be absent;
// docs/protocol.md lists every key.
namespace snapflow::wire {

// Deeper than any message needs (5 today: the state handles in an acknowledge_checkpoint_batch),
// shallow enough that a hostile frame cannot make the decoder do much work before it is refused.
inline constexpr std::size_t max_nesting_depth = 32;

class [[nodiscard]] decode_result {
 public:
  decode_result(message value) : data_(std::move(value)) {}
  decode_result(decode_error error) : data_(std::move(error)) {}

  bool ok() const { return data_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const message& value() const& {
    assert(ok());
    return std::get<0>(data_);
  }
  message&& value() && {
    assert(ok());
    return std::get<0>(std::move(data_));
  }
  const decode_error& error() const {
    assert(!ok());
    return std::get<1>(data_);
  }

 private:
  std::variant<message, decode_error> data_;
};

// The frame for `m`, written with current_protocol_version.
std::string encode(const message& m);
// The same, written into `frame` (replacing what it held): a caller that keeps the string
// between messages reuses its room instead of allocating per frame. The overloads for the
// messages of every checkpoint (a trigger, an acknowledgement) need no message variant built.
void encode(const message& m, std::string& frame);
void encode(const trigger_checkpoint& m, std::string& frame);
void encode(const acknowledge_checkpoint& m, std::string& frame);

// Reads one frame from an untrusted peer. Never throws and never trusts a declared length:
// every fault is a decode_error (see decode_errc), including frames from a newer protocol
// version, which carry that version so the caller can say which one it met. A length above
// `max_frame_bytes` (the socket's limit) is called too large, one that merely overruns this
// frame is called truncated; either way nothing is allocated for it.
decode_result decode(std::string_view frame,
                     std::size_t max_frame_bytes = transport::default_max_frame_bytes) noexcept;

// The fast path of decode() for the messages of every checkpoint, into a struct the caller
// keeps (its strings keep their room, so reading allocates nothing): true with every field of
// `out` set when `frame` is a canonical frame of that type, what encode writes. False for any
// other frame, and then `out` holds nothing useful: decode() it, which reads every valid frame
// and names every fault. It does not apply a frame-size limit (decode's max_frame_bytes): a
// caller checks the frame against its own limit first, as the endpoints do. Throws only
// std::bad_alloc.
bool decode_canonical(std::string_view frame, trigger_checkpoint& out);
bool decode_canonical(std::string_view frame, acknowledge_checkpoint& out);

namespace detail {
// decode() without its fast path for canonical frames (envelope.cpp, canonical_reader): the
// general reader alone, which decode() falls back to. For the tests that check both agree.
decode_result decode_general(std::string_view frame,
                             std::size_t max_frame_bytes = transport::default_max_frame_bytes) noexcept;
// The fast path alone: the message when `frame` is canonical (what encode writes), else
// nothing. Throws only std::bad_alloc.
std::optional<message> decode_canonical(std::string_view frame);
}  // namespace detail

}  // namespace snapflow::wire
