#include "engine/state/heap_keyed_state_backend.hpp"

#include <unordered_map>

#include "engine/state/int64_state_value.hpp"

namespace snapflow {

using namespace heap_cow;

namespace {

// Entries per slot on average before a table doubles: buckets stay a few entries long, so a
// write while a snapshot is alive copies a few entries, not a key group.
constexpr std::size_t max_load = 2;

// Fibonacci hashing of the mixed key, top bits: independent of the key group, which is
// another hash of the key modulo max parallelism.
std::size_t slot_of(std::uint64_t key, unsigned bits) {
  key ^= key >> 29;
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
}

std::size_t payload_bytes(const std::pair<std::uint64_t, value_bytes>& e) {
  return sizeof(std::uint64_t) + e.second.size();
}
std::size_t payload_bytes(const std::pair<std::uint64_t, map_value>& e) {
  std::size_t n = sizeof(std::uint64_t);
  for (const auto& [k, v] : e.second) n += k.size() + v.size();
  return n;
}

template <class V>
void count_copy(copy_stats& stats, const bucket<V>& b) {
  ++stats.buckets_cloned;
  stats.entries_copied += b.entries.size();
  for (const auto& e : b.entries) stats.bytes_copied += payload_bytes(e);
}

template <class V>
const bucket<V>* bucket_at(const table<V>& t, std::size_t slot) {
  const auto& c = t.chunks[slot >> chunk_bits];
  if (!c) return nullptr;
  const auto& b = c->slots[slot & (chunk_slots - 1)];
  return b ? &*b : nullptr;
}

template <class V>
const V* find(const table<V>& t, std::uint64_t key) {
  const bucket<V>* b = bucket_at(t, slot_of(key, t.bits));
  if (!b) return nullptr;
  for (const auto& e : b->entries)
    if (e.first == key) return &e.second;
  return nullptr;
}

template <class V>
table<V> empty_table(std::size_t expected) {
  table<V> t;
  t.bits = chunk_bits;
  while ((max_load << t.bits) < expected) ++t.bits;
  t.chunks.resize(std::size_t{1} << (t.bits - chunk_bits));
  return t;
}

// The bucket for `slot` of a table being built or written, created when missing.
template <class V>
shared_block<bucket<V>>& fresh_slot(table<V>& t, std::size_t slot) {
  auto& c = t.chunks[slot >> chunk_bits];
  if (!c) c = shared_block<chunk<V>>::make();
  auto& b = c.mutate().slots[slot & (chunk_slots - 1)];
  if (!b) b = shared_block<bucket<V>>::make();
  return b;
}

// The table behind `ref`, copied first (its chunk references) when a snapshot holds it.
template <class V>
table<V>& writable(table_ref<V>& ref, copy_stats& stats) {
  if (!ref.exclusive()) {
    ref = table_ref<V>::make(*ref);
    ++stats.tables_cloned;
    stats.bytes_copied += ref->chunks.size() * sizeof(ref->chunks[0]);
  }
  return ref.mutate();
}

// The bucket for `slot`, created when missing; it and its chunk copied first when a snapshot
// holds them.
template <class V>
bucket<V>& writable(table<V>& t, std::size_t slot, copy_stats& stats) {
  auto& c = t.chunks[slot >> chunk_bits];
  if (!c) {
    c = shared_block<chunk<V>>::make();
  } else if (!c.exclusive()) {
    c = shared_block<chunk<V>>::make(*c);
    ++stats.chunks_cloned;
    stats.bytes_copied += sizeof(chunk<V>);
  }
  auto& b = c.mutate().slots[slot & (chunk_slots - 1)];
  if (!b) {
    b = shared_block<bucket<V>>::make();
  } else if (!b.exclusive()) {
    count_copy(stats, *b);
    b = shared_block<bucket<V>>::make(*b);
  }
  return b.mutate();
}

// Twice the slots. Buckets no snapshot holds give up their entries; shared ones are copied.
template <class V>
void grow(table<V>& t, copy_stats& stats) {
  table<V> bigger;
  bigger.bits = t.bits + 1;
  bigger.chunks.resize(t.chunks.size() * 2);
  bigger.size = t.size;
  auto place = [&](std::uint64_t key, auto&& v) {
    fresh_slot(bigger, slot_of(key, bigger.bits))
        .mutate()
        .entries.emplace_back(key, std::forward<decltype(v)>(v));
  };
  auto copy = [&](const shared_block<bucket<V>>& b) {
    count_copy(stats, *b);
    for (const auto& [key, v] : b->entries) place(key, v);
  };
  for (auto& c : t.chunks) {
    if (!c) continue;
    // A bucket is the task's own only when its chunk is too: a snapshot reaches it otherwise.
    if (!c.exclusive()) {
      for (const auto& b : c->slots)
        if (b) copy(b);
      continue;
    }
    for (auto& b : c.mutate().slots) {
      if (!b) continue;
      if (!b.exclusive()) {
        copy(b);
        continue;
      }
      for (auto& [key, v] : b.mutate().entries) place(key, std::move(v));
    }
  }
  t = std::move(bigger);
}

// The entry for `key`, created (V{}) when missing.
template <class V>
V& upsert(table_ref<V>& ref, std::uint64_t key, copy_stats& stats) {
  table<V>& t = writable(ref, stats);
  const bool present = find(t, key) != nullptr;
  if (!present && t.size + 1 > (max_load << t.bits)) grow(t, stats);
  auto& entries = writable(t, slot_of(key, t.bits), stats).entries;
  if (present)
    for (auto& e : entries)
      if (e.first == key) return e.second;
  ++t.size;
  return entries.emplace_back(key, V{}).second;
}

// Removes `key`'s entry, which exists.
template <class V>
void erase(table_ref<V>& ref, std::uint64_t key, copy_stats& stats) {
  table<V>& t = writable(ref, stats);
  const std::size_t slot = slot_of(key, t.bits);
  auto& entries = writable(t, slot, stats).entries;
  for (auto& e : entries) {
    if (e.first != key) continue;
    if (&e != &entries.back()) e = std::move(entries.back());
    entries.pop_back();
    break;
  }
  --t.size;
  // writable() left the chunk the task's own.
  if (entries.empty()) t.chunks[slot >> chunk_bits].mutate().slots[slot & (chunk_slots - 1)] = {};
}

template <class V>
table_ref<V>& table_for(std::map<std::string, table_ref<V>, std::less<>>& tables,
                        std::string_view state) {
  auto s = tables.find(state);
  if (s == tables.end())
    s = tables.emplace(std::string(state), table_ref<V>::make(empty_table<V>(0))).first;
  return s->second;
}

template <class V>
const table<V>* table_of(const std::map<std::string, table_ref<V>, std::less<>>& tables,
                         std::string_view state) {
  auto s = tables.find(state);
  return s == tables.end() ? nullptr : &*s->second;
}

template <class V, class F>
void for_each_bucket(const table<V>& t, F&& f) {
  for (const auto& c : t.chunks) {
    if (!c) continue;
    for (const auto& b : c->slots)
      if (b) f(*b);
  }
}

// A key group's tables walked in place, for a sink that writes as it goes (a state file): the
// neutral form of a large state would copy every entry once more.
class heap_group_walk final : public key_group_walk {
 public:
  explicit heap_group_walk(const group_tables& tables) : tables_(tables) {}

  bool empty() const { return held(tables_.values) == 0 && held(tables_.maps) == 0; }

  void walk(key_group_visitor& visitor) const override {
    visitor.value_states(held(tables_.values));
    for (const auto& [name, t] : tables_.values) {
      if (t->size == 0) continue;
      visitor.value_state(name, t->size);
      for_each_bucket(*t, [&](const bucket<value_bytes>& b) {
        for (const auto& [key, bytes] : b.entries) visitor.value(key, bytes);
      });
    }
    visitor.map_states(held(tables_.maps));
    for (const auto& [name, t] : tables_.maps) {
      if (t->size == 0) continue;
      visitor.map_state(name, t->size);
      for_each_bucket(*t, [&](const bucket<map_value>& b) {
        for (const auto& [key, entries] : b.entries) {
          visitor.map_key(key, entries.size());
          for (const auto& [map_key, bytes] : entries) visitor.map_entry(map_key, bytes);
        }
      });
    }
  }

 private:
  // Tables of `tables` that hold an entry.
  template <class Tables>
  static std::size_t held(const Tables& tables) {
    std::size_t n = 0;
    for (const auto& [_, t] : tables) n += t->size > 0 ? 1 : 0;
    return n;
  }

  const group_tables& tables_;
};

keyed_state_snapshot neutral(std::uint32_t max_parallelism, std::uint32_t first,
                             const std::vector<group_tables>& groups) {
  keyed_state_snapshot out;
  out.max_parallelism = max_parallelism;
  for (std::uint32_t i = 0; i < groups.size(); ++i) {
    key_group_state g = collect_key_group(heap_group_walk(groups[i]));
    if (!g.empty()) out.key_groups.emplace(first + i, std::move(g));
  }
  return out;
}

// Adds `key` -> `v` to a table being built, which holds no entry for `key` yet.
template <class V>
void add_new(table<V>& t, std::uint64_t key, V v) {
  fresh_slot(t, slot_of(key, t.bits)).mutate().entries.emplace_back(key, std::move(v));
  ++t.size;
}

table_ref<value_bytes> values_table(const std::unordered_map<std::uint64_t, std::string>& in) {
  table<value_bytes> t = empty_table<value_bytes>(in.size());
  for (const auto& [key, v] : in) add_new(t, key, v);
  return table_ref<value_bytes>::make(std::move(t));
}

// A key with an empty map has no state: the backend never holds one.
table_ref<map_value> maps_table(
    const std::unordered_map<std::uint64_t, std::map<std::string, std::string>>& in) {
  table<map_value> t = empty_table<map_value>(in.size());
  for (const auto& [key, m] : in)
    if (!m.empty()) add_new(t, key, map_value(m.begin(), m.end()));
  return table_ref<map_value>::make(std::move(t));
}

// The tables as they were at snapshot(): the references keep every table and bucket unchanged
// (the task copies before writing one they hold) until this is written out or dropped.
class heap_deferred_snapshot final : public deferred_keyed_snapshot {
 public:
  heap_deferred_snapshot(std::uint32_t max_parallelism, std::uint32_t first,
                         std::vector<group_tables> groups)
      : max_parallelism_(max_parallelism), first_(first), groups_(std::move(groups)) {}

  std::uint32_t max_parallelism() const override { return max_parallelism_; }

  result<void> write_to(keyed_group_sink& sink) override {
    if (done_) return error{"a keyed state snapshot was written twice"};
    done_ = true;
    // One key group at a time, walked in place (a sink that needs the neutral form collects
    // it); each group's tables are released once it is handed, so the task stops copying what
    // only this view held.
    for (std::uint32_t i = 0; i < groups_.size(); ++i) {
      const heap_group_walk walk(groups_[i]);
      auto r = walk.empty() ? success() : sink.walked_key_group(first_ + i, walk);
      groups_[i] = {};
      if (!r) {
        groups_.clear();
        return r;
      }
    }
    groups_.clear();
    return success();
  }

 private:
  std::uint32_t max_parallelism_;
  std::uint32_t first_;
  std::vector<group_tables> groups_;
  bool done_ = false;
};

}  // namespace

heap_keyed_state_backend::heap_keyed_state_backend(std::uint32_t max_parallelism,
                                                   key_group_range range)
    : keyed_state_backend(max_parallelism, range), groups_(range.size()) {}

std::optional<std::string> heap_keyed_state_backend::value_bytes(std::string_view state) const {
  const auto* t = table_of(group().values, state);
  if (!t) return std::nullopt;
  const auto* v = find(*t, current_key_);
  if (!v) return std::nullopt;
  return *v;
}

std::string& heap_keyed_state_backend::value_slot(std::string_view state) {
  return upsert(table_for(group().values, state), current_key_, copies_);
}

void heap_keyed_state_backend::set_value_bytes(std::string_view state, std::string_view bytes) {
  value_slot(state).assign(bytes);
}

std::int64_t heap_keyed_state_backend::add_to_value(std::string_view state, std::int64_t delta) {
  std::string& slot = value_slot(state);
  const std::int64_t v = (slot.empty() ? 0 : int64_of(state, slot)) + delta;
  // Eight bytes fit the string's own buffer: no allocation per record.
  slot = encode_int64_state(v);
  return v;
}

void heap_keyed_state_backend::clear_value(std::string_view state) {
  auto& values = group().values;
  auto s = values.find(state);
  // Nothing to remove copies nothing.
  if (s == values.end() || !find(*s->second, current_key_)) return;
  erase(s->second, current_key_, copies_);
  if (s->second->size == 0) values.erase(s);
}

std::optional<std::string> heap_keyed_state_backend::map_get_bytes(
    std::string_view state, std::string_view map_key) const {
  const auto* t = table_of(group().maps, state);
  if (!t) return std::nullopt;
  const auto* entries = find(*t, current_key_);
  if (!entries) return std::nullopt;
  auto e = entries->find(map_key);
  if (e == entries->end()) return std::nullopt;
  return e->second;
}

void heap_keyed_state_backend::map_put_bytes(std::string_view state, std::string_view map_key,
                                             std::string_view bytes) {
  auto& entries = upsert(table_for(group().maps, state), current_key_, copies_);
  auto e = entries.find(map_key);
  if (e != entries.end())
    e->second.assign(bytes);
  else
    entries.emplace(std::string(map_key), std::string(bytes));
}

void heap_keyed_state_backend::map_remove(std::string_view state, std::string_view map_key) {
  auto& maps = group().maps;
  auto s = maps.find(state);
  if (s == maps.end()) return;
  const auto* present = find(*s->second, current_key_);
  // Nothing to remove copies nothing.
  if (!present || present->find(map_key) == present->end()) return;
  if (present->size() == 1) {
    erase(s->second, current_key_, copies_);
    if (s->second->size == 0) maps.erase(s);
    return;
  }
  auto& entries = upsert(s->second, current_key_, copies_);
  entries.erase(entries.find(map_key));
}

std::vector<std::pair<std::string, std::string>> heap_keyed_state_backend::map_entries_bytes(
    std::string_view state) const {
  std::vector<std::pair<std::string, std::string>> out;
  const auto* t = table_of(group().maps, state);
  if (!t) return out;
  const auto* entries = find(*t, current_key_);
  if (!entries) return out;
  out.assign(entries->begin(), entries->end());
  return out;
}

keyed_snapshot_part heap_keyed_state_backend::snapshot() const {
  keyed_snapshot_part out;
  if (num_entries() <= ready_entries_max) {
    out.ready = neutral(max_parallelism_, range_.first, groups_);
    return out;
  }
  // Copies names and table references: every table is now shared, so the task's next write
  // to each copies its slot array first, and its next write to each bucket that bucket.
  out.deferred = std::make_shared<heap_deferred_snapshot>(max_parallelism_, range_.first, groups_);
  return out;
}

result<void> heap_keyed_state_backend::start_restore(
    const std::vector<keyed_files_restore>& files) {
  if (!files.empty()) return cannot_read_files();
  restoring_.assign(groups_.size(), heap_cow::group_tables{});
  return success();
}

result<void> heap_keyed_state_backend::add_restored_group(std::uint32_t group,
                                                          const key_group_state& state) {
  auto& g = restoring_[group - range_.first];
  for (const auto& [name, entries] : state.values)
    if (!entries.empty()) g.values.emplace(name, values_table(entries));
  for (const auto& [name, entries] : state.maps) {
    auto t = maps_table(entries);
    if (t->size > 0) g.maps.emplace(name, std::move(t));
  }
  return success();
}

result<void> heap_keyed_state_backend::finish_restore() {
  groups_ = std::move(restoring_);
  restoring_.clear();
  return success();
}

std::size_t heap_keyed_state_backend::num_entries() const {
  std::size_t n = 0;
  for (const auto& g : groups_) {
    for (const auto& [_, t] : g.values) n += t->size;
    for (const auto& [_, t] : g.maps) n += t->size;
  }
  return n;
}

std::size_t heap_keyed_state_backend::num_tables() const {
  std::size_t n = 0;
  for (const auto& g : groups_) n += g.values.size() + g.maps.size();
  return n;
}

std::size_t heap_keyed_state_backend::synchronous_snapshot_entries() const {
  const std::size_t entries = num_entries();
  return entries <= ready_entries_max ? entries : num_tables();
}

}  // namespace snapflow
