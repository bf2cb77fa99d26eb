#include "engine/runtime/source_splits.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

namespace snapflow {

namespace {

constexpr std::string_view legacy_offset = "offset";
constexpr std::string_view count_entry = "splits";
constexpr std::string_view split_prefix = "split/";
constexpr std::int64_t missing = -1;  // below every number: firsts are >= 0

bool is_split_entry(std::string_view name) {
  return name.starts_with(split_prefix);
}

// A decimal integer and nothing else (no sign for unsigned types, no spaces).
template <typename T>
result<T> decode(std::string_view text, std::string_view what) {
  T v{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
    return error{"malformed " + std::string(what) + " '" + std::string(text) + "'"};
  return v;
}

// Whether `v` is one of first+j, first+j+stride, ... (the numbers of split j of `stride`).
bool in_split(std::int64_t v, std::int64_t first, std::uint32_t j, std::uint32_t stride) {
  if (v < first || v - first < j) return false;
  return (v - first - j) % stride == 0;
}

std::string number_list(std::int64_t first, std::uint32_t j, std::uint32_t stride) {
  return std::to_string(first + j) + ", " + std::to_string(first + j + stride) + ", ...";
}

// Today's parallelism-bound state: one "offset" per old subtask, the stride split of the old
// parallelism. Only the same parallelism can take it; it becomes S = p splits.
result<std::vector<std::int64_t>> restore_offsets(
    std::string_view kind, std::int64_t first, const operator_context& context,
    const std::vector<restored_operator_state>& restored) {
  const std::uint32_t p = context.parallelism;
  std::vector<std::int64_t> next(p, missing);
  for (const auto& old : restored) {
    if (old.entries.empty()) continue;
    if (old.old_parallelism != p)
      return error{std::string(kind) + " cannot be restored at another parallelism (" +
                   std::to_string(old.old_parallelism) + " -> " + std::to_string(p) +
                   "): its state predates splits and its offsets belong to their subtask"};
    const std::uint32_t i = old.old_subtask_index;
    if (i >= p)
      return error{std::string(kind) + " state: old subtask " + std::to_string(i) +
                   " is beyond parallelism " + std::to_string(p)};
    for (const auto& e : old.entries) {
      auto v = decode<std::int64_t>(e.bytes, "offset");
      if (!v) return error{std::string(kind) + " state: " + v.err().message};
      if (next[i] != missing)
        return error{std::string(kind) + " state: two offsets for old subtask " +
                     std::to_string(i)};
      if (!in_split(*v, first, i, p))
        return error{std::string(kind) + " state: offset " + std::to_string(*v) +
                     " is not in the split of subtask " + std::to_string(i) + " (" +
                     number_list(first, i, p) + ")"};
      next[i] = *v;
    }
  }
  for (std::uint32_t i = 0; i < p; ++i)
    if (next[i] == missing)
      return error{std::string(kind) + " state: no offset for old subtask " + std::to_string(i) +
                   " of " + std::to_string(p)};
  return next;
}

// The number of splits every old subtask declared (they must agree).
result<std::uint32_t> restored_count(std::string_view kind,
                                     const std::vector<restored_operator_state>& restored) {
  std::optional<std::uint32_t> count;
  for (const auto& old : restored)
    for (const auto& e : old.entries) {
      if (e.name != count_entry) continue;
      auto v = decode<std::uint32_t>(e.bytes, "number of splits");
      if (!v) return error{std::string(kind) + " state: " + v.err().message};
      if (*v == 0 || *v > source_splits::max_count())
        return error{std::string(kind) + " state: " + std::to_string(*v) +
                     " splits is out of range (1.." + std::to_string(source_splits::max_count()) +
                     ")"};
      if (count && *count != *v)
        return error{std::string(kind) + " state: old subtasks disagree on the number of splits (" +
                     std::to_string(*count) + " and " + std::to_string(*v) + ")"};
      count = *v;
    }
  if (!count)
    return error{std::string(kind) + " state: split positions without the number of splits"};
  return *count;
}

// The next number of each of the S splits, from the union of the old subtasks' entries.
result<std::vector<std::int64_t>> restore_split_positions(
    std::string_view kind, std::int64_t first, std::uint32_t count,
    const std::vector<restored_operator_state>& restored) {
  const std::string what = std::string(kind) + " state: ";
  std::vector<std::int64_t> next(count, missing);
  for (const auto& old : restored)
    for (const auto& e : old.entries) {
      if (!is_split_entry(e.name)) continue;
      auto j = decode<std::uint32_t>(std::string_view(e.name).substr(split_prefix.size()),
                                     "split index");
      if (!j) return error{what + j.err().message};
      if (*j >= count)
        return error{what + "split " + std::to_string(*j) + " does not exist (" +
                     std::to_string(count) + " splits)"};
      auto v = decode<std::int64_t>(e.bytes, "position");
      if (!v) return error{what + "split " + std::to_string(*j) + ": " + v.err().message};
      if (next[*j] != missing)
        return error{what + "split " + std::to_string(*j) + " appears twice"};
      if (!in_split(*v, first, *j, count))
        return error{what + "split " + std::to_string(*j) + " at " + std::to_string(*v) +
                     ", which is not one of its numbers (" + number_list(first, *j, count) + ")"};
      next[*j] = *v;
    }
  for (std::uint32_t j = 0; j < count; ++j)
    if (next[j] == missing)
      return error{what + "split " + std::to_string(j) + " of " + std::to_string(count) +
                   " is missing (a checkpoint holds every split once)"};
  return next;
}

}  // namespace

std::uint32_t source_splits::max_count() {
  return job_graph::max_parallelism_limit;
}

result<source_splits> source_splits::open(std::string_view kind, std::int64_t first,
                                          const operator_context& context,
                                          const std::vector<restored_operator_state>& restored) {
  if (context.parallelism == 0 || context.subtask_index >= context.parallelism)
    return error{std::string(kind) + ": subtask " + std::to_string(context.subtask_index) +
                 " of parallelism " + std::to_string(context.parallelism)};
  bool offsets = false;
  bool splits = false;
  for (const auto& old : restored)
    for (const auto& e : old.entries) {
      if (e.name == legacy_offset)
        offsets = true;
      else if (e.name == count_entry || is_split_entry(e.name))
        splits = true;
      else
        return error{std::string(kind) + " state: unknown entry '" + e.name + "'"};
    }
  if (offsets && splits)
    return error{std::string(kind) + " state: mixes offsets and splits"};

  if (offsets) {
    auto next = restore_offsets(kind, first, context, restored);
    if (!next) return next.err();
    source_splits s(first, context.parallelism);
    s.take_owned(context, *next);
    return s;
  }
  if (splits) {
    auto count = restored_count(kind, restored);
    if (!count) return count.err();
    auto next = restore_split_positions(kind, first, *count, restored);
    if (!next) return next.err();
    source_splits s(first, *count);
    s.take_owned(context, *next);
    return s;
  }
  // Fresh: as many splits as the vertex may ever have subtasks.
  const std::uint32_t count = std::max<std::uint32_t>(
      1, context.vertex != nullptr ? context.vertex->max_parallelism : context.parallelism);
  std::vector<std::int64_t> next(count);
  for (std::uint32_t j = 0; j < count; ++j) next[j] = first + j;
  source_splits s(first, count);
  s.take_owned(context, next);
  return s;
}

void source_splits::take_owned(const operator_context& context,
                               const std::vector<std::int64_t>& next_by_split) {
  owned_.clear();
  for (std::uint64_t j = context.subtask_index; j < count_; j += context.parallelism)
    owned_.push_back({static_cast<std::uint32_t>(j), next_by_split[j]});
}

std::vector<operator_state_entry> source_splits::snapshot() const {
  std::vector<operator_state_entry> out;
  out.reserve(owned_.size() + 1);
  out.push_back({std::string(count_entry), std::to_string(count_)});
  for (const split& s : owned_)
    out.push_back({std::string(split_prefix) + std::to_string(s.index), std::to_string(s.next)});
  return out;
}

}  // namespace snapflow
