#include "engine/runtime/source_operators.hpp"

#include <algorithm>
#include <functional>

#include "engine/runtime/operator_factory.hpp"

namespace snapflow {

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
  auto splits = source_splits::open("sequence_source", start_, context, restored);
  if (!splits) return splits.err();
  splits_ = std::move(splits).value();
  pending_.clear();
  const std::int64_t end = start_ + count_;
  const auto& owned = splits_->owned();
  for (std::size_t k = 0; k < owned.size(); ++k)
    if (owned[k].next < end) push_pending({owned[k].next, k});
  opened_at_ = std::chrono::steady_clock::now();
  emitted_since_open_ = 0;
  return success();
}

void sequence_source::push_pending(pending_split s) {
  pending_.push_back(s);
  std::push_heap(pending_.begin(), pending_.end(), std::greater<>());
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
  const std::int64_t stride = splits_->count();
  auto& owned = splits_->owned();
  for (std::int64_t i = 0; i < budget && !pending_.empty(); ++i) {
    std::pop_heap(pending_.begin(), pending_.end(), std::greater<>());
    const auto [seq, k] = pending_.back();
    pending_.pop_back();
    out.emit(record{static_cast<std::uint64_t>(seq % keys_), seq, seq, {}});
    owned[k].next = seq + stride;
    if (owned[k].next < end) push_pending({owned[k].next, k});
    ++emitted_since_open_;
  }
  if (pending_.empty()) return emit_result{emit_result::status::exhausted, {}};
  return emit_result{};
}

result<operator_snapshot> sequence_source::snapshot(checkpoint_id) {
  operator_snapshot s;
  s.state = splits_->snapshot();
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
  auto splits = source_splits::open("line_source", 0, context, restored);
  if (!splits) return splits.err();
  splits_ = std::move(splits).value();
  next_by_split_.assign(splits_->count(), -1);
  for (const auto& s : splits_->owned()) next_by_split_[s.index] = s.next;
  in_.open(path_);
  if (!in_) return error{"line_source cannot open " + path_};
  line_ = 0;
  return success();
}

result<source_operator::emit_result> line_source::emit(record_output& out,
                                                       std::size_t max_records) {
  if (splits_->owned().empty()) return emit_result{emit_result::status::exhausted, {}};
  const std::int64_t splits = splits_->count();
  std::string line;
  std::size_t emitted = 0;
  // Lines of other subtasks' splits, and lines a restored split already emitted, are read and
  // skipped; bounded by max_records per call on top.
  for (std::size_t skipped = 0; emitted < max_records && skipped < 64 * max_records;) {
    if (!std::getline(in_, line)) {
      if (in_.bad()) return error{"line_source: reading " + path_ + " failed"};
      return emit_result{emit_result::status::exhausted, {}};
    }
    const std::int64_t number = line_++;
    std::int64_t& next = next_by_split_[static_cast<std::size_t>(number % splits)];
    if (next < 0 || number < next) {
      ++skipped;
      continue;
    }
    const std::uint64_t key = fnv1a_64(line);
    out.emit(record{key, number, 1, std::move(line)});
    next = number + splits;
    ++emitted;
  }
  return emit_result{};
}

result<operator_snapshot> line_source::snapshot(checkpoint_id) {
  for (auto& s : splits_->owned()) s.next = next_by_split_[s.index];
  operator_snapshot s;
  s.state = splits_->snapshot();
  return s;
}

}  // namespace snapflow
