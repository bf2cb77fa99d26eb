#pragma once

#include <string>
#include <string_view>

#include "engine/api/codec.hpp"
#include "graph/record.hpp"

namespace snapflow::api {

// Which input of a two-input operator a record came through. The runtime's operators see one
// logical input, so connect() puts a one-byte tag before each side's payload on the way in.
enum class input_side : char { first = 0, second = 1 };

inline record tag_record(const record& r, input_side side) {
  return record{r.key, r.seq, r.value, static_cast<char>(side) + r.payload};
}

// The record without its tag, and its side; decode_error when it carries none (a record that
// did not come through connect()'s tagging operators).
struct tagged_record {
  input_side side;
  record inner;
};
inline tagged_record untag(const record& r, std::string_view op) {
  if (r.payload.empty() || (r.payload[0] != static_cast<char>(input_side::first) &&
                            r.payload[0] != static_cast<char>(input_side::second)))
    throw decode_error("record " + std::to_string(r.seq) + " entering '" + std::string(op) +
                       "' carries no input tag");
  return {static_cast<input_side>(r.payload[0]),
          record{r.key, r.seq, r.value, r.payload.substr(1)}};
}

}  // namespace snapflow::api
