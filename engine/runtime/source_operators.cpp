#include "engine/runtime/source_operators.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>

#include "engine/runtime/operator_factory.hpp"

namespace snapflow {

namespace {

constexpr std::string_view offset_state = "offset";

std::string encode_i64(std::int64_t v) {
  return std::to_string(v);
}

result<std::int64_t> decode_i64(std::string_view text) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
    return error{"malformed offset '" + std::string(text) + "'"};
  return v;
}

// The offset this subtask saved, if the restored checkpoint has one for it.
result<std::optional<std::int64_t>> restored_offset(
    std::string_view kind, const operator_context& context,
    const std::vector<restored_operator_state>& restored) {
  std::optional<std::int64_t> offset;
  for (const auto& old : restored) {
    if (old.entries.empty()) continue;
    if (old.old_parallelism != context.parallelism)
      return error{std::string(kind) + " cannot be restored at another parallelism (" +
                   std::to_string(old.old_parallelism) + " -> " +
                   std::to_string(context.parallelism) + "): its offsets belong to their split"};
    if (old.old_subtask_index != context.subtask_index) continue;
    for (const auto& e : old.entries) {
      if (e.name != offset_state) continue;
      auto v = decode_i64(e.bytes);
      if (!v) return error{std::string(kind) + " state: " + v.err().message};
      offset = *v;
    }
  }
  return offset;
}

}  // namespace

std::uint64_t fnv1a_64(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// --- sequence_source -------------------------------------------------------------------------

result<std::unique_ptr<stream_operator>> sequence_source::create(const job_vertex& vertex) {
  auto count = int_param(vertex, "count");
  if (!count) return count.err();
  auto keys = int_param(vertex, "keys", 16);
  if (!keys) return keys.err();
  auto rate = int_param(vertex, "rate", 0);
  if (!rate) return rate.err();
  auto start = int_param(vertex, "start", 0);
  if (!start) return start.err();
  if (*count < 0) return error{"count must be >= 0"};
  if (*keys < 1) return error{"keys must be >= 1"};
  if (*rate < 0) return error{"rate must be >= 0"};
  if (*start < 0) return error{"start must be >= 0"};
  return std::unique_ptr<stream_operator>(new sequence_source(*count, *keys, *rate, *start));
}

result<void> sequence_source::open(const operator_context& context,
                                   const std::vector<restored_operator_state>& restored) {
  stride_ = context.parallelism;
  next_ = start_ + context.subtask_index;
  auto offset = restored_offset("sequence_source", context, restored);
  if (!offset) return offset.err();
  if (*offset) {
    const std::int64_t o = **offset;
    if (o < next_ || (o - next_) % stride_ != 0)
      return error{"sequence_source state: offset " + std::to_string(o) +
                   " is not in the split of subtask " + std::to_string(context.subtask_index)};
    next_ = o;
  }
  opened_at_ = std::chrono::steady_clock::now();
  emitted_since_open_ = 0;
  return success();
}

result<source_operator::emit_result> sequence_source::emit(record_output& out,
                                                           std::size_t max_records) {
  const std::int64_t end = start_ + count_;
  std::int64_t budget = static_cast<std::int64_t>(max_records);
  if (rate_ > 0) {
    using namespace std::chrono;
    const auto now = steady_clock::now();
    const std::int64_t elapsed_us = duration_cast<microseconds>(now - opened_at_).count();
    const std::int64_t allowed = elapsed_us * rate_ / 1'000'000 + 1 - emitted_since_open_;
    if (allowed <= 0) {
      const std::int64_t due_us = (emitted_since_open_ * 1'000'000) / rate_;
      return emit_result{emit_result::status::wait, opened_at_ + microseconds(due_us)};
    }
    budget = std::min(budget, allowed);
  }
  for (std::int64_t i = 0; i < budget && next_ < end; ++i) {
    out.emit(record{static_cast<std::uint64_t>(next_ % keys_), next_, next_, {}});
    next_ += stride_;
    ++emitted_since_open_;
  }
  if (next_ >= end) return emit_result{emit_result::status::exhausted, {}};
  return emit_result{};
}

result<operator_snapshot> sequence_source::snapshot(checkpoint_id) {
  operator_snapshot s;
  s.state.push_back({std::string(offset_state), encode_i64(next_)});
  return s;
}

// --- line_source -----------------------------------------------------------------------------

result<std::unique_ptr<stream_operator>> line_source::create(const job_vertex& vertex) {
  auto path = string_param(vertex, "path");
  if (!path) return path.err();
  if (path->empty()) return error{"path must not be blank"};
  return std::unique_ptr<stream_operator>(new line_source(std::move(*path)));
}

result<void> line_source::open(const operator_context& context,
                               const std::vector<restored_operator_state>& restored) {
  subtask_ = context.subtask_index;
  parallelism_ = context.parallelism;
  next_ = subtask_;
  auto offset = restored_offset("line_source", context, restored);
  if (!offset) return offset.err();
  if (*offset) next_ = **offset;
  in_.open(path_);
  if (!in_) return error{"line_source cannot open " + path_};
  line_ = 0;
  return success();
}

result<source_operator::emit_result> line_source::emit(record_output& out,
                                                       std::size_t max_records) {
  std::string line;
  std::size_t emitted = 0;
  // Lines of other subtasks are read and skipped; bounded by max_records per call on top.
  for (std::size_t skipped = 0; emitted < max_records && skipped < 64 * max_records;) {
    if (!std::getline(in_, line)) {
      if (in_.bad()) return error{"line_source: reading " + path_ + " failed"};
      return emit_result{emit_result::status::exhausted, {}};
    }
    const std::int64_t number = line_++;
    if (number != next_) {
      ++skipped;
      continue;
    }
    const std::uint64_t key = fnv1a_64(line);
    out.emit(record{key, number, 1, std::move(line)});
    next_ += parallelism_;
    ++emitted;
  }
  return emit_result{};
}

result<operator_snapshot> line_source::snapshot(checkpoint_id) {
  operator_snapshot s;
  s.state.push_back({std::string(offset_state), encode_i64(next_)});
  return s;
}

}  // namespace snapflow
