#include "engine/runtime/keyed_operators.hpp"

#include <cassert>

namespace snapflow {

result<void> keyed_sum::open(const operator_context& context,
                             const std::vector<restored_operator_state>&) {
  assert(context.keyed_state != nullptr);
  state_ = context.keyed_state;
  return success();
}

result<void> keyed_sum::process(const record& r, record_output& out) {
  const std::int64_t sum = state_->value("sum").value_or(0) + r.value;
  state_->set_value("sum", sum);
  record copy = r;
  copy.value = sum;
  out.emit(std::move(copy));
  return success();
}

result<void> keyed_count::open(const operator_context& context,
                               const std::vector<restored_operator_state>&) {
  assert(context.keyed_state != nullptr);
  state_ = context.keyed_state;
  return success();
}

result<void> keyed_count::process(const record& r, record_output& out) {
  const std::int64_t count = state_->value("count").value_or(0) + 1;
  state_->set_value("count", count);
  record copy = r;
  copy.value = count;
  out.emit(std::move(copy));
  return success();
}

}  // namespace snapflow
