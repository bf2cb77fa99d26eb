// The hashmap keyed state backend and state files: scoping by key, snapshot and restore,
// redistribution over a different parallelism, corrupt files refused.
#include <catch2/catch.hpp>

#include <fstream>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/keyed_state_backend.hpp"
#include "engine/runtime/state_file.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

keyed_state_backend backend_for(std::uint32_t index, std::uint32_t parallelism,
                                std::uint32_t max_parallelism = 128) {
  return keyed_state_backend(max_parallelism,
                             key_groups::range_for_subtask(index, parallelism, max_parallelism));
}

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

subtask_snapshot snapshot_of(const keyed_state_backend& b, std::uint32_t index,
                             std::uint32_t parallelism, checkpoint_id id = 3) {
  subtask_snapshot s;
  s.operator_uid = "sum";
  s.subtask_index = index;
  s.parallelism = parallelism;
  s.checkpoint = id;
  s.keyed = b.snapshot();
  return s;
}

}  // namespace

TEST_CASE("keyed state: value and map state are scoped to the current key") {
  auto b = backend_for(0, 1);
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
}

TEST_CASE("keyed state: a snapshot is a copy that later updates do not change") {
  auto b = backend_for(0, 1);
  b.set_current_key(4);
  b.set_value("sum", 1);
  const keyed_state_snapshot snap = b.snapshot();
  b.set_value("sum", 2);
  auto restored = backend_for(0, 1);
  REQUIRE(restored.restore({snap}));
  restored.set_current_key(4);
  CHECK(restored.value("sum") == 1);
}

TEST_CASE("keyed state: a state file round-trips through disk with its checksum") {
  temp_folder dir;
  auto b = backend_for(1, 2);
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
  auto b = backend_for(1, 2);
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
    auto b = backend_for(1, 2);
    fill(b, 1, 2, keys);
    const subtask_snapshot s = snapshot_of(b, 1, 2);
    CHECK(state_file::may_fit(s, state_file::encode(s).size()));
  }
}

TEST_CASE("keyed state: restore at a different parallelism keeps exactly the owned key groups") {
  temp_folder dir;
  constexpr std::uint64_t keys = 1000;
  // Taken at parallelism 2 ...
  std::vector<state_handle> handles;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto b = backend_for(i, 2);
    fill(b, i, 2, keys);
    auto h =
        state_file::write(dir.path() / state_file::file_name("sum", i, 0), snapshot_of(b, i, 2));
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
      auto b = backend_for(i, p);
      REQUIRE(b.restore(parts));
      total += b.num_entries();
      for (std::uint64_t key = 0; key < keys; ++key) {
        if (key_groups::subtask_for_key(key, p, 128) != i) continue;
        b.set_current_key(key);
        REQUIRE(b.value("sum") == static_cast<std::int64_t>(key * 10));
        REQUIRE(b.map_get("words", "k" + std::to_string(key)) == static_cast<std::int64_t>(key));
      }
    }
    // Each key has a value and a map entry, owned by exactly one new subtask.
    CHECK(total == 2 * keys);
  }
}

TEST_CASE("keyed state: restore refuses state of another max parallelism") {
  auto old = backend_for(0, 1, 64);
  fill(old, 0, 1, 10);
  auto b = backend_for(0, 1, 128);
  auto r = b.restore({old.snapshot()});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("max parallelism"));
}

TEST_CASE("keyed state: a corrupt state file is refused with a clear error") {
  temp_folder dir;
  auto b = backend_for(0, 1);
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
  auto b = backend_for(0, 1);
  fill(b, 0, 1, 20);
  const std::string bytes = state_file::encode(snapshot_of(b, 0, 1));
  for (std::size_t cut = 0; cut < bytes.size(); cut += 7)
    CHECK_FALSE(state_file::decode(bytes.substr(0, cut)));
  std::string forged = bytes;
  forged[40] = static_cast<char>(0xff);  // a length or count inside the body
  CHECK_FALSE(state_file::decode(forged));
  CHECK(state_file::decode(bytes));
}
