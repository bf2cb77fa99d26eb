#pragma once

#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "graph/record.hpp"

namespace snapflow::api {

// Where a typed flat_map or process function puts its outputs. Each output record keeps the
// input record's key, seq and value (the metadata the runtime partitions and checks by) and
// carries the output value msgpack-encoded in its payload.
template <typename O>
class collector {
 public:
  collector(std::vector<record>& out, const record& input) : out_(out), input_(input) {}

  void collect(const O& value) {
    out_.push_back(record{input_.key, input_.seq, input_.value, encode(value)});
  }

 private:
  std::vector<record>& out_;
  const record& input_;
};

}  // namespace snapflow::api
