#include "engine/state/rocksdb_keyed_state_backend.hpp"

#include <stdexcept>
#include <system_error>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

namespace snapflow {

namespace {

constexpr char value_kind = 1;
constexpr char map_kind = 2;
constexpr std::size_t group_bytes = 2;
// Key groups are encoded in two bytes; one past the last (a range delete's end) must fit too.
constexpr std::uint32_t max_encodable_parallelism = 0x8000;

// Small on purpose: state beyond these spills to disk, which is the point of this backend. A
// subtask's memory for state is about write_buffer_bytes * max_write_buffers + cache_bytes.
constexpr std::size_t write_buffer_bytes = 4 << 20;
constexpr int max_write_buffers = 2;
constexpr std::size_t cache_bytes = 8 << 20;

void append_be(std::string& out, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = bytes; i-- > 0;) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t read_be(std::string_view in, std::size_t at, std::size_t bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

std::string group_prefix(std::uint32_t group) {
  std::string out;
  append_be(out, group, group_bytes);
  return out;
}

// group | kind | name length | name | key
void build_key(std::string& out, std::uint32_t group, char kind, std::string_view state,
               std::uint64_t key) {
  out.clear();
  append_be(out, group, group_bytes);
  out.push_back(kind);
  append_be(out, state.size(), 4);
  out.append(state);
  append_be(out, key, 8);
}

std::string encode_value(std::int64_t v) {
  std::string out;
  append_be(out, static_cast<std::uint64_t>(v), 8);
  return out;
}

std::optional<std::int64_t> decode_value(std::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  return static_cast<std::int64_t>(read_be(bytes, 0, 8));
}

// One stored entry, taken apart.
struct parsed_key {
  std::uint32_t group = 0;
  char kind = 0;
  std::string_view state;
  std::uint64_t key = 0;
  std::string_view map_key;
};

std::optional<parsed_key> parse_key(std::string_view k) {
  constexpr std::size_t fixed = group_bytes + 1 + 4;
  if (k.size() < fixed + 8) return std::nullopt;
  parsed_key p;
  p.group = static_cast<std::uint32_t>(read_be(k, 0, group_bytes));
  p.kind = k[group_bytes];
  const std::uint64_t name_size = read_be(k, group_bytes + 1, 4);
  if (name_size > k.size() - fixed - 8) return std::nullopt;
  p.state = k.substr(fixed, name_size);
  p.key = read_be(k, fixed + name_size, 8);
  p.map_key = k.substr(fixed + name_size + 8);
  if (p.kind == value_kind ? !p.map_key.empty() : p.kind != map_kind) return std::nullopt;
  return p;
}

std::string_view view(const rocksdb::Slice& s) { return {s.data(), s.size()}; }

rocksdb::Options store_options() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.error_if_exists = true;
  o.write_buffer_size = write_buffer_bytes;
  o.max_write_buffer_number = max_write_buffers;
  o.max_background_jobs = 2;
  o.max_open_files = 256;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o.keep_log_file_num = 1;
  o.max_log_file_size = 1 << 20;
  // The folder is thrown away when the task ends: nothing is ever recovered from it.
  o.avoid_flush_during_shutdown = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(cache_bytes);
  table.cache_index_and_filter_blocks = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return o;
}

rocksdb::WriteOptions write_options() {
  rocksdb::WriteOptions w;
  // Recovery comes from checkpoints, never from this folder: a write-ahead log buys nothing.
  w.disableWAL = true;
  return w;
}

}  // namespace

class rocksdb_keyed_state_backend::store {
 public:
  store(std::unique_ptr<rocksdb::DB> db, std::filesystem::path folder)
      : db_(std::move(db)), folder_(std::move(folder)) {}
  ~store() {
    if (db_) {
      (void)db_->Close();  // nothing to keep: the folder goes next
      db_.reset();
    }
    std::error_code ec;
    std::filesystem::remove_all(folder_, ec);
  }
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  rocksdb::DB& db() { return *db_; }
  const std::filesystem::path& folder() const { return folder_; }

  [[noreturn]] void fail(const char* what, const rocksdb::Status& s) const {
    throw std::runtime_error(std::string("rocksdb state in ") + folder_.string() + ": " + what +
                             " failed: " + s.ToString());
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::filesystem::path folder_;
};

namespace {

// A RocksDB snapshot of the store, read into the neutral form off the task thread.
class rocksdb_deferred_snapshot final : public deferred_keyed_snapshot {
 public:
  rocksdb_deferred_snapshot(std::shared_ptr<rocksdb_keyed_state_backend::store> s,
                            std::uint32_t max_parallelism)
      : store_(std::move(s)),
        snapshot_(store_->db().GetSnapshot()),
        max_parallelism_(max_parallelism) {}
  ~rocksdb_deferred_snapshot() override { release(); }

  result<keyed_state_snapshot> materialize() override {
    if (snapshot_ == nullptr) return error{"a rocksdb keyed snapshot was materialised twice"};
    auto out = read();
    release();
    return out;
  }

 private:
  result<keyed_state_snapshot> read() const {
    keyed_state_snapshot out;
    out.max_parallelism = max_parallelism_;
    rocksdb::ReadOptions r;
    r.snapshot = snapshot_;
    r.fill_cache = false;  // one pass over everything: keep the task's working set cached
    std::unique_ptr<rocksdb::Iterator> it(store_->db().NewIterator(r));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto key = parse_key(view(it->key()));
      auto v = decode_value(view(it->value()));
      if (!key || !v)
        return error{"rocksdb state in " + store_->folder().string() +
                     " holds an entry this backend did not write"};
      key_group_state& g = out.key_groups[key->group];
      if (key->kind == value_kind)
        entry(g.values, key->state)[key->key] = *v;
      else
        entry(g.maps, key->state)[key->key].emplace(std::string(key->map_key), *v);
    }
    if (!it->status().ok())
      return error{"reading rocksdb state in " + store_->folder().string() +
                   " for a checkpoint failed: " + it->status().ToString()};
    return out;
  }

  // The state named `name` in `states`, made empty when it is not there yet.
  template <class States>
  static typename States::mapped_type& entry(States& states, std::string_view name) {
    auto s = states.find(name);
    if (s == states.end())
      s = states.emplace(std::string(name), typename States::mapped_type{}).first;
    return s->second;
  }

  void release() {
    if (snapshot_ == nullptr) return;
    store_->db().ReleaseSnapshot(snapshot_);
    snapshot_ = nullptr;
  }

  std::shared_ptr<rocksdb_keyed_state_backend::store> store_;
  const rocksdb::Snapshot* snapshot_;
  std::uint32_t max_parallelism_;
};

}  // namespace

result<std::unique_ptr<rocksdb_keyed_state_backend>> rocksdb_keyed_state_backend::open(
    std::uint32_t max_parallelism, key_group_range range, const std::filesystem::path& folder) {
  if (max_parallelism > max_encodable_parallelism)
    return error{"the rocksdb state backend supports a max parallelism of at most " +
                 std::to_string(max_encodable_parallelism) + " (got " +
                 std::to_string(max_parallelism) + ")"};
  if (folder.empty() || !folder.has_parent_path())
    return error{"the rocksdb state backend needs a working folder inside a local root (got '" +
                 folder.string() + "')"};
  // A leftover of an earlier attempt of the same name whose process died.
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
  if (ec)
    return error{"cannot clear the rocksdb working folder " + folder.string() + ": " +
                 ec.message()};
  std::filesystem::create_directories(folder.parent_path(), ec);
  if (ec) return error{"cannot create " + folder.parent_path().string() + ": " + ec.message()};
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(store_options(), folder.string(), &raw);
  if (!s.ok()) {
    std::filesystem::remove_all(folder, ec);
    return error{"cannot open rocksdb state in " + folder.string() + ": " + s.ToString()};
  }
  auto st = std::make_shared<store>(std::unique_ptr<rocksdb::DB>(raw), folder);
  return std::unique_ptr<rocksdb_keyed_state_backend>(
      new rocksdb_keyed_state_backend(max_parallelism, range, std::move(st)));
}

rocksdb_keyed_state_backend::rocksdb_keyed_state_backend(std::uint32_t max_parallelism,
                                                         key_group_range range,
                                                         std::shared_ptr<store> db)
    : keyed_state_backend(max_parallelism, range), store_(std::move(db)) {}

rocksdb_keyed_state_backend::~rocksdb_keyed_state_backend() = default;

const std::filesystem::path& rocksdb_keyed_state_backend::folder() const {
  return store_->folder();
}

const std::string& rocksdb_keyed_state_backend::key_of(char kind, std::string_view state) const {
  build_key(key_, current_group(), kind, state, current_key_);
  return key_;
}

const std::string& rocksdb_keyed_state_backend::map_key_of(std::string_view state,
                                                           std::string_view map_key) const {
  build_key(key_, current_group(), map_kind, state, current_key_);
  key_.append(map_key);
  return key_;
}

std::optional<std::int64_t> rocksdb_keyed_state_backend::get(const std::string& key) const {
  rocksdb::PinnableSlice out;
  const rocksdb::Status s =
      store_->db().Get(rocksdb::ReadOptions(), store_->db().DefaultColumnFamily(), key, &out);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) store_->fail("a read", s);
  auto v = decode_value(view(out));
  if (!v) store_->fail("a read", rocksdb::Status::Corruption("a value is not 8 bytes"));
  return v;
}

void rocksdb_keyed_state_backend::put(const std::string& key, std::int64_t v) {
  const rocksdb::Status s = store_->db().Put(write_options(), key, encode_value(v));
  if (!s.ok()) store_->fail("a write", s);
}

void rocksdb_keyed_state_backend::remove(const std::string& key) {
  const rocksdb::Status s = store_->db().Delete(write_options(), key);
  if (!s.ok()) store_->fail("a delete", s);
}

std::optional<std::int64_t> rocksdb_keyed_state_backend::value(std::string_view state) const {
  return get(key_of(value_kind, state));
}

void rocksdb_keyed_state_backend::set_value(std::string_view state, std::int64_t v) {
  put(key_of(value_kind, state), v);
}

std::int64_t rocksdb_keyed_state_backend::add_to_value(std::string_view state,
                                                       std::int64_t delta) {
  const std::string& key = key_of(value_kind, state);
  const std::int64_t v = get(key).value_or(0) + delta;
  put(key, v);
  return v;
}

void rocksdb_keyed_state_backend::clear_value(std::string_view state) {
  remove(key_of(value_kind, state));
}

std::optional<std::int64_t> rocksdb_keyed_state_backend::map_get(std::string_view state,
                                                                 std::string_view map_key) const {
  return get(map_key_of(state, map_key));
}

void rocksdb_keyed_state_backend::map_put(std::string_view state, std::string_view map_key,
                                          std::int64_t v) {
  put(map_key_of(state, map_key), v);
}

void rocksdb_keyed_state_backend::map_remove(std::string_view state, std::string_view map_key) {
  remove(map_key_of(state, map_key));
}

std::vector<std::pair<std::string, std::int64_t>> rocksdb_keyed_state_backend::map_entries(
    std::string_view state) const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const std::string prefix = key_of(map_kind, state);
  std::unique_ptr<rocksdb::Iterator> it(store_->db().NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    auto v = decode_value(view(it->value()));
    if (!v) store_->fail("a read", rocksdb::Status::Corruption("a value is not 8 bytes"));
    out.emplace_back(std::string(view(it->key()).substr(prefix.size())), *v);
  }
  if (!it->status().ok()) store_->fail("a scan", it->status());
  return out;
}

keyed_snapshot_part rocksdb_keyed_state_backend::snapshot() const {
  keyed_snapshot_part out;
  out.deferred = std::make_shared<rocksdb_deferred_snapshot>(store_, max_parallelism_);
  return out;
}

result<void> rocksdb_keyed_state_backend::restore(
    const std::vector<keyed_state_snapshot>& parts) {
  auto owned = owned_groups(parts);
  if (!owned) return owned.err();
  // Replaces: the owned key groups are emptied first, with one range delete.
  rocksdb::WriteBatch clear;
  rocksdb::Status s = clear.DeleteRange(group_prefix(range_.first), group_prefix(range_.last + 1));
  if (s.ok()) s = store_->db().Write(write_options(), &clear);
  if (!s.ok())
    return error{"restoring rocksdb state in " + folder().string() + ": " + s.ToString()};
  std::string key;
  for (const auto& [group, state] : *owned) {
    rocksdb::WriteBatch batch;
    for (const auto& [name, keys] : state->values)
      for (const auto& [k, v] : keys) {
        build_key(key, group, value_kind, name, k);
        batch.Put(key, encode_value(v));
      }
    for (const auto& [name, keys] : state->maps)
      for (const auto& [k, entries] : keys)
        for (const auto& [map_key, v] : entries) {
          build_key(key, group, map_kind, name, k);
          key.append(map_key);
          batch.Put(key, encode_value(v));
        }
    s = store_->db().Write(write_options(), &batch);
    if (!s.ok())
      return error{"restoring rocksdb state in " + folder().string() + ": " + s.ToString()};
  }
  return success();
}

std::size_t rocksdb_keyed_state_backend::num_entries() const {
  // Keys with any state: each value, and each (map state, key) however many entries it has.
  std::size_t n = 0;
  std::string last_map;  // the previous map entry's key without its map key
  std::unique_ptr<rocksdb::Iterator> it(store_->db().NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto key = parse_key(view(it->key()));
    if (!key) continue;
    if (key->kind == value_kind) {
      ++n;
      continue;
    }
    const std::string_view head = view(it->key()).substr(0, it->key().size() - key->map_key.size());
    if (head != last_map) {
      ++n;
      last_map.assign(head);
    }
  }
  if (!it->status().ok()) store_->fail("a scan", it->status());
  return n;
}

}  // namespace snapflow
