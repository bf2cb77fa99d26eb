#include "engine/runtime/keyed_operators.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>

#include "engine/runtime/operator_factory.hpp"

namespace snapflow {

result<std::unique_ptr<stream_operator>> keyed_sum::create(const job_vertex& vertex) {
  auto bytes = int_param(vertex, "state_bytes", 0);
  if (!bytes) return bytes.err();
  if (*bytes < 0 || *bytes > max_state_bytes)
    return error{"parameter 'state_bytes' must be between 0 and " +
                 std::to_string(max_state_bytes) + " (got " + std::to_string(*bytes) + ")"};
  auto value_bytes = int_param(vertex, "value_bytes", 0);
  if (!value_bytes) return value_bytes.err();
  if (*value_bytes < 0 || *value_bytes > max_value_bytes)
    return error{"parameter 'value_bytes' must be between 0 and " +
                 std::to_string(max_value_bytes) + " (got " + std::to_string(*value_bytes) + ")"};
  return std::unique_ptr<stream_operator>(new keyed_sum(*bytes, *value_bytes));
}

result<void> keyed_sum::open(const operator_context& context,
                             const std::vector<restored_operator_state>&) {
  assert(context.keyed_state != nullptr);
  state_ = context.keyed_state;
  // Not restored: the ballast only stands for state of a given size, its content is not used.
  ballast_.resize(static_cast<std::size_t>(state_bytes_));
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (context.subtask_index + 1);
  for (auto& c : ballast_) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  return success();
}

result<operator_snapshot> keyed_sum::snapshot(checkpoint_id) {
  operator_snapshot s;
  if (!ballast_.empty()) s.state.push_back({"state_bytes", ballast_});
  return s;
}

result<void> keyed_sum::process(const record& r, record_output& out) {
  const std::int64_t sum = state_->add_to_value("sum", r.value);
  if (!value_.empty()) {
    // Different for every record (xorshift seeded by key and seq): an update really changes
    // the key's bytes, and compression cannot make them vanish.
    std::uint64_t x = (r.key * 0x9e3779b97f4a7c15ull) ^ static_cast<std::uint64_t>(r.seq) ^ 1;
    for (std::size_t i = 0; i < value_.size(); i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      const std::size_t n = std::min<std::size_t>(8, value_.size() - i);
      std::memcpy(value_.data() + i, &x, n);
    }
    state_->set_value_bytes("payload", value_);
  }
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
  const std::int64_t count = state_->add_to_value("count", 1);
  record copy = r;
  copy.value = count;
  out.emit(std::move(copy));
  return success();
}

}  // namespace snapflow
