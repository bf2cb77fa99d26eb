#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>

#include "engine/runtime/channel_factory.hpp"
#include "engine/runtime/stream_element.hpp"
#include "transport/decode_error.hpp"
#include "transport/frame_limits.hpp"

// The frames of the data plane between workers (docs/protocol.md, "Data plane"): one ZeroMQ
// frame each, a msgpack map {"v": version, "t": "data" | "credit", ...}. Element batches go from
// a producer's DEALER to the consumer worker's ROUTER; credits come back on the same connection.
namespace snapflow::data {

inline constexpr std::uint32_t data_protocol_version = 1;

// The most elements one data frame may carry (docs/protocol.md, "Data plane"). A decoded element
// takes tens of bytes in memory and can take 2 on the wire, so without a bound a frame within
// the size limit could decode into 30 times its size; with it, a frame's elements take at most
// about 1 MiB beyond its own bytes. Senders split longer batches (workers batch 256).
inline constexpr std::size_t max_elements_per_frame = 16'384;

// The most priority batches (data_frame::priority) a consumer keeps per channel, waiting for
// its task (docs/protocol.md, "Data plane"): more than the checkpoints that can be in flight,
// and a bound on what a producer can queue without credit. Beyond it they are refused.
inline constexpr std::size_t max_priority_batches = 16;

// One batch of elements on one channel. `seq` counts the channel's batches from 0, so the
// consumer notices a batch that went missing.
//
// `priority` (output_channel::send_priority): the batch is exactly one checkpoint barrier that
// goes ahead of the credit: it takes none and returns none, and it takes no sequence number of
// its own: its `seq` is that of the next batch without priority, which it does not advance.
struct data_frame {
  channel_key key;
  std::uint64_t seq = 0;
  element_batch elements;
  bool priority = false;

  bool operator==(const data_frame&) const = default;
};

// Consumer -> producer: the consumer has taken `consumed` batches of this channel in all.
// Cumulative, so a duplicate or a resend is harmless; the producer may have at most
// (its capacity) batches sent and not yet consumed.
//
// `max_bytes` (buffer debloating, input_channel::announce_in_flight_bytes): the most bytes of
// records the consumer wants in flight on the channel from now on; the producer takes the
// smaller of it and its own configured bound. 0 (and absent on the wire): none asked.
struct credit_frame {
  channel_key key;
  std::uint64_t consumed = 0;
  std::uint64_t max_bytes = 0;

  bool operator==(const credit_frame&) const = default;
};

using data_message = std::variant<data_frame, credit_frame>;

std::ostream& operator<<(std::ostream& os, const data_frame& f);
std::ostream& operator<<(std::ostream& os, const credit_frame& f);

class [[nodiscard]] data_decode_result {
 public:
  data_decode_result(data_message value) : data_(std::move(value)) {}
  data_decode_result(wire::decode_error error) : data_(std::move(error)) {}

  bool ok() const { return data_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const data_message& value() const& { return std::get<0>(data_); }
  data_message&& value() && { return std::get<0>(std::move(data_)); }
  const wire::decode_error& error() const { return std::get<1>(data_); }

 private:
  std::variant<data_message, wire::decode_error> data_;
};

std::string encode(const data_frame& f);
// The same bytes as encode(data_frame{key, seq, elements, priority}), without moving the
// elements in. A frame without priority is written without the "pri" key.
std::string encode_data_frame(const channel_key& key, std::uint64_t seq,
                              const element_batch& elements, bool priority = false);
std::string encode(const credit_frame& f);

// Reads one frame from an untrusted peer: never throws, refuses declared lengths above
// `max_frame_bytes` before allocating, and checks every field's type and range (a priority
// frame must hold exactly one barrier).
data_decode_result decode_data_frame(
    std::string_view frame,
    std::size_t max_frame_bytes = transport::default_max_frame_bytes) noexcept;

}  // namespace snapflow::data
