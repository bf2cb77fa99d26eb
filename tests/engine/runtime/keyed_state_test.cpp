// The keyed state backends (hashmap and rocksdb, the same behaviour from both) and state
// files: scoping by key, snapshot and restore, redistribution over a different parallelism,
// moving state between backends, corrupt files refused.
#include <catch2/catch.hpp>

#include <fstream>
#include <limits>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "engine/state/int64_state_value.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"
#include "engine/state/state_backend_kind.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

// Makes backends of one kind, each in a working folder of its own under one temporary folder.
template <state_backend_kind Kind>
struct backends {
  static constexpr state_backend_kind kind = Kind;
  temp_folder dir;
  int made = 0;

  std::unique_ptr<keyed_state_backend> make(std::uint32_t index, std::uint32_t parallelism,
                                            std::uint32_t max_parallelism = 128) {
    auto b = make_keyed_state_backend(
        Kind, max_parallelism, key_groups::range_for_subtask(index, parallelism, max_parallelism),
        dir.path() / ("backend-" + std::to_string(made++)));
    REQUIRE(b);
    return std::move(b).value();
  }
};
using hashmap_backends = backends<state_backend_kind::hashmap>;
using rocksdb_backends = backends<state_backend_kind::rocksdb>;

// Every key 0..n-1 that subtask `index` of `parallelism` owns gets sum = key * 10 and a map
// entry "k<key>" -> key.
void fill(keyed_state_backend& b, std::uint32_t index, std::uint32_t parallelism, std::uint64_t n) {
  for (std::uint64_t key = 0; key < n; ++key) {
    if (key_groups::subtask_for_key(key, parallelism, b.max_parallelism()) != index) continue;
    b.set_current_key(key);
    b.set_value("sum", static_cast<std::int64_t>(key * 10));
    b.map_put("words", "k" + std::to_string(key), static_cast<std::int64_t>(key));
  }
}

keyed_state_snapshot snapshot_now(const keyed_state_backend& b) {
  auto s = b.snapshot_now();
  REQUIRE(s);
  return std::move(s).value();
}

subtask_snapshot snapshot_of(const keyed_state_backend& b, std::uint32_t index,
                             std::uint32_t parallelism, checkpoint_id id = 3) {
  subtask_snapshot s;
  s.operator_uid = "sum";
  s.subtask_index = index;
  s.parallelism = parallelism;
  s.checkpoint = id;
  s.keyed = snapshot_now(b);
  return s;
}

// Every key of 0..n-1 this backend owns has what fill() gave it.
void check_filled(keyed_state_backend& b, std::uint32_t index, std::uint32_t parallelism,
                  std::uint64_t n) {
  for (std::uint64_t key = 0; key < n; ++key) {
    if (key_groups::subtask_for_key(key, parallelism, b.max_parallelism()) != index) continue;
    b.set_current_key(key);
    REQUIRE(b.value("sum") == static_cast<std::int64_t>(key * 10));
    REQUIRE(b.map_get("words", "k" + std::to_string(key)) == static_cast<std::int64_t>(key));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("keyed state: value and map state are scoped to the current key", "",
                   hashmap_backends, rocksdb_backends) {
  TestType made;
  auto owned = made.make(0, 1);
  auto& b = *owned;
  b.set_current_key(1);
  CHECK_FALSE(b.value("sum"));
  b.set_value("sum", 5);
  b.map_put("m", "a", 1);
  b.map_put("m", "b", 2);
  b.set_current_key(2);
  CHECK_FALSE(b.value("sum"));
  CHECK(b.map_entries("m").empty());
  b.set_value("sum", 7);
  b.set_current_key(1);
  CHECK(b.value("sum") == 5);
  CHECK(b.map_get("m", "b") == 2);
  CHECK(b.map_entries("m") ==
        std::vector<std::pair<std::string, std::int64_t>>{{"a", 1}, {"b", 2}});
  b.map_remove("m", "a");
  CHECK_FALSE(b.map_get("m", "a"));
  b.clear_value("sum");
  CHECK_FALSE(b.value("sum"));
  b.set_current_key(2);
  CHECK(b.value("sum") == 7);
  CHECK(b.num_entries() == 2);  // key 2's sum, key 1's map
  // Value and map state of the same name are different states.
  b.map_put("sum", "x", 3);
  CHECK(b.value("sum") == 7);
  CHECK(b.map_get("sum", "x") == 3);
  b.set_current_key(1);
  b.map_remove("m", "b");
  CHECK(b.map_entries("m").empty());
  CHECK(b.num_entries() == 2);  // key 2's value "sum" and its map "sum"; key 1 has none
}

TEMPLATE_TEST_CASE("keyed state: add_to_value starts from 0 and returns the new value", "",
                   hashmap_backends, rocksdb_backends) {
  TestType made;
  auto owned = made.make(0, 1);
  auto& b = *owned;
  b.set_current_key(9);
  CHECK(b.add_to_value("count", 1) == 1);
  CHECK(b.add_to_value("count", 41) == 42);
  CHECK(b.add_to_value("count", -50) == -8);
  CHECK(b.value("count") == -8);
  b.set_current_key(10);
  CHECK(b.add_to_value("count", 0) == 0);
  CHECK(b.value("count") == 0);  // created, as on the heap
}

TEMPLATE_TEST_CASE("keyed state: map entries come ordered by map key, bytewise", "",
                   hashmap_backends, rocksdb_backends) {
  TestType made;
  auto owned = made.make(0, 1);
  auto& b = *owned;
  b.set_current_key(3);
  for (const char* k : {"b", "a", "ab", "", "\xff", "B"}) b.map_put("m", k, 1);
  b.map_put("m2", "zz", 2);  // another state, and another key, stay out
  b.set_current_key(4);
  b.map_put("m", "c", 3);
  b.set_current_key(3);
  std::vector<std::string> keys;
  for (const auto& [k, v] : b.map_entries("m")) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"", "B", "a", "ab", "b", "\xff"});
}

TEMPLATE_TEST_CASE("keyed state: later updates do not change a snapshot", "", hashmap_backends,
                   rocksdb_backends) {
  TestType made;
  auto owned = made.make(0, 1);
  auto& b = *owned;
  b.set_current_key(4);
  b.set_value("sum", 1);
  b.map_put("m", "a", 1);
  b.set_current_key(5);
  b.set_value("gone", 5);
  // Taken now, materialised only after the updates below (what the snapshot writer does).
  keyed_snapshot_part part = b.snapshot();
  CHECK((part.deferred != nullptr) == (TestType::kind == state_backend_kind::rocksdb));
  b.clear_value("gone");
  b.set_current_key(4);
  b.set_value("sum", 2);
  b.map_put("m", "a", 2);
  b.map_put("m", "b", 3);
  b.set_current_key(6);
  b.set_value("new", 6);
  auto snap = std::move(part).materialize();
  REQUIRE(snap);
  CHECK(snap->max_parallelism == 128);
  keyed_state_snapshot expected;
  expected.max_parallelism = 128;
  expected.key_groups[key_groups::key_group_for_key(4, 128)].values["sum"][4] = encode_int64_state(1);
  expected.key_groups[key_groups::key_group_for_key(4, 128)].maps["m"][4]["a"] = encode_int64_state(1);
  expected.key_groups[key_groups::key_group_for_key(5, 128)].values["gone"][5] = encode_int64_state(5);
  CHECK(*snap == expected);

  auto restored = made.make(0, 1);
  REQUIRE(restored->restore({*snap}));
  restored->set_current_key(4);
  CHECK(restored->value("sum") == 1);
  CHECK(restored->map_entries("m") == std::vector<std::pair<std::string, std::int64_t>>{{"a", 1}});
  restored->set_current_key(6);
  CHECK_FALSE(restored->value("new"));
}

TEMPLATE_TEST_CASE("keyed state: restore replaces what the backend held", "", hashmap_backends,
                   rocksdb_backends) {
  TestType made;
  auto owned = made.make(0, 1);
  auto& b = *owned;
  b.set_current_key(1);
  b.set_value("sum", 1);
  const keyed_state_snapshot one = snapshot_now(b);
  b.set_current_key(2);
  b.set_value("sum", 2);
  REQUIRE(b.restore({one}));
  CHECK(b.value("sum") == std::nullopt);
  b.set_current_key(1);
  CHECK(b.value("sum") == 1);
  // A refused restore changes nothing.
  keyed_state_snapshot other = one;
  other.max_parallelism = 64;
  CHECK_FALSE(b.restore({other}));
  CHECK(b.value("sum") == 1);
  CHECK(b.num_entries() == 1);
}

TEST_CASE("keyed state: a state file round-trips through disk with its checksum") {
  temp_folder dir;
  heap_keyed_state_backend b(128, key_groups::range_for_subtask(1, 2, 128));
  fill(b, 1, 2, 100);
  subtask_snapshot s = snapshot_of(b, 1, 2);
  s.operator_state.push_back({"offset", "42"});
  const auto file = dir.path() / "chk-3" / state_file::file_name("sum", 1, 0);
  auto handle = state_file::write(file, s);
  REQUIRE(handle);
  CHECK(handle->path == file.string());
  CHECK(handle->size == std::filesystem::file_size(file));
  CHECK(handle->checksum == crc32c(state_file::encode(s)));
  auto back = state_file::read(*handle);
  REQUIRE(back);
  CHECK(*back == s);
  // Named after uid, subtask and attempt; no stray temp file.
  CHECK(list_names(dir.path() / "chk-3") == std::vector<std::string>{file.filename().string()});
  CHECK(file.filename().string().rfind("sum-", 0) == 0);
  CHECK(file.filename().string().find("-1-0.state") != std::string::npos);
}

TEST_CASE("keyed state: a small state goes inline, checked by size and checksum, with no file") {
  heap_keyed_state_backend b(128, key_groups::range_for_subtask(1, 2, 128));
  fill(b, 1, 2, 10);
  subtask_snapshot s = snapshot_of(b, 1, 2);
  s.operator_state.push_back({"offset", "42"});
  const std::string bytes = state_file::encode(s);
  CHECK(state_file::may_fit(s, bytes.size()));
  CHECK_FALSE(state_file::may_fit(s, 16));
  const state_handle handle = state_file::make_inline(bytes);
  CHECK(handle.is_inline());
  CHECK(handle.path.empty());
  CHECK(handle.size == bytes.size());
  // The handle's checksum is derived from the trailer, not a second pass: it must still be the
  // CRC-32C of every byte.
  CHECK(handle.checksum == crc32c(bytes));
  auto back = state_file::read(handle);
  REQUIRE(back);
  CHECK(*back == s);

  state_handle corrupt = handle;
  (*corrupt.inline_bytes)[bytes.size() / 2] ^= 0x20;
  auto refused = state_file::read(corrupt);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().message.find("checksum") != std::string::npos);
  state_handle cut = handle;
  cut.inline_bytes->pop_back();
  CHECK_FALSE(state_file::read(cut));
}

TEST_CASE("keyed state: may_fit is a lower bound, never refusing a state that fits") {
  for (int keys : {0, 1, 7, 50, 400}) {
    heap_keyed_state_backend b(128, key_groups::range_for_subtask(1, 2, 128));
    fill(b, 1, 2, keys);
    const subtask_snapshot s = snapshot_of(b, 1, 2);
    CHECK(state_file::may_fit(s, state_file::encode(s).size()));
  }
}

TEMPLATE_TEST_CASE("keyed state: restore at a different parallelism keeps exactly the owned "
                   "key groups", "", hashmap_backends, rocksdb_backends) {
  TestType made;
  temp_folder dir;
  constexpr std::uint64_t keys = 1000;
  // Taken at parallelism 2 ...
  std::vector<state_handle> handles;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto b = made.make(i, 2);
    fill(*b, i, 2, keys);
    auto h =
        state_file::write(dir.path() / state_file::file_name("sum", i, 0), snapshot_of(*b, i, 2));
    REQUIRE(h);
    handles.push_back(*h);
  }
  // ... restored at 3, 1 and 4: every new subtask reads every old file.
  for (std::uint32_t p : {3u, 1u, 4u}) {
    std::vector<keyed_state_snapshot> parts;
    for (const auto& h : handles) {
      auto s = state_file::read(h);
      REQUIRE(s);
      parts.push_back(s->keyed);
    }
    std::size_t total = 0;
    for (std::uint32_t i = 0; i < p; ++i) {
      auto b = made.make(i, p);
      REQUIRE(b->restore(parts));
      total += b->num_entries();
      check_filled(*b, i, p, keys);
    }
    // Each key has a value and a map entry, owned by exactly one new subtask.
    CHECK(total == 2 * keys);
  }
}

TEMPLATE_TEST_CASE("keyed state: one subtask's state splits over two and merges back", "",
                   hashmap_backends, rocksdb_backends) {
  TestType made;
  constexpr std::uint64_t keys = 300;
  auto one = made.make(0, 1);
  fill(*one, 0, 1, keys);
  const keyed_state_snapshot whole = snapshot_now(*one);
  // 1 -> 2: each new subtask keeps its own half.
  std::vector<keyed_state_snapshot> halves;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto b = made.make(i, 2);
    REQUIRE(b->restore({whole}));
    check_filled(*b, i, 2, keys);
    auto half = snapshot_now(*b);
    for (const auto& [group, _] : half.key_groups)
      CHECK(b->range().contains(group));
    halves.push_back(std::move(half));
  }
  // 2 -> 1: the halves merge into what was taken.
  auto merged = made.make(0, 1);
  REQUIRE(merged->restore(halves));
  CHECK(snapshot_now(*merged) == whole);
  check_filled(*merged, 0, 1, keys);
}

TEST_CASE("keyed state: a hashmap snapshot restored into rocksdb and back is unchanged") {
  hashmap_backends heap;
  rocksdb_backends rocks;
  auto original = heap.make(0, 1);
  fill(*original, 0, 1, 500);
  original->set_current_key(7);
  original->set_value("other", -1);
  original->map_put("other", "", std::numeric_limits<std::int64_t>::min());
  original->set_current_key(8);
  original->map_put("binary", std::string("a\0b", 3), std::numeric_limits<std::int64_t>::max());
  const keyed_state_snapshot taken = snapshot_now(*original);

  auto in_rocks = rocks.make(0, 1);
  REQUIRE(in_rocks->restore({taken}));
  const keyed_state_snapshot from_rocks = snapshot_now(*in_rocks);
  CHECK(from_rocks == taken);
  auto back = heap.make(0, 1);
  REQUIRE(back->restore({from_rocks}));
  CHECK(snapshot_now(*back) == taken);
  CHECK(back->num_entries() == original->num_entries());
  CHECK(in_rocks->num_entries() == original->num_entries());
}

TEST_CASE("keyed state: the rocksdb working folder is the backend's own and goes with it") {
  temp_folder dir;
  const auto folder = dir.path() / "rocksdb" / "job-1-0-0";
  // A leftover of an earlier process is cleared, not opened.
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "stale") << "x";
  std::optional<keyed_state_snapshot> later;
  {
    auto made = rocksdb_keyed_state_backend::open(128, key_groups::range_for_subtask(0, 1, 128),
                                                  folder);
    REQUIRE(made);
    auto& b = **made;
    CHECK(b.folder() == folder);
    CHECK_FALSE(std::filesystem::exists(folder / "stale"));
    CHECK(std::filesystem::exists(folder / "db" / "CURRENT"));
    b.set_current_key(1);
    b.set_value("v", 1);
    // A snapshot not yet materialised keeps the instance (and folder) alive past the backend.
    keyed_snapshot_part part = b.snapshot();
    made = error{"closed"};
    CHECK(std::filesystem::exists(folder));
    auto s = std::move(part).materialize();
    REQUIRE(s);
    later = *s;
  }
  CHECK_FALSE(std::filesystem::exists(folder));
  REQUIRE(later);
  CHECK(later->key_groups.size() == 1);
}

TEST_CASE("keyed state: the rocksdb backend refuses what it cannot hold, saying why") {
  temp_folder dir;
  auto too_wide = rocksdb_keyed_state_backend::open(65536, {0, 10}, dir.path() / "x");
  REQUIRE_FALSE(too_wide);
  CHECK_THAT(too_wide.err().message, Catch::Contains("max parallelism"));
  auto no_folder = make_keyed_state_backend(state_backend_kind::rocksdb, 128, {0, 127}, {});
  REQUIRE_FALSE(no_folder);
  CHECK_THAT(no_folder.err().message, Catch::Contains("working folder"));
  CHECK(parse_state_backend("rocksdb").value() == state_backend_kind::rocksdb);
  CHECK(parse_state_backend("hashmap").value() == state_backend_kind::hashmap);
  auto unknown = parse_state_backend("memory");
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.err().message, Catch::Contains("'memory'") && Catch::Contains("rocksdb"));
}

TEST_CASE("keyed state: a corrupt state file is refused with a clear error") {
  temp_folder dir;
  heap_keyed_state_backend b(128, key_groups::range_for_subtask(0, 1, 128));
  fill(b, 0, 1, 50);
  const auto file = dir.path() / "sum.state";
  auto handle = state_file::write(file, snapshot_of(b, 0, 1));
  REQUIRE(handle);
  {
    // Flip one byte in the middle.
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(handle->size / 2));
    char c = 0;
    f.seekg(static_cast<std::streamoff>(handle->size / 2));
    f.get(c);
    f.seekp(static_cast<std::streamoff>(handle->size / 2));
    f.put(static_cast<char>(c ^ 0x5a));
  }
  auto r = state_file::read(*handle);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("refusing corrupt state"));
  CHECK_THAT(r.err().message, Catch::Contains("checksum"));
  CHECK_THAT(r.err().message, Catch::Contains(file.string()));

  // A truncated file fails on its size.
  std::filesystem::resize_file(file, handle->size - 3);
  auto truncated = state_file::read(*handle);
  REQUIRE_FALSE(truncated);
  CHECK_THAT(truncated.err().message, Catch::Contains("bytes, expected"));
}

TEST_CASE("keyed state: decoding garbage or cut-off bytes fails cleanly") {
  heap_keyed_state_backend b(128, key_groups::range_for_subtask(0, 1, 128));
  fill(b, 0, 1, 20);
  const std::string bytes = state_file::encode(snapshot_of(b, 0, 1));
  for (std::size_t cut = 0; cut < bytes.size(); cut += 7)
    CHECK_FALSE(state_file::decode(bytes.substr(0, cut)));
  std::string forged = bytes;
  forged[40] = static_cast<char>(0xff);  // a length or count inside the body
  CHECK_FALSE(state_file::decode(forged));
  CHECK(state_file::decode(bytes));
}

TEMPLATE_TEST_CASE("keyed state: values and map entries are bytes of any length and content", "",
                   hashmap_backends, rocksdb_backends) {
  TestType made;
  auto owned = made.make(0, 1);
  auto& b = *owned;
  const std::string binary("\0\xff\0v", 4);
  const std::string large(1 << 20, 'x');
  b.set_current_key(1);
  b.set_value_bytes("blob", binary);
  b.map_put_bytes("m", std::string("\0k", 2), large);
  b.map_put_bytes("m", "empty", "");
  b.set_current_key(2);
  b.set_value_bytes("blob", "");  // an empty value is a value, not an absent one
  CHECK(b.value_bytes("blob") == std::string());
  b.set_current_key(1);
  CHECK(b.value_bytes("blob") == binary);
  CHECK(b.map_get_bytes("m", std::string("\0k", 2)) == large);
  CHECK(b.map_entries_bytes("m") == std::vector<std::pair<std::string, std::string>>{
                                        {std::string("\0k", 2), large}, {"empty", ""}});
  // Overwritten with a shorter value, then back through a snapshot into a fresh backend.
  b.set_value_bytes("blob", "z");
  auto restored = made.make(0, 1);
  REQUIRE(restored->restore({snapshot_now(b)}));
  restored->set_current_key(1);
  CHECK(restored->value_bytes("blob") == "z");
  CHECK(restored->map_get_bytes("m", std::string("\0k", 2)) == large);
  restored->set_current_key(2);
  CHECK(restored->value_bytes("blob") == std::string());
  // Through a state file too.
  subtask_snapshot s = snapshot_of(b, 0, 1);
  auto decoded = state_file::decode(state_file::encode(s));
  REQUIRE(decoded);
  CHECK(*decoded == s);
}

TEMPLATE_TEST_CASE("keyed state: an int64 read of a value of another length throws, naming the "
                   "state",
                   "", hashmap_backends, rocksdb_backends) {
  TestType made;
  auto owned = made.make(0, 1);
  auto& b = *owned;
  b.set_current_key(5);
  b.set_value_bytes("sum", "abc");
  b.map_put_bytes("m", "k", "0123456789");
  CHECK_THROWS_WITH(b.value("sum"), Catch::Contains("'sum'") && Catch::Contains("3 bytes"));
  CHECK_THROWS_AS(b.add_to_value("sum", 1), state_type_error);
  CHECK_THROWS_WITH(b.map_get("m", "k"), Catch::Contains("'m'") && Catch::Contains("10 bytes"));
  CHECK_THROWS_AS(b.map_entries("m"), state_type_error);
  CHECK(b.value_bytes("sum") == "abc");  // the failed add changed nothing
  // int64 values are the 8 bytes int64_state_value.hpp encodes, whichever way they were put.
  b.set_value("n", -2);
  CHECK(b.value_bytes("n") == encode_int64_state(-2));
  b.set_value_bytes("n", encode_int64_state(40));
  CHECK(b.add_to_value("n", 2) == 42);
}

namespace {

// A version 1 state file (int64 values, as written before values were bytes), built by hand:
// `key`'s key group (max parallelism 128) with value state "sum" {key -> -5} and map state "m"
// {key -> {"a" -> 9}}.
std::string version_1_state_file(std::uint64_t key) {
  std::string body;
  auto u32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  auto u64 = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) body.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  auto str = [&](std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    body.append(s);
  };
  str("sum");  // uid
  u32(0);      // subtask
  u32(1);      // parallelism
  u64(4);      // checkpoint
  u32(0);      // operator state
  u32(128);    // max parallelism
  u32(1);      // key groups
  u32(key_groups::key_group_for_key(key, 128));
  u32(1);  // value states
  str("sum");
  u32(1);
  u64(key);
  u64(static_cast<std::uint64_t>(std::int64_t{-5}));
  u32(1);  // map states
  str("m");
  u32(1);
  u64(key);
  u32(1);
  str("a");
  u64(9);
  std::string out(state_file::magic);
  std::string header;
  body.swap(header);
  u32(state_file::version_int64);
  u64(header.size());
  std::string file = out + body + header;
  const std::uint32_t crc = crc32c(file);
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return file;
}

}  // namespace

TEST_CASE("keyed state: a state file of the int64 format is still read, its values as int64 "
          "state") {
  constexpr std::uint64_t key = 3;
  auto decoded = state_file::decode(version_1_state_file(key));
  REQUIRE(decoded);
  const auto& g = decoded->keyed.key_groups.at(key_groups::key_group_for_key(key, 128));
  CHECK(g.values.at("sum").at(key) == encode_int64_state(-5));
  CHECK(g.maps.at("m").at(key).at("a") == encode_int64_state(9));
  CHECK_FALSE(decoded->keyed_files);
  // What a backend restored from it reads as int64 again.
  heap_keyed_state_backend b(128, key_groups::range_for_subtask(0, 1, 128));
  REQUIRE(b.restore({decoded->keyed}));
  b.set_current_key(key);
  CHECK(b.value("sum") == -5);
  CHECK(b.map_get("m", "a") == 9);
  // Written again, it is version 4 and decodes to the same.
  const std::string again = state_file::encode(*decoded);
  CHECK(again.substr(state_file::magic.size(), 4) == std::string("\x06\0\0\0", 4));
  auto back = state_file::decode(again);
  REQUIRE(back);
  CHECK(*back == *decoded);
}
