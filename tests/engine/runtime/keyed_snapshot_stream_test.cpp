// A deferred keyed snapshot streamed into its state file (deferred_keyed_snapshot::write_to
// into state_file_writer): the rocksdb backend's view holds the state at the snapshot while the
// task goes on writing, and a state many times the writer's buffer is written holding one key
// group at a time and the buffer, never the whole state.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <thread>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/state/key_groups.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_writer.hpp"
#include "engine/state/state_backend_kind.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;

namespace {

constexpr std::uint32_t max_par = 128;

std::unique_ptr<keyed_state_backend> make_backend(state_backend_kind kind,
                                                  const std::filesystem::path& folder) {
  auto b = make_keyed_state_backend(kind, max_par, key_groups::range_for_subtask(0, 1, max_par),
                                    folder);
  REQUIRE(b);
  return std::move(b).value();
}

subtask_snapshot head_for(const deferred_keyed_snapshot& d) {
  subtask_snapshot s;
  s.operator_uid = "keyed";
  s.parallelism = 1;
  s.checkpoint = 5;
  s.keyed.max_parallelism = d.max_parallelism();
  return s;
}

// Passes each key group on to the writer, keeping the size of the largest it was handed.
class measuring_sink final : public keyed_group_sink {
 public:
  explicit measuring_sink(state_file_writer& w) : w_(w) {}
  result<void> key_group(std::uint32_t group, key_group_state& state) override {
    std::size_t bytes = 0;
    for (const auto& [name, keys] : state.values)
      for (const auto& [key, value] : keys) bytes += name.size() + 8 + value.size();
    for (const auto& [name, keys] : state.maps)
      for (const auto& [key, entries] : keys)
        for (const auto& [map_key, value] : entries) bytes += name.size() + 8 + map_key.size() + value.size();
    largest_group_bytes = std::max(largest_group_bytes, bytes);
    ++groups;
    return w_.key_group(group, state);
  }
  std::size_t largest_group_bytes = 0;
  std::size_t groups = 0;

 private:
  state_file_writer& w_;
};

}  // namespace

TEST_CASE("keyed snapshot stream: streamed on another thread while the task writes, holds the "
          "state at the snapshot (rocksdb, and the heap's tables walked in place)") {
  const auto kind = GENERATE(state_backend_kind::rocksdb, state_backend_kind::hashmap);
  temp_folder dir;
  auto b = make_backend(kind, dir.path() / "db");
  std::mt19937_64 rng(5);
  for (std::uint64_t key = 0; key < 3000; ++key) {
    b->set_current_key(key);
    b->set_value_bytes("v", std::string(key % 50, static_cast<char>(key)));
    if (key % 3 == 0) b->map_put_bytes("m", "k" + std::to_string(key % 7), std::string("\0x", 2));
  }
  for (int round = 0; round < 3; ++round) {
    auto expected = b->snapshot_now();
    REQUIRE(expected);
    auto part = b->snapshot();
    REQUIRE(part.deferred);
    const auto file = dir.path() / ("r" + std::to_string(round) + ".state");
    state_file_writer w(file, 4096);
    result<state_file_writer::written> written = error{"not run"};
    std::thread streamer([&, deferred = std::move(part.deferred)]() mutable {
      auto streamed = w.head(head_for(*deferred));
      if (streamed) streamed = deferred->write_to(w);
      deferred.reset();
      written =
          streamed ? w.finish(std::nullopt) : result<state_file_writer::written>(streamed.err());
    });
    for (int i = 0; i < 5000; ++i) {
      const std::uint64_t key = rng() % 4000;
      b->set_current_key(key);
      switch (rng() % 4) {
        case 0: b->clear_value("v"); break;
        case 1: b->map_remove("m", "k" + std::to_string(rng() % 7)); break;
        case 2: b->map_put_bytes("m", "n", std::to_string(i)); break;
        default: b->set_value_bytes("v", std::to_string(i)); break;
      }
    }
    streamer.join();
    REQUIRE(written);
    auto back = state_file::read(written->handle);
    REQUIRE(back);
    CHECK(back->keyed == *expected);
  }
}

TEST_CASE("keyed snapshot stream: the heap backend hands each key group as a walk over its "
          "tables, which visits exactly the neutral form") {
  temp_folder dir;
  auto b = make_backend(state_backend_kind::hashmap, dir.path() / "heap");
  // What the walks must visit, built beside the writes.
  keyed_state_snapshot expected;
  expected.max_parallelism = max_par;
  for (std::uint64_t key = 0; key < 2000; ++key) {
    b->set_current_key(key);
    key_group_state& g = expected.key_groups[key_groups::key_group_for_key(key, max_par)];
    if (key % 2 == 0) {
      b->set_value_bytes("v", std::string(key % 9, 'v'));
      g.values["v"][key] = std::string(key % 9, 'v');
    }
    if (key % 5 == 0) {
      b->set_value_bytes("w", "w");
      g.values["w"][key] = "w";
    }
    if (key % 3 == 0)
      for (int e = 0; e < static_cast<int>(key % 4) + 1; ++e) {
        b->map_put_bytes("m", "k" + std::to_string(e), std::to_string(key));
        g.maps["m"][key]["k" + std::to_string(e)] = std::to_string(key);
      }
  }
  std::erase_if(expected.key_groups, [](const auto& g) { return g.second.empty(); });
  auto part = b->snapshot();
  REQUIRE(part.deferred);

  struct walk_sink final : keyed_group_sink {
    result<void> key_group(std::uint32_t, key_group_state&) override {
      ++collected;
      return success();
    }
    result<void> walked_key_group(std::uint32_t group, const key_group_walk& walk) override {
      seen.key_groups.emplace(group, collect_key_group(walk));
      return success();
    }
    keyed_state_snapshot seen;
    int collected = 0;
  } sink;
  sink.seen.max_parallelism = part.deferred->max_parallelism();
  REQUIRE(part.deferred->write_to(sink));
  CHECK(sink.collected == 0);
  CHECK(sink.seen == expected);
}

TEST_CASE("keyed snapshot stream: a rocksdb state of 64 MiB is written holding one key group "
          "and the writer's buffer") {
  temp_folder dir;
  auto b = make_backend(state_backend_kind::rocksdb, dir.path() / "db");
  constexpr std::size_t value_bytes = 4096;
  constexpr std::uint64_t keys = (64u << 20) / value_bytes;
  for (std::uint64_t key = 0; key < keys; ++key) {
    b->set_current_key(key);
    b->set_value_bytes("big", std::string(value_bytes, static_cast<char>('a' + key % 26)));
  }
  auto part = b->snapshot();
  REQUIRE(part.deferred);
  const auto file = dir.path() / "big.state";
  state_file_writer w(file);
  measuring_sink sink(w);
  REQUIRE(w.head(head_for(*part.deferred)));
  REQUIRE(part.deferred->write_to(sink));
  part.deferred.reset();
  auto written = w.finish(std::nullopt);
  REQUIRE(written);

  CHECK(sink.groups == max_par);
  CHECK(written->key_groups == max_par);
  CHECK(written->handle.size > keys * value_bytes);
  // One key group at a time: each about 1/128 of the state, never the state.
  CHECK(sink.largest_group_bytes < keys * value_bytes / 16);
  // The writer held its buffer plus at most one entry beyond it.
  CHECK(w.peak_buffered_bytes() <= state_file_writer::default_buffer_bytes + value_bytes + 64);
  CHECK(checkpoint_storage::verify_state(written->handle));

  auto back = state_file::read(written->handle);
  REQUIRE(back);
  std::size_t entries = 0;
  for (const auto& [group, state] : back->keyed.key_groups) {
    for (const auto& [key, value] : state.values.at("big")) {
      CHECK(key_groups::key_group_for_key(key, max_par) == group);
      if (value != std::string(value_bytes, static_cast<char>('a' + key % 26))) FAIL("value of " << key);
    }
    entries += state.values.at("big").size();
  }
  CHECK(entries == keys);
}
