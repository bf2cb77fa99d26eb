#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/state/keyed_state_backend.hpp"

namespace snapflow {

namespace heap_cow {

// A block the backend shares with its snapshots: reference counted, never written while
// shared. Its own count rather than shared_ptr's: whether a block is shared must be read with
// acquire, so that a snapshot released on another thread has finished reading the block before
// the task thread writes it (shared_ptr::use_count is a relaxed read, which orders nothing).
template <class T>
class shared_block {
 public:
  shared_block() = default;
  template <class... A>
  static shared_block make(A&&... args) {
    shared_block s;
    s.b_ = new block(std::forward<A>(args)...);
    return s;
  }
  shared_block(const shared_block& o) : b_(o.b_) {
    // Relaxed: a new reference is made from one the caller holds, so the count is >= 1 and
    // the block cannot go meanwhile.
    if (b_) b_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  shared_block(shared_block&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  shared_block& operator=(shared_block o) noexcept {
    std::swap(b_, o.b_);
    return *this;
  }
  ~shared_block() {
    // acq_rel: this holder's reads of the block happen before whoever sees the count drop
    // (a writer's exclusive(), or the delete below).
    if (b_ && b_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b_;
  }

  explicit operator bool() const { return b_ != nullptr; }
  const T& operator*() const { return b_->value; }
  const T* operator->() const { return &b_->value; }
  // No other holder: the caller may write the block. A holder released concurrently on
  // another thread can only make this say false (a needless copy), never true too early.
  bool exclusive() const { return b_->refs.load(std::memory_order_acquire) == 1; }
  T& mutate() {
    assert(exclusive());
    return b_->value;
  }

 private:
  struct block {
    template <class... A>
    explicit block(A&&... args) : value(std::forward<A>(args)...) {}
    std::atomic<std::uint32_t> refs{1};
    T value;
  };
  block* b_ = nullptr;
};

// The entries whose keys hash to one slot of a table: a handful, searched in order.
template <class V>
struct bucket {
  std::vector<std::pair<std::uint64_t, V>> entries;
};

constexpr unsigned chunk_bits = 4;
constexpr std::size_t chunk_slots = std::size_t{1} << chunk_bits;

// A run of a table's slots, each empty or one bucket: what a write under a snapshot copies
// besides the bucket, so that a table's copy is of chunk references, not of every slot's.
template <class V>
struct chunk {
  std::array<shared_block<bucket<V>>, chunk_slots> slots;
};

// One named state of one key group: key -> V in 2^bits slots, chunk_slots to a chunk (a chunk
// may be missing while all its slots are empty). Copying a table copies chunk references.
template <class V>
struct table {
  std::vector<shared_block<chunk<V>>> chunks;
  unsigned bits = 0;
  std::size_t size = 0;  // entries over all buckets
};

using value_bytes = std::string;
using map_value = std::map<std::string, std::string, std::less<>>;
template <class V>
using table_ref = shared_block<table<V>>;

// One key group's states. Never shared: a snapshot copies it (names and table references).
struct group_tables {
  std::map<std::string, table_ref<value_bytes>, std::less<>> values;
  std::map<std::string, table_ref<map_value>, std::less<>> maps;
};

// What copy-on-write has copied on the task thread since the backend was made: the cost of
// writing while snapshots are alive.
struct copy_stats {
  std::uint64_t tables_cloned = 0;   // chunk arrays copied (references only)
  std::uint64_t chunks_cloned = 0;   // chunks copied (bucket references only)
  std::uint64_t buckets_cloned = 0;  // buckets copied, entries included
  std::uint64_t entries_copied = 0;  // entries in those buckets (rehashes of shared ones too)
  std::uint64_t bytes_copied = 0;    // their payload (keys, values, map keys), and references
};

}  // namespace heap_cow

// Flink's HashMapStateBackend ("hashmap"): keyed state in memory, per owned key group and named
// state a hash table of copy-on-write buckets. A snapshot's synchronous part copies references
// to the tables (one per key group and state), never an entry; the snapshot writer turns them
// into the neutral form on its own thread while the task goes on. A write to a table, chunk or
// bucket a live snapshot still holds copies it first (references for a table or chunk, entries
// for a bucket), so a checkpoint during which 1% of keys change copies a few percent.
class heap_keyed_state_backend final : public keyed_state_backend {
 public:
  // A state of at most this many keys is copied in the synchronous part: cheaper than a
  // hand-off to the snapshot writer, and it keeps small states inline.
  static constexpr std::size_t ready_entries_max = 1024;

  heap_keyed_state_backend(std::uint32_t max_parallelism, key_group_range range);

  std::optional<std::string> value_bytes(std::string_view state) const override;
  void set_value_bytes(std::string_view state, std::string_view bytes) override;
  void clear_value(std::string_view state) override;
  std::int64_t add_to_value(std::string_view state, std::int64_t delta) override;

  std::optional<std::string> map_get_bytes(std::string_view state,
                                           std::string_view map_key) const override;
  void map_put_bytes(std::string_view state, std::string_view map_key,
                     std::string_view bytes) override;
  void map_remove(std::string_view state, std::string_view map_key) override;
  std::vector<std::pair<std::string, std::string>> map_entries_bytes(
      std::string_view state) const override;

  keyed_snapshot_part snapshot() const override;

  std::size_t num_entries() const override;
  // The table references a snapshot copies, or the entries when it copies them (small state).
  std::size_t synchronous_snapshot_entries() const override;

  const heap_cow::copy_stats& copies() const { return copies_; }

 protected:
  // A restore builds the tables group by group aside and swaps them in at the end.
  result<void> start_restore(const std::vector<keyed_files_restore>& files) override;
  result<void> add_restored_group(std::uint32_t group, const key_group_state& state) override;
  result<void> finish_restore() override;

 private:
  heap_cow::group_tables& group() { return groups_[current_group() - range_.first]; }
  const heap_cow::group_tables& group() const { return groups_[current_group() - range_.first]; }
  // The current key's value, created empty when it has none.
  std::string& value_slot(std::string_view state);
  std::size_t num_tables() const;

  std::vector<heap_cow::group_tables> groups_;  // index: key group - range.first
  std::vector<heap_cow::group_tables> restoring_;  // the same, while a restore builds them
  heap_cow::copy_stats copies_;
};

}  // namespace snapflow
