// Incremental checkpoints of the rocksdb backend: which files a checkpoint stores again and
// which it names from its confirmed base, restore (also rescaled) from the stored files, and
// missing or torn files refused by name.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include <sys/stat.h>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/state/file_copy.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"
#include "tests/engine/runtime/rocksdb_test_support.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

constexpr std::uint32_t max_parallelism = 128;

using job_dir = rocksdb_job_dir;

// Keys 0..n-1 owned by subtask `index` of `parallelism` get sum = key * 10 + round and a map
// entry "k<key>" -> key.
void fill(keyed_state_backend& b, std::uint32_t index, std::uint32_t parallelism, std::uint64_t n,
          std::int64_t round = 0) {
  for (std::uint64_t key = 0; key < n; ++key) {
    if (key_groups::subtask_for_key(key, parallelism, max_parallelism) != index) continue;
    b.set_current_key(key);
    b.set_value("sum", static_cast<std::int64_t>(key * 10) + round);
    b.map_put("words", "k" + std::to_string(key), static_cast<std::int64_t>(key));
  }
}

void check_filled(keyed_state_backend& b, std::uint32_t index, std::uint32_t parallelism,
                  std::uint64_t n) {
  for (std::uint64_t key = 0; key < n; ++key) {
    if (key_groups::subtask_for_key(key, parallelism, max_parallelism) != index) continue;
    b.set_current_key(key);
    REQUIRE(b.value("sum") == static_cast<std::int64_t>(key * 10));
    REQUIRE(b.map_get("words", "k" + std::to_string(key)) == static_cast<std::int64_t>(key));
  }
}

std::uint64_t bytes_with(const incremental_keyed_snapshot::stored& s, handle_sharing sharing) {
  std::uint64_t n = 0;
  for (const auto& h : s.handles)
    if (h.sharing == sharing) n += h.size;
  return n;
}

}  // namespace

TEST_CASE("rocksdb incremental: a checkpoint after 1% of keys changed stores only new files") {
  job_dir job;
  auto b = job.make(0, 1);
  constexpr std::uint64_t keys = 40'000;
  fill(*b, 0, 1, keys);
  const auto first = job.store(*b, 1);
  // Nothing confirmed yet: every SST file is new, the rest is the checkpoint's own.
  CHECK(bytes_with(first, handle_sharing::shared_reused) == 0);
  CHECK(bytes_with(first, handle_sharing::shared_new) > 0);
  for (const auto& h : first.handles) {
    CHECK(h.is_shared() == h.path.ends_with(".sst"));
    const auto where = h.is_shared() ? job.shared() / h.path : job.checkpoint(1) / h.path;
    REQUIRE(std::filesystem::file_size(where) == h.size);
  }
  CHECK(first.written_size == first.full_size);
  b->notify_checkpoint_complete(1);

  // 1% of the keys change.
  for (std::uint64_t key = 0; key < keys; key += 100) {
    b->set_current_key(key);
    b->set_value("sum", -1);
  }
  const auto second = job.store(*b, 2);
  const std::uint64_t reused = bytes_with(second, handle_sharing::shared_reused);
  const std::uint64_t fresh = bytes_with(second, handle_sharing::shared_new);
  INFO("reused " << reused << " new " << fresh << " full " << second.full_size);
  CHECK(reused > 0);
  CHECK(fresh * 10 < second.full_size);
  CHECK(second.written_size * 10 < second.full_size);
  // A reused file keeps the name (and size and checksum) it was stored under.
  for (const auto& h : second.handles) {
    if (h.sharing != handle_sharing::shared_reused) continue;
    bool found = false;
    for (const auto& old : first.handles)
      found = found || (old.path == h.path && old.size == h.size && old.checksum == h.checksum);
    CHECK(found);
  }
}

TEST_CASE("rocksdb incremental: only files of a confirmed checkpoint are named again") {
  job_dir job;
  auto b = job.make(0, 1);
  fill(*b, 0, 1, 5'000);
  const auto first = job.store(*b, 1);
  fill(*b, 0, 1, 5'000, 1);
  // Checkpoint 1 never confirmed: 2 stores everything again.
  const auto second = job.store(*b, 2);
  CHECK(bytes_with(second, handle_sharing::shared_reused) == 0);
  for (const auto& h : second.handles)
    for (const auto& old : first.handles)
      if (h.is_shared()) CHECK(h.path != old.path);

  // 2 confirmed (a stale confirmation of 1 after it changes nothing): 3 names 2's files.
  b->notify_checkpoint_complete(2);
  b->notify_checkpoint_complete(1);
  fill(*b, 0, 1, 100, 2);
  const auto third = job.store(*b, 3);
  CHECK(bytes_with(third, handle_sharing::shared_reused) > 0);
  for (const auto& h : third.handles) {
    if (h.sharing != handle_sharing::shared_reused) continue;
    bool in_second = false;
    for (const auto& old : second.handles) in_second = in_second || old.path == h.path;
    CHECK(in_second);
  }
  // 4 is taken before 3 is confirmed: its base is still 2, so what only 3 stored is stored
  // again under a new name.
  const auto fourth = job.store(*b, 4);
  for (const auto& h : fourth.handles) {
    if (h.sharing != handle_sharing::shared_reused) continue;
    bool in_second = false;
    for (const auto& old : second.handles) in_second = in_second || old.path == h.path;
    CHECK(in_second);
  }
  // A restarted backend (a new attempt) starts with no base: its first checkpoint is full.
  auto restarted = job.make(0, 1);
  REQUIRE(restarted->restore_with_files({job.restore_part(fourth, 4)}, {}));
  const auto after_restart = job.store(*restarted, 5, "sum-0-1");
  CHECK(bytes_with(after_restart, handle_sharing::shared_reused) == 0);
}

TEST_CASE("rocksdb incremental: restore from stored files gives exactly the state") {
  job_dir job;
  auto b = job.make(0, 1);
  fill(*b, 0, 1, 3'000);
  job.store(*b, 1);
  b->notify_checkpoint_complete(1);
  b->set_current_key(17);
  b->clear_value("sum");
  b->map_put("words", "extra", 5);
  const auto taken = b->snapshot_now();
  REQUIRE(taken);
  const auto second = job.store(*b, 2);
  // Changed after the checkpoint: not in it.
  b->set_current_key(18);
  b->set_value("sum", -5);

  auto restored = job.make(0, 1);
  REQUIRE(restored->restore_with_files({job.restore_part(second, 2)}, {}));
  auto now = restored->snapshot_now();
  REQUIRE(now);
  CHECK(*now == *taken);
  CHECK(restored->num_entries() == 2 * 3'000 - 1);  // a value and a map per key, 17's value gone
  // The restored instance takes writes and checkpoints of its own.
  restored->set_current_key(18);
  restored->set_value("sum", 1);
  const auto next = job.store(*restored, 3, "sum-0-1");
  CHECK(next.full_size > 0);
}

TEST_CASE("rocksdb incremental: restore at twice and half the parallelism") {
  job_dir job;
  constexpr std::uint64_t keys = 4'000;
  // Taken at parallelism 2, the second checkpoint incremental on the first.
  std::vector<keyed_files_restore> parts;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto b = job.make(i, 2);
    fill(*b, i, 2, keys, 7);
    const std::string prefix = "sum-" + std::to_string(i) + "-0";
    job.store(*b, 1, prefix);
    b->notify_checkpoint_complete(1);
    fill(*b, i, 2, keys);
    const auto second = job.store(*b, 2, prefix);
    CHECK(bytes_with(second, handle_sharing::shared_reused) > 0);
    parts.push_back(job.restore_part(second, 2));
  }
  for (std::uint32_t p : {4u, 1u}) {
    INFO("restored at parallelism " << p);
    std::size_t total = 0;
    for (std::uint32_t i = 0; i < p; ++i) {
      auto b = job.make(i, p);
      REQUIRE(b->restore_with_files(parts, {}));
      total += b->num_entries();
      check_filled(*b, i, p, keys);
      // Nothing outside its own key groups is left in the instance.
      auto s = b->snapshot_now();
      REQUIRE(s);
      for (const auto& [group, _] : s->key_groups) CHECK(b->range().contains(group));
    }
    CHECK(total == 2 * keys);
  }
}

TEST_CASE("rocksdb incremental: stored files read into the neutral form restore into the heap") {
  job_dir job;
  auto b = job.make(0, 1);
  fill(*b, 0, 1, 2'000);
  const auto stored = job.store(*b, 1);
  const auto scratch = job.dir.path() / "scratch";
  auto neutral = rocksdb_keyed_state_backend::read_files(job.restore_part(stored, 1), scratch);
  REQUIRE(neutral);
  CHECK_FALSE(std::filesystem::exists(scratch));
  auto taken = b->snapshot_now();
  REQUIRE(taken);
  CHECK(*neutral == *taken);
  heap_keyed_state_backend heap(max_parallelism, key_groups::range_for_subtask(1, 2, 128));
  REQUIRE(heap.restore({*neutral}));
  check_filled(heap, 1, 2, 2'000);
}

TEST_CASE("rocksdb incremental: a missing or torn file fails the restore, naming it") {
  job_dir job;
  auto b = job.make(0, 1);
  fill(*b, 0, 1, 2'000);
  const auto stored = job.store(*b, 1);
  const keyed_files_restore part = job.restore_part(stored, 1);
  std::size_t sst = 0;
  while (!part.manifest.files[sst].shared) ++sst;
  const std::filesystem::path victim = part.paths[sst];
  const std::string kept = victim.string() + ".kept";
  std::filesystem::copy_file(victim, kept);

  SECTION("torn") {
    std::filesystem::resize_file(victim, std::filesystem::file_size(victim) / 2);
  }
  SECTION("corrupt") {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('\x5a');
    f.put('\xa5');
  }
  SECTION("missing") { std::filesystem::remove(victim); }
  SECTION("longer") { std::ofstream(victim, std::ios::app) << "more"; }

  auto restored = job.make(0, 1);
  auto r = restored->restore_with_files({part}, {});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains(victim.string()));
  // The file put back, the same files restore.
  std::filesystem::remove(victim);
  std::filesystem::copy_file(kept, victim);
  auto again = job.make(0, 1);
  REQUIRE(again->restore_with_files({part}, {}));
  check_filled(*again, 0, 1, 2'000);
}

TEST_CASE("rocksdb incremental: a hostile manifest is refused before a file is copied") {
  job_dir job;
  auto b = job.make(0, 1);
  fill(*b, 0, 1, 100);
  const auto stored = job.store(*b, 1);
  keyed_files_restore part = job.restore_part(stored, 1);
  auto restored = job.make(0, 1);
  SECTION("a local name with a path in it") {
    part.manifest.files[0].local_name = "../escape";
    auto r = restored->restore_with_files({part}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("no plain file name"));
  }
  SECTION("a local name twice") {
    part.manifest.files[1].local_name = part.manifest.files[0].local_name;
    auto r = restored->restore_with_files({part}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("twice"));
  }
  SECTION("another max parallelism") {
    part.manifest.max_parallelism = 256;
    auto r = restored->restore_with_files({part}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("max parallelism"));
  }
  SECTION("two old subtasks holding the same key groups") {
    auto r = restored->restore_with_files({part, part}, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("two old subtasks"));
  }
}

TEST_CASE("rocksdb incremental: the manifest travels in the state file") {
  subtask_snapshot s;
  s.operator_uid = "sum";
  s.subtask_index = 1;
  s.parallelism = 2;
  s.checkpoint = 9;
  const std::string plain = state_file::encode(s);
  CHECK(plain.substr(state_file::magic.size(), 4) == std::string("\x06\x00\x00\x00", 4));
  CHECK_FALSE(state_file::decode(plain)->keyed_files);
  s.keyed_files = keyed_state_files{128, 64, 127, {{"000012.sst", "x-000012.sst", 10, 7, true},
                                                   {"CURRENT", "x-CURRENT", 16, 8, false}}};
  const std::string with_files = state_file::encode(s);
  CHECK(with_files.substr(state_file::magic.size(), 4) == std::string("\x06\x00\x00\x00", 4));
  auto decoded = state_file::decode(with_files);
  REQUIRE(decoded);
  CHECK(*decoded == s);
  for (std::size_t cut = 0; cut < with_files.size(); cut += 7)
    CHECK_FALSE(state_file::decode(with_files.substr(0, cut)));
}

namespace {

ino_t inode_of(const std::filesystem::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

}  // namespace

TEST_CASE("rocksdb incremental: SST files are linked, not copied, within one filesystem, and "
          "copied across filesystems, checked either way") {
  temp_folder dir;
  const std::string bytes(3 * (1 << 20) + 17, 'q');
  const auto from = dir.path() / "000042.sst";
  std::ofstream(from, std::ios::binary) << bytes;
  const std::uint32_t checksum = crc32c(bytes);

  // Same filesystem: another name of the same file, read back for its size and checksum.
  const auto linked = dir.path() / "shared-000042.sst";
  auto done = file_copy::link_or_copy_durably(from, linked);
  REQUIRE(done);
  CHECK(done->size == bytes.size());
  CHECK(done->checksum == checksum);
  CHECK(inode_of(linked) == inode_of(from));
  // An existing file of that name is replaced.
  REQUIRE(file_copy::link_or_copy_durably(from, linked));

  const auto local = dir.path() / "local-000042.sst";
  REQUIRE(file_copy::link_or_copy_verified(linked, local, bytes.size(), checksum));
  CHECK(inode_of(local) == inode_of(from));
  // A wrong size or checksum, or a missing file, is refused naming the file.
  auto wrong = file_copy::link_or_copy_verified(linked, local, bytes.size(), checksum ^ 1);
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.err().message,
             Catch::Contains(linked.string()) && Catch::Contains("fails its checksum"));
  auto shorter = file_copy::link_or_copy_verified(linked, local, bytes.size() + 1, checksum);
  REQUIRE_FALSE(shorter);
  CHECK_THAT(shorter.err().message, Catch::Contains("torn or replaced"));
  auto missing = file_copy::link_or_copy_verified(dir.path() / "gone.sst", local, 1, 0);
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.err().message,
             Catch::Contains("refusing corrupt state") && Catch::Contains("gone.sst"));

  // Another filesystem (the shared-memory one, when it is not the temporary folder's): a copy.
  struct stat shm {}, tmp {};
  if (::stat("/dev/shm", &shm) == 0 && ::stat(dir.path().c_str(), &tmp) == 0 &&
      shm.st_dev != tmp.st_dev) {
    temp_folder other("snapflow", "/dev/shm");
    const auto copied = other.path() / "000042.sst";
    auto across = file_copy::link_or_copy_durably(from, copied);
    REQUIRE(across);
    CHECK(across->size == bytes.size());
    CHECK(across->checksum == checksum);
    CHECK(std::filesystem::file_size(copied) == bytes.size());
    REQUIRE(file_copy::link_or_copy_verified(copied, local, bytes.size(), checksum));
    CHECK(inode_of(local) != inode_of(copied));
  }
}

namespace {

std::uint32_t crc_of_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return crc32c(bytes);
}

}  // namespace

TEST_CASE("rocksdb incremental: the checksum RocksDB recorded for each SST is the stored "
          "file's CRC-32C, and a restore accepts it") {
  job_dir job;
  auto b = job.make(0, 1);
  fill(*b, 0, 1, 20'000);
  const auto first = job.store(*b, 1);
  b->notify_checkpoint_complete(1);
  for (std::uint64_t key = 0; key < 20'000; key += 50) {
    b->set_current_key(key);
    b->set_value("sum", -7);
  }
  const auto second = job.store(*b, 2);  // new files beside reused ones
  std::size_t shared = 0;
  for (const auto* s : {&first, &second})
    for (const auto& h : s->handles) {
      const bool in_shared = h.is_shared();
      const auto where = in_shared ? job.shared() / h.path
                                   : job.checkpoint(s == &first ? 1 : 2) / h.path;
      INFO(where);
      CHECK(std::filesystem::file_size(where) == h.size);
      CHECK(crc_of_file(where) == h.checksum);
      shared += in_shared ? 1 : 0;
    }
  CHECK(shared > 0);
  auto restored = job.make(0, 1);
  REQUIRE(restored->restore_with_files({job.restore_part(second, 2)}, {}));
  for (std::uint64_t key = 0; key < 20'000; ++key) {
    restored->set_current_key(key);
    CHECK(restored->value("sum") == (key % 50 == 0 ? -7 : static_cast<std::int64_t>(key * 10)));
  }
}

TEST_CASE("rocksdb incremental: a file linked with the size and checksum its writer gave is "
          "not read, and a size that disagrees is refused") {
  temp_folder dir;
  const std::string bytes(1 << 20, 'z');
  const auto from = dir.path() / "000007.sst";
  std::ofstream(from, std::ios::binary) << bytes;
  const std::uint32_t checksum = crc32c(bytes);
  const auto to = dir.path() / "shared-000007.sst";
  auto done = file_copy::link_or_copy_known(from, to, bytes.size(), checksum);
  REQUIRE(done);
  CHECK(done->size == bytes.size());
  CHECK(done->checksum == checksum);
  CHECK(inode_of(to) == inode_of(from));
  auto wrong_size = file_copy::link_or_copy_known(from, to, bytes.size() - 1, checksum);
  REQUIRE_FALSE(wrong_size);
  CHECK_THAT(wrong_size.err().message, Catch::Contains(from.string()));
  auto missing = file_copy::link_or_copy_known(dir.path() / "gone.sst", to, 1, 0);
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.err().message, Catch::Contains("gone.sst"));
}

namespace {

std::size_t sst_files_in(const std::filesystem::path& folder) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder))
    n += e.path().extension() == ".sst" ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("rocksdb incremental: a snapshot's files stay until it is stored, though flushes and "
          "compactions replace them meanwhile, and it restores the state at its barrier") {
  job_dir job;
  auto b = job.make(0, 1);
  const auto db = b->folder() / "db";
  // Live SST files, as RocksDB counts them over its levels.
  const auto live = [&b] {
    std::uint64_t n = 0;
    for (int level = 0; level < 7; ++level)
      n += b->int_property("rocksdb.num-files-at-level" + std::to_string(level)).value_or(0);
    return n;
  };
  fill(*b, 0, 1, 4'000);
  auto first = b->snapshot_incremental(1);
  REQUIRE(first);
  REQUIRE(*first);
  const auto at_barrier = b->snapshot_now();
  REQUIRE(at_barrier);
  // Later checkpoints flush new files over every key until a compaction has merged some of the
  // first snapshot's files away: the folder then holds files no level names any more (RocksDB
  // compacts level 0 from four files on, in the background: a bounded wait).
  bool replaced = false;
  for (checkpoint_id id = 2; id <= 40 && !replaced; ++id) {
    fill(*b, 0, 1, 4'000, static_cast<std::int64_t>(id));
    REQUIRE(b->snapshot_incremental(id));
    for (int i = 0; i < 20 && !replaced; ++i) {
      replaced = sst_files_in(db) > live();
      if (!replaced) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  INFO(sst_files_in(db) << " SST files in the instance, " << live() << " live");
  REQUIRE(replaced);
  std::filesystem::create_directories(job.checkpoint(1));
  auto stored = (*first)->store(job.shared(), job.checkpoint(1), "sum-0-0");
  if (!stored) FAIL(stored.err().message);
  first->reset();
  auto restored = job.make(0, 1);
  REQUIRE(restored->restore_with_files({job.restore_part(*stored, 1)}, {}));
  auto now = restored->snapshot_now();
  REQUIRE(now);
  CHECK(*now == *at_barrier);
  // With no snapshot holding them, the replaced files go once RocksDB next cleans up (after
  // its next flush or compaction: another checkpoint, then a bounded wait).
  fill(*b, 0, 1, 4'000, 99);
  REQUIRE(b->snapshot_incremental(99));
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = sst_files_in(db) == live();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  INFO(sst_files_in(db) << " SST files in the instance, " << live() << " live");
  CHECK(gone);
}
