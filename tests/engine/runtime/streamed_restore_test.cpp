// A restore streamed from state files (state_file_reader into begin_restore / restore_group /
// end_restore) gives what restore() of the whole snapshots gives, for both backends, at the same
// and at other parallelisms, over existing state; rocksdb takes it by ingestion alone; groups out
// of order, not owned or twice are refused.
#include <catch2/catch.hpp>

#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_reader.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

constexpr std::uint32_t max_parallelism = 128;
constexpr std::uint64_t keys = 2000;

key_group_range range(std::uint32_t index, std::uint32_t parallelism) {
  return key_groups::range_for_subtask(index, parallelism, max_parallelism);
}

// Subtask `index` of `parallelism`'s keys below `keys`: a value and map entries, `round` in them.
void apply(keyed_state_backend& b, std::uint32_t index, std::uint32_t parallelism, int round) {
  for (std::uint64_t key = 0; key < keys; ++key) {
    if (key_groups::subtask_for_key(key, parallelism, max_parallelism) != index) continue;
    b.set_current_key(key);
    b.set_value_bytes("sum", "v" + std::to_string(key * 3 + round));
    b.map_put_bytes("words", "k" + std::to_string(key % 5), std::to_string(round));
    if (key % 4 == 0) b.map_put_bytes("words", std::string("\0z", 2), "x");
  }
}

struct backends {
  temp_folder dir;
  int made = 0;
  std::unique_ptr<keyed_state_backend> make(bool rocksdb, std::uint32_t index,
                                            std::uint32_t parallelism) {
    if (!rocksdb)
      return std::make_unique<heap_keyed_state_backend>(max_parallelism, range(index, parallelism));
    auto b = rocksdb_keyed_state_backend::open(max_parallelism, range(index, parallelism),
                                               dir.path() / ("b" + std::to_string(made++)),
                                               /*incremental=*/false);
    REQUIRE(b);
    auto* raw = b->get();
    raw->set_restore_file_bytes(16 << 10);  // several SST files out of little state
    return std::move(b).value();
  }
};

std::uint64_t memtable_entries(keyed_state_backend& b) {
  auto& r = dynamic_cast<rocksdb_keyed_state_backend&>(b);
  return r.int_property("rocksdb.num-entries-active-mem-table").value() +
         r.int_property("rocksdb.num-entries-imm-mem-tables").value();
}

// Streams the old subtasks' files into `b`, in the order of their key groups.
result<void> stream_restore(keyed_state_backend& b, const std::vector<state_handle>& files) {
  if (auto r = b.begin_restore(); !r) return r;
  for (const auto& handle : files) {
    keyed_state_backend::restore_sink sink(b, max_parallelism);
    auto s = state_file_reader::read(handle, sink, {}, 512);
    if (!s) return s.err();
  }
  return b.end_restore();
}

}  // namespace

TEST_CASE("streamed restore: equals restore() of the whole snapshots, both backends, rescaled "
          "and over existing state") {
  struct scale {
    std::uint32_t from, to;
  };
  for (bool rocksdb : {false, true}) {
    for (scale sc : {scale{1, 1}, scale{1, 2}, scale{2, 1}, scale{3, 2}, scale{2, 3}}) {
      INFO((rocksdb ? "rocksdb " : "heap ") << sc.from << " -> " << sc.to);
      backends made;
      // The old subtasks' state, as snapshots and as state files.
      std::vector<keyed_state_snapshot> parts;
      std::vector<state_handle> files;
      for (std::uint32_t i = 0; i < sc.from; ++i) {
        auto old = made.make(rocksdb, i, sc.from);
        apply(*old, i, sc.from, 1);
        auto snap = old->snapshot_now();
        REQUIRE(snap);
        subtask_snapshot s;
        s.operator_uid = "op";
        s.subtask_index = i;
        s.parallelism = sc.from;
        s.keyed = *snap;
        auto h = state_file::write(made.dir.path() / ("old-" + std::to_string(i) + ".state"), s);
        REQUIRE(h);
        files.push_back(*h);
        parts.push_back(std::move(*snap));
      }
      for (std::uint32_t i = 0; i < sc.to; ++i) {
        INFO("new subtask " << i);
        auto whole = made.make(rocksdb, i, sc.to);
        REQUIRE(whole->restore(parts));
        auto expected = whole->snapshot_now();
        REQUIRE(expected);
        // A fresh backend.
        auto fresh = made.make(rocksdb, i, sc.to);
        if (auto r = stream_restore(*fresh, files); !r) FAIL(r.err().message);
        auto got = fresh->snapshot_now();
        REQUIRE(got);
        CHECK(*got == *expected);
        CHECK(fresh->num_entries() == whole->num_entries());
        if (rocksdb) CHECK(memtable_entries(*fresh) == 0);
        // Over existing state, which is replaced.
        auto used = made.make(rocksdb, i, sc.to);
        apply(*used, i, sc.to, 7);
        const std::uint64_t before = rocksdb ? memtable_entries(*used) : 0;
        if (auto r = stream_restore(*used, files); !r) FAIL(r.err().message);
        auto replaced = used->snapshot_now();
        REQUIRE(replaced);
        CHECK(*replaced == *expected);
        // Only the clear (one range delete) went through the memtable.
        if (rocksdb) CHECK(memtable_entries(*used) <= before + 1);
      }
    }
  }
}

TEST_CASE("streamed restore: groups out of order, twice, not owned or outside a restore are "
          "refused") {
  for (bool rocksdb : {false, true}) {
    INFO((rocksdb ? "rocksdb" : "heap"));
    backends made;
    auto b = made.make(rocksdb, 0, 2);  // key groups 0..63
    key_group_state g;
    g.values["v"][1] = "x";
    CHECK_FALSE(b->restore_group(3, g));  // no restore begun
    REQUIRE(b->begin_restore());
    REQUIRE(b->restore_group(5, g));
    auto twice = b->restore_group(5, g);
    REQUIRE_FALSE(twice);
    CHECK_THAT(twice.err().message, Catch::Contains("appears in two state files"));
    CHECK_FALSE(b->restore_group(4, g));
    CHECK_FALSE(b->restore_group(64, g));
    CHECK_FALSE(b->restore_group(200, g));
    // The sink skips another subtask's groups and refuses another max parallelism.
    REQUIRE(b->begin_restore());
    keyed_state_backend::restore_sink sink(*b, max_parallelism);
    REQUIRE(sink.key_group(2, g));
    REQUIRE(sink.key_group(70, g));
    CHECK(sink.restored_groups() == 1);
    REQUIRE(b->end_restore());
    CHECK(b->num_entries() == 1);
    REQUIRE(b->begin_restore());
    keyed_state_backend::restore_sink other(*b, 64);
    auto refused = other.key_group(2, g);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.err().message, Catch::Contains("max parallelism"));
  }
}

TEST_CASE("streamed restore: rocksdb from a mix of stored files and streamed state files") {
  // Old subtasks 0 and 2 of 3 stored their state as files (an incremental checkpoint), old
  // subtask 1 as a state file: the files are the base, the streamed groups go on top.
  temp_folder dir;
  const auto shared = dir.path() / "shared";
  const auto chk = dir.path() / "chk-1";
  std::filesystem::create_directories(chk);
  std::vector<keyed_state_snapshot> parts;
  std::vector<keyed_files_restore> stored;
  std::optional<state_handle> streamed;
  for (std::uint32_t i = 0; i < 3; ++i) {
    auto old = rocksdb_keyed_state_backend::open(max_parallelism, range(i, 3),
                                                 dir.path() / ("old-" + std::to_string(i)), true);
    REQUIRE(old);
    apply(**old, i, 3, 2);
    auto snap = (*old)->snapshot_now();
    REQUIRE(snap);
    parts.push_back(*snap);
    if (i == 1) {
      subtask_snapshot s;
      s.operator_uid = "op";
      s.subtask_index = i;
      s.parallelism = 3;
      s.keyed = *snap;
      auto h = state_file::write(dir.path() / "old-1.state", s);
      REQUIRE(h);
      streamed = *h;
      continue;
    }
    auto inc = (*old)->snapshot_incremental(1);
    REQUIRE(inc);
    REQUIRE(*inc);
    auto files = (*inc)->store(shared, chk, "old-" + std::to_string(i));
    if (!files) FAIL(files.err().message);
    keyed_files_restore part;
    part.manifest = files->manifest;
    for (const auto& f : part.manifest.files)
      part.paths.push_back(f.shared ? shared / f.handle_name : chk / f.handle_name);
    stored.push_back(std::move(part));
  }
  for (std::uint32_t to : {1u, 2u}) {
    for (std::uint32_t i = 0; i < to; ++i) {
      INFO(to << " subtasks, subtask " << i);
      heap_keyed_state_backend whole(max_parallelism, range(i, to));
      REQUIRE(whole.restore(parts));
      auto b = rocksdb_keyed_state_backend::open(
          max_parallelism, range(i, to),
          dir.path() / ("new-" + std::to_string(to) + "-" + std::to_string(i)), true);
      REQUIRE(b);
      if (auto r = (*b)->begin_restore(stored); !r) FAIL(r.err().message);
      keyed_state_backend::restore_sink sink(**b, max_parallelism);
      auto s = state_file_reader::read(*streamed, sink, {}, 512);
      if (!s) FAIL(s.err().message);
      REQUIRE((*b)->end_restore());
      CHECK((*b)->snapshot_now().value() == whole.snapshot_now().value());
      // The same through restore_with_files.
      auto again = rocksdb_keyed_state_backend::open(
          max_parallelism, range(i, to),
          dir.path() / ("again-" + std::to_string(to) + "-" + std::to_string(i)), true);
      REQUIRE(again);
      REQUIRE((*again)->restore_with_files(stored, {parts[1]}));
      CHECK((*again)->snapshot_now().value() == whole.snapshot_now().value());
    }
  }
}
