#include "engine/runtime/keyed_operators.hpp"

#include <algorithm>
#include <cassert>
#include <string>

#include "engine/runtime/operator_factory.hpp"

namespace snapflow {

result<std::unique_ptr<stream_operator>> keyed_sum::create(const job_vertex& vertex) {
  auto bytes = int_param(vertex, "state_bytes", 0);
  if (!bytes) return bytes.err();
  if (*bytes < 0 || *bytes > max_state_bytes)
    return error{"parameter 'state_bytes' must be between 0 and " +
                 std::to_string(max_state_bytes) + " (got " + std::to_string(*bytes) + ")"};
  auto value = int_param(vertex, "value_bytes", 0);
  if (!value) return value.err();
  if (*value < 0 || *value > max_value_bytes)
    return error{"parameter 'value_bytes' must be between 0 and " +
                 std::to_string(max_value_bytes) + " (got " + std::to_string(*value) + ")"};
  return std::unique_ptr<stream_operator>(new keyed_sum(*bytes, *value));
}

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser: nearby seeds, unrelated streams
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void keyed_sum::rewrite_value(const record& r) {
  // The old chunks' map keys are their content: read them to remove them.
  for (const auto& [old, _] : state_->map_entries(value_state))
    state_->map_remove(value_state, old);
  std::uint64_t x = mix(r.key ^ mix(static_cast<std::uint64_t>(r.seq))) | 1;  // xorshift must not start at 0
  const auto total = static_cast<std::size_t>(value_bytes_);
  for (std::size_t offset = 0, index = 0; offset < total; offset += value_chunk_bytes, ++index) {
    const std::size_t n = std::min(value_chunk_bytes, total - offset);
    chunk_.resize(4 + n);
    for (int b = 0; b < 4; ++b) chunk_[b] = static_cast<char>(index >> (8 * (3 - b)));
    for (std::size_t i = 0; i < n; i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      for (std::size_t j = 0; j < 8 && i + j < n; ++j)
        chunk_[4 + i + j] = static_cast<char>(x >> (8 * j));
    }
    state_->map_put(value_state, chunk_, static_cast<std::int64_t>(r.seq));
  }
}

std::string keyed_sum::stored_value(const keyed_state_backend& state) {
  std::string out;
  for (const auto& [chunk, _] : state.map_entries(value_state))
    if (chunk.size() >= 4) out.append(chunk, 4);  // entries come ordered by index (big-endian)
  return out;
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
  if (value_bytes_ > 0) rewrite_value(r);
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
