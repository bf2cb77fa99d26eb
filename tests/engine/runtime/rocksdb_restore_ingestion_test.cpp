// Restores into the rocksdb backend go in as ingested SST files, never through the memtable:
// rescaled restores from an incremental checkpoint's files (the key groups of old instances
// other than the base), restores from the neutral form, restores over existing state, and
// failures that leave nothing behind.
#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>

#include <sys/resource.h>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"
#include "tests/engine/runtime/rocksdb_test_support.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

constexpr std::uint32_t max_parallelism = 128;

using job_dir = rocksdb_job_dir;

// The keys below `n` that subtask `index` of `parallelism` owns get sum = key * 10 + round and
// map entries "k<key>" -> key and, for every third key, "\0x<round>" -> round; every seventh
// key's sum is cleared again.
void apply(keyed_state_backend& b, std::uint32_t index, std::uint32_t parallelism,
           std::uint64_t n, std::int64_t round) {
  for (std::uint64_t key = 0; key < n; ++key) {
    if (key_groups::subtask_for_key(key, parallelism, max_parallelism) != index) continue;
    b.set_current_key(key);
    b.set_value("sum", static_cast<std::int64_t>(key * 10) + round);
    b.map_put("words", "k" + std::to_string(key), static_cast<std::int64_t>(key));
    if (key % 3 == 0) b.map_put("words", std::string("\0x", 2) + std::to_string(round), round);
    if (key % 7 == 0) b.clear_value("sum");
  }
}

// What subtask `index` of `parallelism` holds after `rounds` applied to every key in turn, as
// the heap backend holds it.
keyed_state_snapshot expected(std::uint32_t index, std::uint32_t parallelism, std::uint64_t n,
                              std::initializer_list<std::int64_t> rounds) {
  heap_keyed_state_backend heap(max_parallelism,
                                key_groups::range_for_subtask(index, parallelism, max_parallelism));
  for (auto round : rounds) apply(heap, index, parallelism, n, round);
  auto s = heap.snapshot_now();
  REQUIRE(s);
  return std::move(s).value();
}

std::uint64_t property(const rocksdb_keyed_state_backend& b, const std::string& name) {
  auto v = b.int_property(name);
  REQUIRE(v);
  return *v;
}

// Records in the memtables, point and range deletes included.
std::uint64_t memtable_entries(const rocksdb_keyed_state_backend& b) {
  return property(b, "rocksdb.num-entries-active-mem-table") +
         property(b, "rocksdb.num-entries-imm-mem-tables");
}

std::uint64_t live_sst_files(const rocksdb_keyed_state_backend& b) {
  std::uint64_t n = 0;
  for (int level = 0; level < 7; ++level)
    n += property(b, "rocksdb.num-files-at-level" + std::to_string(level));
  return n;
}

// Nothing is left of a restore's scratch folders.
void check_no_scratch(const rocksdb_keyed_state_backend& b) {
  for (const auto& e : std::filesystem::directory_iterator(b.folder()))
    CHECK(e.path().filename() == "db");
}

// Restores every subtask of `parallelism` from `parts`, checks each holds exactly what
// `rounds` give, that every record not in its base came in by ingestion, and stores the
// restored state (after `next` was applied) as checkpoint `id`.
std::vector<keyed_files_restore> restore_all(job_dir& job,
                                             const std::vector<keyed_files_restore>& parts,
                                             std::uint32_t parallelism, std::uint64_t n,
                                             std::initializer_list<std::int64_t> rounds,
                                             std::int64_t next, checkpoint_id id) {
  std::vector<keyed_files_restore> out;
  for (std::uint32_t i = 0; i < parallelism; ++i) {
    INFO("subtask " << i << " of " << parallelism);
    auto b = job.make(i, parallelism);
    REQUIRE(b->restore_with_files(parts, {}));
    auto now = b->snapshot_now();
    REQUIRE(now);
    CHECK(*now == expected(i, parallelism, n, rounds));
    // Writes through the memtable would leave every record copied from another old instance
    // there (hundreds, far below a write buffer): only the base's cut (one or two range deletes)
    // may be.
    CHECK(memtable_entries(*b) <= 2);
    check_no_scratch(*b);
    apply(*b, i, parallelism, n, next);
    out.push_back(job.store_part(*b, id, "sum-" + std::to_string(i) + "-" + std::to_string(id)));
    // The checksums RocksDB recorded for the ingested files (a checkpoint takes them from its
    // MANIFEST) are the files' own.
    for (std::size_t f = 0; f < out.back().paths.size(); ++f) {
      std::ifstream in(out.back().paths[f], std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), {}};
      CHECK(crc32c(bytes) == out.back().manifest.files[f].checksum);
    }
  }
  return out;
}

// A neutral snapshot over many key groups: value and map state of several names (names of
// different lengths order by length first in the key layout), values with NUL bytes, empty
// values, map keys with NUL and high bytes.
keyed_state_snapshot neutral_state(std::uint64_t keys, const std::string& flavour) {
  keyed_state_snapshot s;
  s.max_parallelism = max_parallelism;
  for (std::uint64_t i = 0; i < keys; ++i) {
    const std::uint64_t key = i * 0x9e3779b97f4a7c15ULL;  // spread over all 64 bits
    key_group_state& g = s.key_groups[key_groups::key_group_for_key(key, max_parallelism)];
    std::string value = flavour + std::to_string(i);
    value.push_back('\0');
    value += std::string(i % 40, static_cast<char>(i));
    g.values["sum"][key] = value;
    if (i % 5 == 0) g.values["z"][key] = "";
    if (i % 4 == 0) {
      auto& m = g.maps["aa"][key];
      m[""] = flavour;
      m[std::string("\0\0", 2)] = std::string(3, '\0');
      m["\xff\x01"] = value;
      m["k" + std::to_string(i)] = "";
    }
    if (i % 9 == 0) g.maps["longer-name"][key]["x"] = flavour;
  }
  return s;
}

// The part of `s` in `range`.
keyed_state_snapshot within(const keyed_state_snapshot& s, const key_group_range& range) {
  keyed_state_snapshot out;
  out.max_parallelism = s.max_parallelism;
  for (const auto& [group, state] : s.key_groups)
    if (range.contains(group)) out.key_groups.emplace(group, state);
  return out;
}

}  // namespace

TEST_CASE("rocksdb restore: rescaled restores from files ingest what the base does not hold, "
          "over the base's cut") {
  job_dir job;
  constexpr std::uint64_t keys = 3'000;
  // p = 1, round 7.
  auto one = job.make(0, 1);
  apply(*one, 0, 1, keys, 7);
  const std::vector<keyed_files_restore> at_one{job.store_part(*one, 1, "sum-0-1")};
  one.reset();
  // 1 -> 2: the base alone. Each instance's files still hold the other half's round 7
  // records under its cut's range deletes; round 0 is written over its own half.
  const auto at_two = restore_all(job, at_one, 2, keys, {7}, 0, 2);
  // 2 -> 3: new subtasks 0 and 2 have one old instance each, subtask 1 both (43..85).
  const auto at_three = restore_all(job, at_two, 3, keys, {7, 0}, 1, 3);
  // 3 -> 2: each new range overlaps one old instance fully and another partly.
  const auto back_at_two = restore_all(job, at_three, 2, keys, {7, 0, 1}, 2, 4);
  // 2 -> 1: the base's files hold the other half, older, under range deletes: the ingested
  // records win.
  restore_all(job, back_at_two, 1, keys, {7, 0, 1, 2}, 3, 5);
}

TEST_CASE("rocksdb restore: the neutral form goes in as several ingested SST files, equal to "
          "the source") {
  temp_folder dir;
  const auto source = neutral_state(20'000, "v");
  for (std::uint32_t p : {1u, 2u}) {
    const auto range = key_groups::range_for_subtask(p - 1, p, max_parallelism);
    INFO("subtask " << p - 1 << " of " << p);
    auto b = rocksdb_keyed_state_backend::open(max_parallelism, range,
                                               dir.path() / ("b" + std::to_string(p)));
    REQUIRE(b);
    (*b)->set_restore_file_bytes(64 << 10);  // several files out of a few MiB
    const std::uint64_t files_before = live_sst_files(**b);
    REQUIRE((*b)->restore({source}));
    auto now = (*b)->snapshot_now();
    REQUIRE(now);
    CHECK(*now == within(source, range));
    CHECK(memtable_entries(**b) == 0);
    CHECK(live_sst_files(**b) >= files_before + 3);
    check_no_scratch(**b);
    // Read through the accessors too: NUL bytes and empty values as they were.
    const std::uint64_t key = 5 * 0x9e3779b97f4a7c15ULL;
    if (range.contains(key_groups::key_group_for_key(key, max_parallelism))) {
      (*b)->set_current_key(key);
      CHECK((*b)->value_bytes("z") == std::string());
      CHECK((*b)->value_bytes("sum") == std::string("v5\0", 3) + std::string(5, '\5'));
    }
  }
}

TEST_CASE("rocksdb restore: a restore over existing state leaves exactly the restored state") {
  job_dir job;
  auto b = job.make(0, 1);
  // State partly in SST files (a checkpoint flushes), partly in the memtable, in names the
  // restored state has and one it has not.
  apply(*b, 0, 1, 2'000, 5);
  job.store_part(*b, 1, "sum-0-0");
  apply(*b, 0, 1, 3'000, 6);
  b->set_current_key(1);
  b->set_value("gone", 1);
  REQUIRE(memtable_entries(*b) > 0);

  // Different data for the same keys, and fewer keys.
  const auto first = expected(0, 1, 1'000, {9});
  REQUIRE(b->restore({first}));
  auto now = b->snapshot_now();
  REQUIRE(now);
  CHECK(*now == first);
  b->set_current_key(1);
  CHECK_FALSE(b->value_bytes("gone"));
  CHECK(b->value("sum") == 19);
  CHECK(memtable_entries(*b) == 0);  // the clear was flushed under the ingested files

  // Again over the ingested files: the later restore wins over the earlier one.
  const auto second = expected(0, 1, 500, {11});
  REQUIRE(b->restore({second}));
  now = b->snapshot_now();
  REQUIRE(now);
  CHECK(*now == second);
  // An empty restore empties the instance and writes no SST file.
  REQUIRE(b->restore({}));
  CHECK(b->num_entries() == 0);
  check_no_scratch(*b);
}

TEST_CASE("rocksdb restore: a corrupt old instance fails the rescaled restore, leaving no "
          "scratch folder") {
  job_dir job;
  std::vector<keyed_files_restore> parts;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto b = job.make(i, 2);
    apply(*b, i, 2, 3'000, 0);
    parts.push_back(job.store_part(*b, 1, "sum-" + std::to_string(i) + "-0"));
  }
  // The instance that is not the base (both overlap alike: the first is): an SST file whose
  // bytes are garbage of the stored size and checksum, which only RocksDB can tell.
  keyed_files_restore& other = parts[1];
  std::size_t sst = 0;
  while (!other.manifest.files[sst].local_name.ends_with(".sst")) ++sst;
  const std::string garbage(other.manifest.files[sst].size, 'x');
  std::filesystem::remove(other.paths[sst]);
  std::ofstream(other.paths[sst], std::ios::binary) << garbage;
  other.manifest.files[sst].checksum = crc32c(garbage);

  auto restored = job.make(0, 1);
  auto r = restored->restore_with_files(parts, {});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains(restored->folder().string()));
  check_no_scratch(*restored);
}

TEST_CASE("rocksdb restore: SST files that cannot be written fail the restore, leaving no "
          "scratch folder") {
  temp_folder dir;
  auto b = rocksdb_keyed_state_backend::open(max_parallelism, {0, max_parallelism - 1},
                                             dir.path() / "b");
  REQUIRE(b);
  const auto source = neutral_state(20'000, "v");
  {
    // A full disk, as files larger than the process may write (EFBIG, not a signal).
    struct limit_file_size {
      rlimit old{};
      void (*old_handler)(int) = nullptr;
      limit_file_size() {
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
        old_handler = std::signal(SIGXFSZ, SIG_IGN);
        rlimit small = old;
        small.rlim_cur = 64 << 10;
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
      }
      ~limit_file_size() {
        ::setrlimit(RLIMIT_FSIZE, &old);
        std::signal(SIGXFSZ, old_handler);
      }
    } limit;
    auto r = (*b)->restore({source});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains((*b)->folder().string()));
  }
  check_no_scratch(**b);
  // Room again: the same restore succeeds.
  REQUIRE((*b)->restore({source}));
  auto now = (*b)->snapshot_now();
  REQUIRE(now);
  CHECK(*now == source);
}
