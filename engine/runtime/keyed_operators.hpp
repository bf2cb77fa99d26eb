#pragma once

#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The built-in keyed aggregations. Their state lives in the task's keyed_state_backend (value
// state "sum" / "count" of the current key), so it is snapshotted and redistributed by key
// group with everything else.

// Running sum of record.value per key; emits the input record with value = the new sum.
class keyed_sum final : public stream_operator {
 public:
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;

 private:
  keyed_state_backend* state_ = nullptr;
};

// Running count of records per key; emits the input record with value = the new count.
class keyed_count final : public stream_operator {
 public:
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;

 private:
  keyed_state_backend* state_ = nullptr;
};

}  // namespace snapflow
