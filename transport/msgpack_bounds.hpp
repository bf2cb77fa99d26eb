#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "transport/decode_error.hpp"

namespace snapflow::wire {

// Walks the headers of the one msgpack value that must fill `frame` exactly, without
// allocating or copying, and says what is wrong with it, if anything:
//  - a reserved byte (0xc1), or bytes after the value: not_msgpack;
//  - a frame longer than `max_frame_bytes`: frame_too_large (ZeroMQ delivers frames up to
//    frame_ceiling_bytes so that an oversized one is counted and refused here);
//  - a length or element count above `max_frame_bytes` (each element takes at least one byte,
//    so no acceptable frame could hold it: a lie, not an accident): too_large_declared_length;
//  - a frame that ends inside a value, or a declared size that runs past its end: truncated;
//  - containers nested deeper than `max_depth`: too_deep.
//
// It runs before anything is read, so that a hostile length is refused by what it declares,
// before any allocation, and so that each fault gets a precise error kind. It is the only
// fence: the envelope's reader (msgpack_view.hpp) trusts every length and count it passed and
// reads without checks of its own, so the two must agree on every format's size.
std::optional<decode_error> check_msgpack_bounds(std::string_view frame,
                                                 std::size_t max_frame_bytes,
                                                 std::size_t max_depth);

}  // namespace snapflow::wire
