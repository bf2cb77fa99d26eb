#include "engine/runtime/operator_list_states.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <optional>
#include <stdexcept>

namespace snapflow {

namespace {

std::string_view mode_name(list_redistribution mode) {
  return mode == list_redistribution::union_all ? "union" : "even-split";
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Reads the entry's bytes front to back; every read checks what is left first.
class entry_reader {
 public:
  explicit entry_reader(std::string_view bytes) : rest_(bytes) {}

  std::optional<std::uint8_t> u8() {
    if (rest_.empty()) return std::nullopt;
    const auto v = static_cast<std::uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return v;
  }
  std::optional<std::uint32_t> u32() {
    if (rest_.size() < 4) return std::nullopt;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(rest_[i])) << (8 * i);
    rest_.remove_prefix(4);
    return v;
  }
  std::optional<std::string_view> bytes(std::uint32_t n) {
    if (rest_.size() < n) return std::nullopt;
    auto v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return v;
  }
  std::size_t left() const { return rest_.size(); }

 private:
  std::string_view rest_;
};

// A list's parts by old subtask, gathered before it is redistributed.
struct gathered_list {
  list_redistribution mode = list_redistribution::even_split;
  std::map<std::uint32_t, std::vector<std::string>> by_old_subtask;
  std::uint64_t total = 0;
};

// The old subtasks in index order, checked against the old parallelism they all declare.
result<std::vector<const restored_operator_state*>> in_old_order(
    const std::vector<restored_operator_state>& restored) {
  std::vector<const restored_operator_state*> out;
  std::optional<std::uint32_t> old_parallelism;
  for (const auto& old : restored) {
    if (old_parallelism && *old_parallelism != old.old_parallelism)
      return error{"old subtasks disagree on the old parallelism (" +
                   std::to_string(*old_parallelism) + " and " +
                   std::to_string(old.old_parallelism) + ")"};
    old_parallelism = old.old_parallelism;
    if (old.old_subtask_index >= old.old_parallelism)
      return error{"old subtask " + std::to_string(old.old_subtask_index) +
                   " is beyond the old parallelism " + std::to_string(old.old_parallelism)};
    out.push_back(&old);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) {
    return a->old_subtask_index < b->old_subtask_index;
  });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i]->old_subtask_index == out[i - 1]->old_subtask_index)
      return error{"the state of old subtask " + std::to_string(out[i]->old_subtask_index) +
                   " arrived twice"};
  return out;
}

}  // namespace

element_range even_split_range(std::uint64_t total, std::uint32_t parallelism,
                               std::uint32_t index) {
  assert(parallelism >= 1 && index < parallelism);
  const std::uint64_t base = total / parallelism;
  const std::uint64_t larger = total % parallelism;  // these many subtasks take base + 1
  const std::uint64_t begin = index * base + std::min<std::uint64_t>(index, larger);
  return {begin, begin + base + (index < larger ? 1 : 0)};
}

operator_state_entry operator_list_states::encode_entry(std::string_view name,
                                                        const operator_list& list) {
  std::string bytes;
  bytes.push_back(static_cast<char>(list.mode));
  put_u32(bytes, static_cast<std::uint32_t>(list.elements.size()));
  for (const auto& e : list.elements) {
    put_u32(bytes, static_cast<std::uint32_t>(e.size()));
    bytes += e;
  }
  return {std::string(entry_prefix) + std::string(name), std::move(bytes)};
}

result<std::pair<std::string, operator_list>> operator_list_states::decode_entry(
    const operator_state_entry& entry) {
  if (!entry.name.starts_with(entry_prefix))
    return error{"operator state entry '" + entry.name + "' is not a list (names start with '" +
                 std::string(entry_prefix) + "')"};
  std::string name = entry.name.substr(entry_prefix.size());
  const std::string what = "operator list state '" + name + "': ";
  entry_reader in(entry.bytes);
  const auto mode = in.u8();
  if (!mode) return error{what + "empty entry"};
  if (*mode > static_cast<std::uint8_t>(list_redistribution::union_all))
    return error{what + "unknown redistribution mode " + std::to_string(*mode)};
  const auto count = in.u32();
  if (!count) return error{what + "truncated before the element count"};
  // Each element takes at least its 4-byte length: a count beyond that is a lie.
  if (*count > in.left() / 4)
    return error{what + std::to_string(*count) + " elements cannot fit in " +
                 std::to_string(in.left()) + " bytes"};
  operator_list list;
  list.mode = static_cast<list_redistribution>(*mode);
  list.elements.reserve(*count);
  for (std::uint32_t i = 0; i < *count; ++i) {
    const auto length = in.u32();
    const auto element = length ? in.bytes(*length) : std::nullopt;
    if (!element)
      return error{what + "element " + std::to_string(i) + " runs past the end of the entry"};
    list.elements.emplace_back(*element);
  }
  if (in.left() != 0)
    return error{what + std::to_string(in.left()) + " bytes after the last element"};
  return std::pair{std::move(name), std::move(list)};
}

result<std::vector<operator_state_entry>> operator_list_states::snapshot() const {
  constexpr std::uint64_t most = std::numeric_limits<std::uint32_t>::max();
  std::vector<operator_state_entry> out;
  out.reserve(lists_.size());
  for (const auto& [name, list] : lists_) {
    if (list.elements.size() > most)
      return error{"operator list state '" + name + "' holds " +
                   std::to_string(list.elements.size()) + " elements, more than a snapshot takes"};
    for (const auto& e : list.elements)
      if (e.size() > most)
        return error{"operator list state '" + name + "' holds an element of " +
                     std::to_string(e.size()) + " bytes, more than a snapshot takes"};
    out.push_back(encode_entry(name, list));
  }
  return out;
}

std::vector<std::string>& operator_list_states::list_bytes(std::string_view name,
                                                           list_redistribution mode) {
  auto it = lists_.find(name);
  if (it == lists_.end()) it = lists_.emplace(std::string(name), operator_list{mode, {}}).first;
  if (it->second.mode != mode)
    throw std::logic_error("operator list state '" + std::string(name) + "' is " +
                           std::string(mode_name(it->second.mode)) + " state, asked for as " +
                           std::string(mode_name(mode)) + " state");
  return it->second.elements;
}

result<void> operator_list_states::restore(const std::vector<restored_operator_state>& restored) {
  auto olds = in_old_order(restored);
  if (!olds) return olds.err();
  std::map<std::string, gathered_list> gathered;
  std::uint32_t old_parallelism = 0;
  for (const restored_operator_state* old : *olds) {
    old_parallelism = old->old_parallelism;
    for (const auto& entry : old->entries) {
      auto decoded = decode_entry(entry);
      if (!decoded)
        return error{"the state of old subtask " + std::to_string(old->old_subtask_index) +
                     ": " + decoded.err().message};
      auto& [name, list] = *decoded;
      auto [it, fresh] = gathered.try_emplace(name);
      gathered_list& g = it->second;
      if (fresh) g.mode = list.mode;
      if (g.mode != list.mode)
        return error{"operator list state '" + name + "' is " +
                     std::string(mode_name(g.mode)) + " state in one old subtask and " +
                     std::string(mode_name(list.mode)) + " state in old subtask " +
                     std::to_string(old->old_subtask_index)};
      // Two entries of one name from one old subtask: a snapshot never writes that.
      if (g.by_old_subtask.contains(old->old_subtask_index))
        return error{"operator list state '" + name + "' appears twice in old subtask " +
                     std::to_string(old->old_subtask_index)};
      g.total += list.elements.size();
      g.by_old_subtask.emplace(old->old_subtask_index, std::move(list.elements));
    }
  }
  lists_.clear();
  for (auto& [name, g] : gathered) {
    operator_list& mine = lists_[name];
    mine.mode = g.mode;
    const bool keep_own =
        g.mode == list_redistribution::even_split && old_parallelism == parallelism_;
    element_range range{0, g.total};
    if (keep_own)
      range = {0, 0};
    else if (g.mode == list_redistribution::even_split)
      range = even_split_range(g.total, parallelism_, subtask_index_);
    std::uint64_t at = 0;  // position of the part's first element in the concatenation
    for (auto& [old_index, part] : g.by_old_subtask) {
      if (keep_own) {
        if (old_index == subtask_index_) mine.elements = std::move(part);
        continue;
      }
      const std::uint64_t from = std::max(range.begin, at);
      const std::uint64_t to = std::min(range.end, at + part.size());
      for (std::uint64_t i = from; i < to; ++i) mine.elements.push_back(std::move(part[i - at]));
      at += part.size();
    }
  }
  return success();
}

}  // namespace snapflow
