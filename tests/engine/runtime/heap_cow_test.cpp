// The hashmap backend's copy-on-write snapshots: a snapshot keeps the state as it was however
// the task changes it afterwards (updates, removals, clears, map changes, tables growing),
// several may be alive at once, one may be materialised on another thread while the task
// writes, and writes copy only what a live snapshot still holds.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <thread>

#include "engine/state/key_groups.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_writer.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "engine/state/int64_state_value.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;

namespace {

constexpr std::uint32_t max_par = 128;

// What the backend should hold, kept independently of it: copied by value at snapshot time.
struct model {
  std::map<std::string, std::map<std::uint64_t, std::int64_t>> values;
  std::map<std::string, std::map<std::uint64_t, std::map<std::string, std::int64_t>>> maps;

  keyed_state_snapshot neutral() const {
    keyed_state_snapshot out;
    out.max_parallelism = max_par;
    for (const auto& [name, keys] : values)
      for (const auto& [key, v] : keys)
        out.key_groups[key_groups::key_group_for_key(key, max_par)].values[name][key] =
            encode_int64_state(v);
    for (const auto& [name, keys] : maps)
      for (const auto& [key, m] : keys)
        for (const auto& [mk, v] : m)
          out.key_groups[key_groups::key_group_for_key(key, max_par)].maps[name][key][mk] =
              encode_int64_state(v);
    return out;
  }
};

// A backend and its model, changed together. Owns key groups 0..63 of 128.
struct harness {
  heap_keyed_state_backend b{max_par, key_groups::range_for_subtask(0, 2, max_par)};
  model m;
  std::vector<std::uint64_t> keys;  // the keys this backend owns, 0.. upwards

  explicit harness(std::size_t n) {
    for (std::uint64_t k = 0; keys.size() < n; ++k)
      if (b.range().contains(key_groups::key_group_for_key(k, max_par))) keys.push_back(k);
  }

  void set(std::uint64_t key, std::int64_t v, const std::string& state = "sum") {
    b.set_current_key(key);
    b.set_value(state, v);
    m.values[state][key] = v;
  }
  void add(std::uint64_t key, std::int64_t d) {
    b.set_current_key(key);
    CHECK(b.add_to_value("sum", d) == (m.values["sum"][key] += d));
  }
  void clear(std::uint64_t key, const std::string& state = "sum") {
    b.set_current_key(key);
    b.clear_value(state);
    auto s = m.values.find(state);
    if (s == m.values.end()) return;
    s->second.erase(key);
    if (s->second.empty()) m.values.erase(s);
  }
  void put(std::uint64_t key, const std::string& mk, std::int64_t v) {
    b.set_current_key(key);
    b.map_put("words", mk, v);
    m.maps["words"][key][mk] = v;
  }
  void remove(std::uint64_t key, const std::string& mk) {
    b.set_current_key(key);
    b.map_remove("words", mk);
    auto s = m.maps.find("words");
    if (s == m.maps.end()) return;
    auto k = s->second.find(key);
    if (k == s->second.end()) return;
    k->second.erase(mk);
    if (k->second.empty()) s->second.erase(k);
    if (s->second.empty()) m.maps.erase(s);
  }

  void fill() {
    for (std::uint64_t key : keys) {
      set(key, static_cast<std::int64_t>(key * 10));
      put(key, "a" + std::to_string(key % 7), static_cast<std::int64_t>(key));
      put(key, "b", 1);
    }
  }

  // `ops` random changes of every kind, keys beyond `keys` included (tables grow).
  void churn(std::mt19937_64& rng, int ops) {
    std::uniform_int_distribution<std::size_t> pick(0, keys.size() - 1);
    for (int i = 0; i < ops; ++i) {
      const std::uint64_t key = keys[pick(rng)];
      switch (rng() % 7) {
        case 0: set(key, static_cast<std::int64_t>(rng() % 1000)); break;
        case 1: add(key, 3); break;
        case 2: clear(key); break;
        case 3: put(key, "a" + std::to_string(rng() % 5), i); break;
        case 4: remove(key, "b"); break;
        case 5: remove(key, "a" + std::to_string(rng() % 7)); break;
        default: set(key, i, "other"); break;
      }
    }
  }

  keyed_state_snapshot now() const {
    auto s = b.snapshot_now();
    REQUIRE(s);
    return std::move(s).value();
  }
};

keyed_state_snapshot materialize(keyed_snapshot_part part) {
  auto s = std::move(part).materialize();
  REQUIRE(s);
  return std::move(s).value();
}

}  // namespace

TEST_CASE("heap cow: a snapshot is unaffected by later updates, removals, clears and map changes") {
  harness h(3000);
  h.fill();
  const model at_snapshot = h.m;
  auto part = h.b.snapshot();
  REQUIRE(part.deferred);  // more keys than ready_entries_max: nothing copied yet

  std::mt19937_64 rng(7);
  h.churn(rng, 20000);
  for (std::size_t i = 0; i < h.keys.size(); i += 3) h.clear(h.keys[i]);
  // New keys: the tables double while the snapshot holds their old buckets.
  harness more(9000);
  for (std::size_t i = h.keys.size(); i < more.keys.size(); ++i) h.set(more.keys[i], 5);

  CHECK(materialize(std::move(part)) == at_snapshot.neutral());
  CHECK(h.now() == h.m.neutral());
  CHECK(h.b.copies().buckets_cloned > 0);
}

TEST_CASE("heap cow: clearing every key leaves the snapshot whole and the backend empty") {
  harness h(2000);
  h.fill();
  const model at_snapshot = h.m;
  auto part = h.b.snapshot();
  for (auto key : h.keys) {
    h.clear(key);
    h.remove(key, "b");
    h.remove(key, "a" + std::to_string(key % 7));
  }
  CHECK(h.b.num_entries() == 0);
  CHECK(h.now().key_groups.empty());
  CHECK(materialize(std::move(part)) == at_snapshot.neutral());
}

TEST_CASE("heap cow: several overlapping snapshots each keep their own state") {
  harness h(2500);
  h.fill();
  std::mt19937_64 rng(11);
  std::vector<model> models;
  std::vector<keyed_snapshot_part> parts;
  for (int i = 0; i < 4; ++i) {
    models.push_back(h.m);
    parts.push_back(h.b.snapshot());
    h.churn(rng, 3000);
  }
  // One dropped unmaterialised, the others materialised out of order.
  parts[1] = {};
  CHECK(materialize(std::move(parts[2])) == models[2].neutral());
  h.churn(rng, 3000);
  CHECK(materialize(std::move(parts[0])) == models[0].neutral());
  CHECK(materialize(std::move(parts[3])) == models[3].neutral());
  CHECK(h.now() == h.m.neutral());
}

TEST_CASE("heap cow: a snapshot materialised on another thread while the task writes") {
  harness h(4000);
  h.fill();
  std::mt19937_64 rng(13);
  for (int round = 0; round < 6; ++round) {
    const keyed_state_snapshot expected = h.m.neutral();
    auto part = h.b.snapshot();
    REQUIRE(part.deferred);
    keyed_state_snapshot got;
    bool ok = false;
    // Odd rounds drop the view unmaterialised: its release races the task's writes.
    const bool drop = round % 2 == 1;
    std::thread writer([&, deferred = std::move(part.deferred)]() mutable {
      if (drop) {
        deferred.reset();
        return;
      }
      auto s = deferred->materialize();
      deferred.reset();
      ok = static_cast<bool>(s);
      if (ok) got = std::move(s).value();
    });
    h.churn(rng, 20000);
    writer.join();
    if (!drop) {
      REQUIRE(ok);
      CHECK(got == expected);
    }
  }
  CHECK(h.now() == h.m.neutral());
}

TEST_CASE("heap cow: a snapshot streamed to its state file on another thread while the task "
          "writes holds the state at the snapshot") {
  temp_folder dir;
  harness h(4000);
  h.fill();
  std::mt19937_64 rng(17);
  for (int round = 0; round < 4; ++round) {
    subtask_snapshot expected;
    expected.operator_uid = "sum";
    expected.parallelism = 2;
    expected.checkpoint = round + 1;
    expected.keyed = h.m.neutral();
    auto part = h.b.snapshot();
    REQUIRE(part.deferred);
    const auto file = dir.path() / ("s" + std::to_string(round) + ".state");
    // A small buffer: many flushes while the task writes.
    state_file_writer w(file, 4096);
    result<state_file_writer::written> written = error{"not run"};
    std::thread writer([&, deferred = std::move(part.deferred)]() mutable {
      subtask_snapshot head = expected;
      head.keyed.key_groups.clear();
      head.keyed.max_parallelism = deferred->max_parallelism();
      auto streamed = w.head(head);
      if (streamed) streamed = deferred->write_to(w);
      deferred.reset();
      written = streamed ? w.finish(std::nullopt) : result<state_file_writer::written>(streamed.err());
    });
    h.churn(rng, 20000);
    writer.join();
    REQUIRE(written);
    CHECK(written->key_groups == expected.keyed.key_groups.size());
    auto back = state_file::read(written->handle);
    REQUIRE(back);
    CHECK(*back == expected);
  }
  CHECK(h.now() == h.m.neutral());
}

TEST_CASE("heap cow: writes copy only what a live snapshot holds") {
  harness h(20000);
  for (auto key : h.keys) h.set(key, 1);
  const auto before = h.b.copies();
  CHECK(before.buckets_cloned == 0);
  CHECK(before.tables_cloned == 0);

  auto part = h.b.snapshot();
  REQUIRE(part.deferred);
  // The synchronous part: one reference per key group and state, no entry.
  CHECK(h.b.synchronous_snapshot_entries() == h.b.range().size());
  CHECK(h.b.copies().entries_copied == 0);

  // 1% of the keys change: a few entries copied per change, far from the whole state.
  for (std::size_t i = 0; i < h.keys.size(); i += 100) h.add(h.keys[i], 1);
  const auto during = h.b.copies();
  CHECK(during.buckets_cloned > 0);
  CHECK(during.buckets_cloned <= h.keys.size() / 100);
  CHECK(during.entries_copied < h.keys.size() / 20);
  CHECK(during.tables_cloned <= h.b.range().size());
  CHECK(during.chunks_cloned <= during.buckets_cloned);

  // Rewriting the same keys copies nothing more: those buckets are the task's own now.
  for (std::size_t i = 0; i < h.keys.size(); i += 100) h.add(h.keys[i], 1);
  CHECK(h.b.copies().buckets_cloned == during.buckets_cloned);

  // Released: the next writes, to every key, copy nothing.
  part = {};
  for (auto key : h.keys) h.add(key, 1);
  h.set(h.keys[0], 9, "fresh");
  CHECK(h.b.copies().buckets_cloned == during.buckets_cloned);
  CHECK(h.b.copies().tables_cloned == during.tables_cloned);
  CHECK(h.b.copies().chunks_cloned == during.chunks_cloned);
  CHECK(h.b.copies().entries_copied == during.entries_copied);
  CHECK(h.now() == h.m.neutral());
}

TEST_CASE("heap cow: reads and no-op removals copy nothing while a snapshot is alive") {
  harness h(3000);
  h.fill();
  auto part = h.b.snapshot();
  for (auto key : h.keys) {
    h.b.set_current_key(key);
    CHECK(h.b.value("sum") == static_cast<std::int64_t>(key * 10));
    CHECK(h.b.map_entries("words").size() == 2);
    h.b.map_remove("words", "absent");
    h.b.map_remove("absent", "b");
    h.b.clear_value("absent");
  }
  CHECK(h.b.copies().buckets_cloned == 0);
  CHECK(h.b.copies().chunks_cloned == 0);
  CHECK(h.b.copies().tables_cloned == 0);
}

TEST_CASE("heap cow: a small state is copied at once, a large one deferred") {
  harness h(heap_keyed_state_backend::ready_entries_max / 2);  // two entries per key
  for (auto key : h.keys) h.set(key, 1);
  CHECK(h.b.synchronous_snapshot_entries() == h.keys.size());
  auto small = h.b.snapshot();
  CHECK(!small.deferred);
  CHECK(small.ready == h.m.neutral());
  for (auto key : h.keys) h.put(key, "x", 2);
  for (std::uint64_t k = 0; h.b.num_entries() <= heap_keyed_state_backend::ready_entries_max; ++k)
    if (h.b.range().contains(key_groups::key_group_for_key(k, max_par))) h.set(k, 3, "more");
  auto large = h.b.snapshot();
  CHECK(large.deferred);
  CHECK(materialize(std::move(large)) == h.m.neutral());
}

TEST_CASE("heap cow: a deferred snapshot materialises once") {
  harness h(2000);
  h.fill();
  auto part = h.b.snapshot();
  REQUIRE(part.deferred);
  CHECK(part.deferred->materialize());
  auto again = part.deferred->materialize();
  REQUIRE(!again);
  CHECK(again.err().message.find("twice") != std::string::npos);
}

TEST_CASE("heap cow: restore then snapshot gives back the same state, empty maps dropped") {
  harness h(3000);
  h.fill();
  keyed_state_snapshot s = h.now();
  s.key_groups.begin()->second.maps["words"][999999] = {};  // a key with no entries
  heap_keyed_state_backend r(max_par, h.b.range());
  REQUIRE(r.restore({s}));
  auto back = r.snapshot_now();
  REQUIRE(back);
  CHECK(*back == h.m.neutral());
  CHECK(r.num_entries() == h.b.num_entries());
  // Writing to the restored state after a snapshot of it copies, and keeps the snapshot.
  auto part = r.snapshot();
  r.set_current_key(h.keys[0]);
  r.set_value("sum", -1);
  CHECK(r.copies().buckets_cloned == 1);
  CHECK(materialize(std::move(part)) == h.m.neutral());
}
