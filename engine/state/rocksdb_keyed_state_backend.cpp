#include "engine/state/rocksdb_keyed_state_backend.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <system_error>

#include "engine/checkpoint/posix_io.hpp"
#include "engine/state/file_copy.hpp"
#include "engine/state/int64_state_value.hpp"
#include "engine/state/rocksdb_sst_ingestion.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/file_checksum.h>
#include <rocksdb/metadata.h>
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

// Memory for state per instance: the block cache (default_rocksdb_block_cache_bytes unless
// the worker sets another) plus two write buffers of a quarter of it each (1..64 MiB), as
// Flink splits one managed-memory budget between them; the rest is on disk. Large enough
// buffers that, at a checkpoint every second or so, most level-0 files come from the
// checkpoints' own flushes: each extra flush brings a compaction into level 1 closer, and
// those compactions (rewriting level 1) are most of what an incremental checkpoint stores.
constexpr std::size_t min_write_buffer_bytes = 1 << 20;
constexpr std::size_t max_write_buffer_bytes = 64 << 20;
constexpr int max_write_buffers = 2;

std::size_t write_buffer_bytes(std::size_t cache_bytes) {
  return std::clamp(cache_bytes / 4, min_write_buffer_bytes, max_write_buffer_bytes);
}

// An instance opened only to be read through once (a restore's scratch copy) caches little.
constexpr std::size_t scratch_cache_bytes = 8 << 20;

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

rocksdb::Options store_options(std::size_t cache_bytes) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.error_if_exists = true;
  o.write_buffer_size = write_buffer_bytes(cache_bytes);
  o.max_write_buffer_number = max_write_buffers;
  // Level sizes follow the data (the last level holds most of it): less rewritten per byte
  // written than fixed sizes, and RocksDB's default from version 8.4 on.
  o.level_compaction_dynamic_level_bytes = true;
  o.max_background_jobs = 2;
  o.max_open_files = 256;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o.keep_log_file_num = 1;
  o.max_log_file_size = 1 << 20;
  // The folder is thrown away when the task ends: nothing is ever recovered from it.
  o.avoid_flush_during_shutdown = true;
  // A CRC-32C of each SST file as RocksDB writes it, kept in the MANIFEST: an incremental
  // checkpoint links new files into shared storage without reading them back for their checksum.
  o.file_checksum_gen_factory = rocksdb::GetFileChecksumGenCrc32cFactory();
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(cache_bytes);
  table.cache_index_and_filter_blocks = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return o;
}

// Options to open an instance rebuilt from a checkpoint's files.
rocksdb::Options reopen_options(std::size_t cache_bytes) {
  rocksdb::Options o = store_options(cache_bytes);
  o.create_if_missing = false;
  o.error_if_exists = false;
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
    close();  // nothing to keep: the folder goes next
    std::error_code ec;
    std::filesystem::remove_all(folder_, ec);
  }
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  rocksdb::DB& db() { return *db_; }
  bool is_open() const { return db_ != nullptr; }
  const std::filesystem::path& folder() const { return folder_; }
  // Where the instance's own files are.
  std::filesystem::path db_folder() const { return folder_ / "db"; }
  // Closes the instance (a restore replaces it; nothing else may use it meanwhile).
  void close() {
    if (!db_) return;
    (void)db_->Close();
    db_.reset();
  }
  void reopen(std::unique_ptr<rocksdb::DB> db) {
    close();
    db_ = std::move(db);
  }

  [[noreturn]] void fail(const char* what, const rocksdb::Status& s) const {
    throw std::runtime_error(std::string("rocksdb state in ") + folder_.string() + ": " + what +
                             " failed: " + s.ToString());
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::filesystem::path folder_;
};

class rocksdb_keyed_state_backend::stored_files {
 public:
  using files = std::map<std::string, state_handle>;  // by local name

  files base() const {
    std::lock_guard lock(mutex_);
    return base_;
  }
  void record(checkpoint_id id, files stored) {
    std::lock_guard lock(mutex_);
    if (id <= confirmed_) return;  // a newer checkpoint completed meanwhile: never a base
    pending_[id] = std::move(stored);
  }
  // The base becomes what `id` stored; older checkpoints' sets are dropped (subsumed). A
  // checkpoint this backend stored nothing for (a savepoint) leaves no base: what the old one
  // named may be released by the coordinator any time now.
  void confirm(checkpoint_id id) {
    std::lock_guard lock(mutex_);
    if (id <= confirmed_) return;
    confirmed_ = id;
    auto it = pending_.find(id);
    if (it != pending_.end())
      base_ = std::move(it->second);
    else
      base_.clear();
    pending_.erase(pending_.begin(), pending_.upper_bound(id));
  }

 private:
  mutable std::mutex mutex_;
  std::map<checkpoint_id, files> pending_;
  files base_;
  checkpoint_id confirmed_ = 0;
};

namespace {

std::string random_hex() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(random()));
  return hex;
}

bool is_sst(std::string_view name) { return name.ends_with(".sst"); }

// A name of a file in an instance's folder as a checkpoint's manifest may give it: one plain
// component (a hostile manifest must not write outside the folder it is rebuilt in).
bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// Creates `folder` when missing (the coordinator may leave it to the first task writing into
// it), its parent fsynced so that the folder itself survives a crash.
result<void> make_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  if (std::filesystem::is_directory(folder, ec)) return success();
  std::filesystem::create_directories(folder, ec);
  if (ec) return error{"cannot create " + folder.string() + ": " + ec.message()};
  return posix_io::fsync_dir(folder.parent_path());
}

// The CRC-32C RocksDB recorded for a file as it wrote it (file_checksum_gen_factory), if any:
// files written before that option, and files other than SSTs, have none.
std::optional<std::uint32_t> recorded_checksum(const rocksdb::LiveFileStorageInfo& f) {
  if (f.file_checksum_func_name != rocksdb::kStandardDbFileChecksumFuncName ||
      f.file_checksum.size() != 4)
    return std::nullopt;
  return static_cast<std::uint32_t>(read_be(f.file_checksum, 0, 4));  // big-endian
}

// Keeps RocksDB from deleting files (obsolete SSTs after a compaction, old MANIFESTs) while a
// snapshot's files are still to be stored; counted by RocksDB, so snapshots may overlap.
class file_deletions_hold {
 public:
  explicit file_deletions_hold(std::shared_ptr<rocksdb_keyed_state_backend::store> s)
      : store_(std::move(s)) {}
  ~file_deletions_hold() { release(); }
  file_deletions_hold(const file_deletions_hold&) = delete;
  file_deletions_hold& operator=(const file_deletions_hold&) = delete;

  rocksdb::Status acquire() {
    rocksdb::Status s = store_->db().DisableFileDeletions();
    held_ = s.ok();
    return s;
  }
  void release() {
    if (!held_) return;
    held_ = false;
    // Not forced: only this hold's count goes; a failure leaves the files until the instance
    // closes, which is all it can cost.
    if (store_->is_open()) (void)store_->db().EnableFileDeletions(/*force=*/false);
  }

 private:
  std::shared_ptr<rocksdb_keyed_state_backend::store> store_;
  bool held_ = false;
};

// The files of the instance as they were at the barrier (Flink's RocksIncrementalSnapshotStrategy,
// without its local hard-link step): the task thread flushed the memtables and listed the live
// files with file deletions held; storing them happens off the task thread.
class rocksdb_incremental_snapshot final : public incremental_keyed_snapshot {
 public:
  rocksdb_incremental_snapshot(std::shared_ptr<rocksdb_keyed_state_backend::store> s,
                               std::shared_ptr<rocksdb_keyed_state_backend::stored_files> stored,
                               checkpoint_id id, std::vector<rocksdb::LiveFileStorageInfo> files,
                               std::unique_ptr<file_deletions_hold> hold, keyed_state_files scope)
      : store_(std::move(s)),
        stored_(std::move(stored)),
        id_(id),
        files_(std::move(files)),
        hold_(std::move(hold)),
        base_(stored_->base()),
        scope_(std::move(scope)) {
    std::sort(files_.begin(), files_.end(), [](const auto& a, const auto& b) {
      return a.relative_filename < b.relative_filename;
    });
  }

  result<stored> store(const std::filesystem::path& shared_folder,
                       const std::filesystem::path& checkpoint_folder,
                       const std::string& name_prefix) override {
    if (done_) return error{"a rocksdb incremental snapshot was stored twice"};
    done_ = true;
    std::vector<std::filesystem::path> created;
    auto out = store_files(shared_folder, checkpoint_folder, name_prefix, created);
    if (!out) {
      std::error_code ec;
      for (const auto& f : created) std::filesystem::remove(f, ec);
    }
    hold_->release();
    return out;
  }

 private:
  // One file of the instance into `to`, durably. SST files never change once written: a link
  // where the filesystem allows it, not even read when RocksDB gave its checksum. A MANIFEST
  // (and a write-ahead log) may have grown since the barrier: only its size then is copied.
  // CURRENT may have been replaced: its content then is written.
  static result<file_copy::copied> store_file(const rocksdb::LiveFileStorageInfo& f,
                                              const std::filesystem::path& to) {
    const std::filesystem::path from = std::filesystem::path(f.directory) / f.relative_filename;
    if (!f.replacement_contents.empty()) return file_copy::write_durably(to, f.replacement_contents);
    if (f.file_type != rocksdb::kTableFile) return file_copy::copy_durably(from, to, f.size);
    if (auto crc = recorded_checksum(f)) return file_copy::link_or_copy_known(from, to, f.size, *crc);
    return file_copy::link_or_copy_durably(from, to);
  }

  result<stored> store_files(const std::filesystem::path& shared_folder,
                             const std::filesystem::path& checkpoint_folder,
                             const std::string& name_prefix,
                             std::vector<std::filesystem::path>& created) {
    stored out;
    out.manifest = scope_;
    rocksdb_keyed_state_backend::stored_files::files ssts;
    bool wrote_shared = false;
    bool wrote_own = false;
    // Stores file `f` into `folder` as `stored_name` (the folder made at its first file),
    // counted as written and as created (removed if the store fails).
    const auto store_into = [&](const std::filesystem::path& folder, bool& made,
                                const rocksdb::LiveFileStorageInfo& f,
                                const std::string& stored_name,
                                handle_sharing sharing) -> result<state_handle> {
      if (!made)
        if (auto r = make_folder(folder); !r) return r.err();
      made = true;
      created.push_back(folder / stored_name);
      auto copied = store_file(f, created.back());
      if (!copied) return copied.err();
      out.written_size += copied->size;
      return state_handle{stored_name, copied->size, copied->checksum, std::nullopt, sharing};
    };
    for (const auto& f : files_) {
      const std::string& name = f.relative_filename;
      if (!is_plain_file_name(name))
        return error{"rocksdb in " + store_->folder().string() + " listed a live file '" + name +
                     "' that is no plain file name"};
      state_handle handle;
      if (f.file_type == rocksdb::kTableFile) {
        if (auto reused = base_.find(name); reused != base_.end()) {
          handle = reused->second;
          handle.sharing = handle_sharing::shared_reused;
        } else {
          auto copied = store_into(shared_folder, wrote_shared, f,
                                   name_prefix + "-" + random_hex() + "-" + name,
                                   handle_sharing::shared_new);
          if (!copied) return copied.err();
          handle = std::move(*copied);
        }
        ssts.emplace(name, handle);
      } else {
        auto copied = store_into(checkpoint_folder, wrote_own, f, name_prefix + "-rocksdb-" + name,
                                 handle_sharing::exclusive);
        if (!copied) return copied.err();
        handle = std::move(*copied);
      }
      out.full_size += handle.size;
      out.manifest.files.push_back(
          {name, handle.path, handle.size, handle.checksum, handle.is_shared()});
      out.handles.push_back(std::move(handle));
    }
    if (wrote_shared)
      if (auto r = posix_io::fsync_dir(shared_folder); !r) return r.err();
    if (wrote_own)
      if (auto r = posix_io::fsync_dir(checkpoint_folder); !r) return r.err();
    stored_->record(id_, std::move(ssts));
    return out;
  }

  std::shared_ptr<rocksdb_keyed_state_backend::store> store_;  // keeps the instance open
  std::shared_ptr<rocksdb_keyed_state_backend::stored_files> stored_;
  checkpoint_id id_;
  std::vector<rocksdb::LiveFileStorageInfo> files_;
  std::unique_ptr<file_deletions_hold> hold_;
  rocksdb_keyed_state_backend::stored_files::files base_;  // as confirmed at the barrier
  keyed_state_files scope_;
  bool done_ = false;
};

// The state named `name` in `states`, made empty when it is not there yet.
template <class States>
typename States::mapped_type& entry(States& states, std::string_view name) {
  auto s = states.find(name);
  if (s == states.end())
    s = states.emplace(std::string(name), typename States::mapped_type{}).first;
  return s->second;
}

// Every entry of `db` (as `r` sees it) in the neutral form, one key group at a time: keys start
// with the key group in big-endian, so one pass in key order meets the groups in ascending
// order, each whole before the next. Holds one group's entries at a time.
result<void> read_groups(rocksdb::DB& db, rocksdb::ReadOptions r,
                         const std::filesystem::path& folder, keyed_group_sink& sink) {
  r.fill_cache = false;  // one pass over everything: keep the task's working set cached
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(r));
  key_group_state g;
  std::optional<std::uint32_t> current;
  const auto hand = [&]() -> result<void> {
    if (!current || g.empty()) return success();
    auto handed = sink.key_group(*current, g);
    g = key_group_state{};
    return handed;
  };
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto key = parse_key(view(it->key()));
    if (!key)
      return error{"rocksdb state in " + folder.string() +
                   " holds an entry this backend did not write"};
    if (current != key->group) {
      if (auto r = hand(); !r) return r;
      current = key->group;
    }
    std::string value(view(it->value()));
    if (key->kind == value_kind)
      entry(g.values, key->state)[key->key] = std::move(value);
    else
      entry(g.maps, key->state)[key->key].emplace(std::string(key->map_key), std::move(value));
  }
  if (!it->status().ok())
    return error{"reading rocksdb state in " + folder.string() + " failed: " +
                 it->status().ToString()};
  return hand();
}

// The whole of `db` in the neutral form (a restore's scratch instance).
result<keyed_state_snapshot> read_neutral(rocksdb::DB& db, rocksdb::ReadOptions r,
                                          std::uint32_t max_parallelism,
                                          const std::filesystem::path& folder) {
  keyed_state_snapshot out;
  out.max_parallelism = max_parallelism;
  keyed_snapshot_collector sink(out);
  if (auto read = read_groups(db, std::move(r), folder, sink); !read) return read.err();
  return out;
}

// A RocksDB snapshot of the store, streamed in key order off the task thread.
class rocksdb_deferred_snapshot final : public deferred_keyed_snapshot {
 public:
  rocksdb_deferred_snapshot(std::shared_ptr<rocksdb_keyed_state_backend::store> s,
                            std::uint32_t max_parallelism)
      : store_(std::move(s)),
        snapshot_(store_->db().GetSnapshot()),
        max_parallelism_(max_parallelism) {}
  ~rocksdb_deferred_snapshot() override { release(); }

  std::uint32_t max_parallelism() const override { return max_parallelism_; }

  result<void> write_to(keyed_group_sink& sink) override {
    if (snapshot_ == nullptr) return error{"a rocksdb keyed snapshot was written twice"};
    rocksdb::ReadOptions r;
    r.snapshot = snapshot_;
    auto out = read_groups(store_->db(), r, store_->folder(), sink);
    release();
    return out;
  }

 private:
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
    std::uint32_t max_parallelism, key_group_range range, const std::filesystem::path& folder,
    bool incremental, std::size_t block_cache_bytes) {
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
  std::filesystem::create_directories(folder, ec);
  if (ec) return error{"cannot create " + folder.string() + ": " + ec.message()};
  auto st = std::make_shared<store>(nullptr, folder);  // removes the folder if opening fails
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::Open(store_options(block_cache_bytes), st->db_folder().string(), &raw);
  if (!s.ok())
    return error{"cannot open rocksdb state in " + folder.string() + ": " + s.ToString()};
  st->reopen(std::unique_ptr<rocksdb::DB>(raw));
  return std::unique_ptr<rocksdb_keyed_state_backend>(
      new rocksdb_keyed_state_backend(max_parallelism, range, std::move(st), incremental,
                                      block_cache_bytes));
}

rocksdb_keyed_state_backend::rocksdb_keyed_state_backend(std::uint32_t max_parallelism,
                                                         key_group_range range,
                                                         std::shared_ptr<store> db,
                                                         bool incremental,
                                                         std::size_t block_cache_bytes)
    : keyed_state_backend(max_parallelism, range),
      store_(std::move(db)),
      stored_(std::make_shared<stored_files>()),
      incremental_(incremental),
      block_cache_bytes_(block_cache_bytes),
      sst_file_bytes_(rocksdb_sst_ingestion::default_file_bytes) {}

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

std::optional<std::string> rocksdb_keyed_state_backend::get(const std::string& key) const {
  rocksdb::PinnableSlice out;
  const rocksdb::Status s =
      store_->db().Get(rocksdb::ReadOptions(), store_->db().DefaultColumnFamily(), key, &out);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) store_->fail("a read", s);
  return std::string(view(out));
}

void rocksdb_keyed_state_backend::put(const std::string& key, std::string_view bytes) {
  const rocksdb::Status s =
      store_->db().Put(write_options(), key, rocksdb::Slice(bytes.data(), bytes.size()));
  if (!s.ok()) store_->fail("a write", s);
}

void rocksdb_keyed_state_backend::remove(const std::string& key) {
  const rocksdb::Status s = store_->db().Delete(write_options(), key);
  if (!s.ok()) store_->fail("a delete", s);
}

std::optional<std::string> rocksdb_keyed_state_backend::value_bytes(
    std::string_view state) const {
  return get(key_of(value_kind, state));
}

void rocksdb_keyed_state_backend::set_value_bytes(std::string_view state,
                                                  std::string_view bytes) {
  put(key_of(value_kind, state), bytes);
}

std::int64_t rocksdb_keyed_state_backend::add_to_value(std::string_view state,
                                                       std::int64_t delta) {
  const std::string& key = key_of(value_kind, state);
  const auto old = get(key);
  const std::int64_t v = (old ? int64_of(state, *old) : 0) + delta;
  put(key, encode_int64_state(v));
  return v;
}

void rocksdb_keyed_state_backend::clear_value(std::string_view state) {
  remove(key_of(value_kind, state));
}

std::optional<std::string> rocksdb_keyed_state_backend::map_get_bytes(
    std::string_view state, std::string_view map_key) const {
  return get(map_key_of(state, map_key));
}

void rocksdb_keyed_state_backend::map_put_bytes(std::string_view state, std::string_view map_key,
                                                std::string_view bytes) {
  put(map_key_of(state, map_key), bytes);
}

void rocksdb_keyed_state_backend::map_remove(std::string_view state, std::string_view map_key) {
  remove(map_key_of(state, map_key));
}

std::vector<std::pair<std::string, std::string>> rocksdb_keyed_state_backend::map_entries_bytes(
    std::string_view state) const {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string prefix = key_of(map_kind, state);
  std::unique_ptr<rocksdb::Iterator> it(store_->db().NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next())
    out.emplace_back(std::string(view(it->key()).substr(prefix.size())),
                     std::string(view(it->value())));
  if (!it->status().ok()) store_->fail("a scan", it->status());
  return out;
}

keyed_snapshot_part rocksdb_keyed_state_backend::snapshot() const {
  keyed_snapshot_part out;
  out.deferred = std::make_shared<rocksdb_deferred_snapshot>(store_, max_parallelism_);
  return out;
}

result<void> rocksdb_keyed_state_backend::clear_owned() {
  // A restore replaces: the owned key groups are emptied first, with one range delete. A fresh
  // instance (the usual restore) holds nothing there and gets none, so that the ingested files
  // can go straight to the last level, overlapping nothing.
  const std::string first = group_prefix(range_.first);
  const std::string end = group_prefix(range_.last + 1);
  std::unique_ptr<rocksdb::Iterator> it(store_->db().NewIterator(rocksdb::ReadOptions()));
  it->Seek(first);
  const bool holds_any = it->Valid() && view(it->key()) < end;
  rocksdb::Status s = it->status();
  it.reset();
  if (s.ok() && holds_any) {
    rocksdb::WriteBatch clear;
    s = clear.DeleteRange(first, end);
    if (s.ok()) s = store_->db().Write(write_options(), &clear);
  }
  if (!s.ok())
    return error{"restoring rocksdb state in " + folder().string() + ": " + s.ToString()};
  return success();
}

namespace {

// The entries of `states` in the order of their keys: a key holds the name's length before the
// name, so shorter names come first, then bytewise.
template <class States>
std::vector<const typename States::value_type*> in_key_order(const States& states) {
  std::vector<const typename States::value_type*> out;
  out.reserve(states.size());
  for (const auto& s : states) out.push_back(&s);
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    return a->first.size() != b->first.size() ? a->first.size() < b->first.size()
                                              : a->first < b->first;  // bytewise: char_traits
  });
  return out;
}

// The (key, what it holds) pairs of one state's unordered map, by key.
template <class Keys>
std::vector<std::pair<std::uint64_t, const typename Keys::mapped_type*>> by_key(const Keys& keys) {
  std::vector<std::pair<std::uint64_t, const typename Keys::mapped_type*>> out;
  out.reserve(keys.size());
  for (const auto& [k, v] : keys) out.emplace_back(k, &v);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

// Adds key group `group`'s records to `sst` in ascending key order: values (kind 1) before
// maps (kind 2), then by name, key and map key, as the key layout orders them.
result<void> add_group(rocksdb_sst_ingestion& sst, std::uint32_t group,
                       const key_group_state& state) {
  std::string key;
  for (const auto* named : in_key_order(state.values))
    for (const auto& [k, v] : by_key(named->second)) {
      build_key(key, group, value_kind, named->first, k);
      if (auto r = sst.add(key, *v); !r) return r;
    }
  for (const auto* named : in_key_order(state.maps))
    for (const auto& [k, entries] : by_key(named->second)) {
      build_key(key, group, map_kind, named->first, k);
      const std::size_t head = key.size();
      for (const auto& [map_key, v] : *entries) {  // std::map: bytewise order
        key.resize(head);
        key.append(map_key);
        if (auto r = sst.add(key, v); !r) return r;
      }
    }
  return success();
}

}  // namespace

result<void> rocksdb_keyed_state_backend::add_restored_group(std::uint32_t group,
                                                             const key_group_state& state) {
  assert(restore_sst_);
  return add_group(*restore_sst_, group, state);
}

result<void> rocksdb_keyed_state_backend::finish_restore() {
  assert(restore_sst_);
  auto r = restore_sst_->ingest();
  restore_sst_.reset();
  return r;
}

result<std::shared_ptr<incremental_keyed_snapshot>>
rocksdb_keyed_state_backend::snapshot_incremental(checkpoint_id id) {
  if (!incremental_) return std::shared_ptr<incremental_keyed_snapshot>();
  // The task thread's part: flush the memtables and list the files, with deletions held so
  // that the files listed stay until they are stored. Nothing is copied or synced here.
  auto hold = std::make_unique<file_deletions_hold>(store_);
  rocksdb::Status s = hold->acquire();
  std::vector<rocksdb::LiveFileStorageInfo> files;
  if (s.ok()) {
    rocksdb::LiveFilesStorageInfoOptions o;
    o.include_checksum_info = true;
    o.wal_size_for_flush = 0;  // always flush: writes skip the write-ahead log
    s = store_->db().GetLiveFilesStorageInfo(o, &files);
  }
  if (!s.ok())
    return error{"a rocksdb checkpoint of " + folder().string() + " failed: " + s.ToString()};
  keyed_state_files scope;
  scope.max_parallelism = max_parallelism_;
  scope.first_key_group = range_.first;
  scope.last_key_group = range_.last;
  return std::shared_ptr<incremental_keyed_snapshot>(
      std::make_shared<rocksdb_incremental_snapshot>(store_, stored_, id, std::move(files),
                                                     std::move(hold), scope));
}

void rocksdb_keyed_state_backend::notify_checkpoint_complete(checkpoint_id id) {
  stored_->confirm(id);
}

namespace {

std::uint64_t overlap(const keyed_state_files& m, const key_group_range& range) {
  const std::uint32_t first = std::max(m.first_key_group, range.first);
  const std::uint32_t last = std::min(m.last_key_group, range.last);
  return first > last ? 0 : last - first + 1;
}

// Rebuilds an instance's folder from its stored files, each checked against its size and
// checksum while it is linked (SST files, which RocksDB never writes again) or copied (the
// MANIFEST and the others, which an opened instance appends to or rewrites).
result<void> rebuild(const keyed_files_restore& part, const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
  std::filesystem::create_directories(folder, ec);
  if (ec) return error{"cannot create " + folder.string() + ": " + ec.message()};
  for (std::size_t i = 0; i < part.manifest.files.size(); ++i) {
    const keyed_state_file& f = part.manifest.files[i];
    const auto to = folder / f.local_name;
    auto r = is_sst(f.local_name)
                 ? file_copy::link_or_copy_verified(part.paths[i], to, f.size, f.checksum)
                 : file_copy::copy_verified(part.paths[i], to, f.size, f.checksum);
    if (!r) return r;
  }
  return success();
}

}  // namespace

result<void> rocksdb_keyed_state_backend::start_restore(
    const std::vector<keyed_files_restore>& files) {
  restore_sst_.reset();
  if (auto r = restore_files(files); !r) return r;
  // The neutral key groups go into SST files after the instance's own files are in place (the
  // base replaces the instance), and are ingested at the end: newer than all of them.
  restore_sst_ =
      std::make_unique<rocksdb_sst_ingestion>(store_->db(), ingest_folder(), sst_file_bytes_);
  return success();
}

result<void> rocksdb_keyed_state_backend::restore_files(
    const std::vector<keyed_files_restore>& files) {
  if (files.empty()) return clear_owned();
  // Everything a hostile or inconsistent manifest could get wrong, before a file is touched.
  std::vector<const keyed_files_restore*> overlapping;
  for (const auto& part : files) {
    const keyed_state_files& m = part.manifest;
    if (m.max_parallelism != max_parallelism_)
      return error{"rocksdb state files were written with max parallelism " +
                   std::to_string(m.max_parallelism) + ", this job uses " +
                   std::to_string(max_parallelism_) + " (keep max_parallelism stable)"};
    if (m.first_key_group > m.last_key_group || m.last_key_group >= max_parallelism_)
      return error{"rocksdb state files name key groups " + std::to_string(m.first_key_group) +
                   ".." + std::to_string(m.last_key_group) + ", not a range inside max "
                   "parallelism " + std::to_string(max_parallelism_)};
    if (part.paths.size() != m.files.size())
      return error{"rocksdb state files: the manifest and the handles disagree"};
    std::vector<std::string_view> names;
    for (const auto& f : m.files) {
      if (!is_plain_file_name(f.local_name))
        return error{"rocksdb state files name a local file '" + f.local_name +
                     "' that is no plain file name"};
      names.push_back(f.local_name);
    }
    std::sort(names.begin(), names.end());
    if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end())
      return error{"rocksdb state files name the local file '" + std::string(*twice) + "' twice"};
    if (overlap(m, range_) == 0) continue;
    for (const auto* other : overlapping)
      if (overlap(other->manifest, {m.first_key_group, m.last_key_group}) > 0)
        return error{"rocksdb state files of two old subtasks both hold key groups " +
                     std::to_string(std::max(m.first_key_group,
                                             other->manifest.first_key_group)) + ".."};
    overlapping.push_back(&part);
  }
  if (overlapping.empty()) return clear_owned();

  // The old instance overlapping most becomes this one: its records are never re-inserted.
  const keyed_files_restore* base = *std::max_element(
      overlapping.begin(), overlapping.end(), [&](const auto* a, const auto* b) {
        return overlap(a->manifest, range_) < overlap(b->manifest, range_);
      });
  if (auto r = restore_base(*base); !r) return r;
  std::size_t n = 0;
  for (const auto* part : overlapping) {
    if (part == base) continue;
    const std::filesystem::path scratch = folder() / ("restore-" + std::to_string(n++));
    auto r = ingest_owned_from(*part, scratch);
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
    if (!r) return r;
  }
  return success();
}

result<keyed_state_snapshot> rocksdb_keyed_state_backend::read_files(
    const keyed_files_restore& part, const std::filesystem::path& scratch) {
  if (part.paths.size() != part.manifest.files.size())
    return error{"rocksdb state files: the manifest and the handles disagree"};
  for (const auto& f : part.manifest.files)
    if (!is_plain_file_name(f.local_name))
      return error{"rocksdb state files name a local file '" + f.local_name +
                   "' that is no plain file name"};
  struct remove_scratch {
    const std::filesystem::path& folder;
    ~remove_scratch() {
      std::error_code ec;
      std::filesystem::remove_all(folder, ec);
    }
  } cleanup{scratch};
  if (auto r = rebuild(part, scratch); !r) return r.err();
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(reopen_options(scratch_cache_bytes), scratch.string(), &raw);
  if (!s.ok())
    return error{"cannot open restored rocksdb state in " + scratch.string() + ": " +
                 s.ToString()};
  std::unique_ptr<rocksdb::DB> db(raw);
  auto out = read_neutral(*db, rocksdb::ReadOptions(), part.manifest.max_parallelism, scratch);
  (void)db->Close();
  return out;
}

result<void> rocksdb_keyed_state_backend::restore_base(const keyed_files_restore& base) {
  store_->close();
  if (auto r = rebuild(base, store_->db_folder()); !r) return r;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(reopen_options(block_cache_bytes_), store_->db_folder().string(), &raw);
  if (!s.ok())
    return error{"cannot open the rocksdb state restored in " + folder().string() + ": " +
                 s.ToString()};
  store_->reopen(std::unique_ptr<rocksdb::DB>(raw));
  // Key groups outside this subtask's range go, with range deletes (rescaling).
  rocksdb::WriteBatch cut;
  if (range_.first > 0) s = cut.DeleteRange(group_prefix(0), group_prefix(range_.first));
  if (s.ok())
    s = cut.DeleteRange(group_prefix(range_.last + 1), group_prefix(max_encodable_parallelism));
  if (s.ok()) s = store_->db().Write(write_options(), &cut);
  if (!s.ok())
    return error{"restoring rocksdb state in " + folder().string() + ": " + s.ToString()};
  return success();
}

result<void> rocksdb_keyed_state_backend::ingest_owned_from(
    const keyed_files_restore& other, const std::filesystem::path& scratch) {
  if (auto r = rebuild(other, scratch); !r) return r;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(reopen_options(scratch_cache_bytes), scratch.string(), &raw);
  if (!s.ok())
    return error{"cannot open restored rocksdb state in " + scratch.string() + ": " +
                 s.ToString()};
  std::unique_ptr<rocksdb::DB> db(raw);
  const std::uint32_t first = std::max(other.manifest.first_key_group, range_.first);
  const std::uint32_t last = std::min(other.manifest.last_key_group, range_.last);
  const std::string end = group_prefix(last + 1);
  rocksdb::ReadOptions r;
  r.fill_cache = false;
  result<void> out = success();
  {
    // The old instance's iterator gives its keys in the comparator's order: as the files want.
    rocksdb_sst_ingestion sst(store_->db(), ingest_folder(), sst_file_bytes_);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(r));
    for (it->Seek(group_prefix(first)); out && it->Valid() && view(it->key()) < end; it->Next())
      out = sst.add(view(it->key()), view(it->value()));
    if (out && !it->status().ok())
      out = error{"reading restored rocksdb state in " + scratch.string() + ": " +
                  it->status().ToString()};
    it.reset();
    if (out) out = sst.ingest();
  }
  (void)db->Close();
  return out;
}

std::optional<std::uint64_t> rocksdb_keyed_state_backend::int_property(
    const std::string& name) const {
  std::uint64_t v = 0;
  if (store_->db().GetIntProperty(name, &v)) return v;
  // Some are only given as text ("rocksdb.num-files-at-level<n>").
  std::string text;
  if (!store_->db().GetProperty(name, &text)) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::filesystem::path rocksdb_keyed_state_backend::ingest_folder() const {
  return store_->folder() / "ingest";
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
