// Typed keyed state over the bytes-level context of a real backend (hashmap and rocksdb): each
// kind, TTL under a manual clock, isolation of user keys whose record.key collides, and state
// that survives a snapshot and a restore into either backend.
#include <catch2/catch.hpp>

#include "engine/api/key_hash.hpp"
#include "engine/api/keyed_process_context.hpp"
#include "engine/api/manual_clock.hpp"
#include "engine/runtime/backend_keyed_context.hpp"
#include "engine/state/state_backend_kind.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using namespace snapflow::api;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t max_parallelism = 128;

struct backend_fixture {
  testing::temp_folder dir{"api-state"};
  int made = 0;

  std::unique_ptr<keyed_state_backend> make(state_backend_kind kind) {
    auto b = make_keyed_state_backend(kind, max_parallelism,
                                      key_groups::range_for_subtask(0, 1, max_parallelism),
                                      dir.path() / ("backend-" + std::to_string(made++)));
    REQUIRE(b);
    return std::move(b).value();
  }
};

// A user key's typed state: the backend's current key is `hashed`, the scope the user key's.
struct scoped {
  scoped(keyed_state_backend& backend, std::uint64_t hashed, const std::string& user_key,
         std::shared_ptr<const processing_clock> clock)
      : context(at_key(backend, hashed)), scope(context, encode(user_key), std::move(clock)) {}
  static backend_keyed_context at_key(keyed_state_backend& backend, std::uint64_t hashed) {
    backend.set_current_key(hashed);
    return backend_keyed_context(backend);
  }
  backend_keyed_context context;
  state_scope scope;
};

state_backend_kind any_backend() {
  return GENERATE(state_backend_kind::hashmap, state_backend_kind::rocksdb);
}

}  // namespace

TEST_CASE("typed state: value, list, map and reducing state of one key") {
  backend_fixture f;
  auto backend = f.make(any_backend());
  auto clock = std::make_shared<manual_clock>();
  scoped s(*backend, 7, "alice", clock);

  value_state<std::string> name(s.scope, "name");
  CHECK_FALSE(name.value());
  name.update("Alice");
  CHECK(name.value() == std::string("Alice"));
  name.clear();
  CHECK_FALSE(name.value());

  list_state<std::int64_t> seen(s.scope, "seen");
  CHECK(seen.get().empty());
  seen.add(1);
  seen.add_all({2, 3});
  CHECK(seen.get() == std::vector<std::int64_t>{1, 2, 3});
  seen.update({});
  CHECK(seen.get().empty());

  map_state<std::string, std::int64_t> counts(s.scope, "counts");
  CHECK(counts.empty());
  counts.put("b", 2);
  counts.put("a", 1);
  CHECK(counts.get("a") == std::int64_t{1});
  CHECK(counts.contains("b"));
  CHECK_FALSE(counts.get("c"));
  CHECK(counts.entries() ==
        std::vector<std::pair<std::string, std::int64_t>>{{"a", 1}, {"b", 2}});
  counts.remove("a");
  CHECK_FALSE(counts.contains("a"));
  counts.clear();
  CHECK(counts.empty());

  reducing_state<std::int64_t> largest(
      s.scope, "largest", [](std::int64_t a, std::int64_t b) { return std::max(a, b); });
  largest.add(3);
  largest.add(9);
  largest.add(4);
  CHECK(largest.get() == std::int64_t{9});
}

TEST_CASE("typed state: a value state and a map state of one name stay apart") {
  backend_fixture f;
  auto backend = f.make(any_backend());
  scoped s(*backend, 1, "k", std::make_shared<manual_clock>());
  value_state<std::int64_t> v(s.scope, "x");
  map_state<std::int64_t, std::int64_t> m(s.scope, "x");
  v.update(5);
  m.put(1, 10);
  CHECK(v.value() == std::int64_t{5});
  CHECK(m.entries().size() == 1);
  // The int64 value state of the same name, through the old interface, is another state again.
  CHECK_FALSE(s.context.value("x"));
}

TEST_CASE("typed state: user keys whose record.key collides never share state") {
  backend_fixture f;
  auto backend = f.make(any_backend());
  auto clock = std::make_shared<manual_clock>();
  // Both user keys arrive with the same record.key, as two keys with one 64-bit hash would.
  scoped alice(*backend, 99, "alice", clock);
  scoped bob(*backend, 99, "bob", clock);
  // A key whose encoding starts with another's must not see its entries either.
  scoped al(*backend, 99, "al", clock);

  value_state<std::int64_t>(alice.scope, "count").update(1);
  value_state<std::int64_t>(bob.scope, "count").update(2);
  map_state<std::string, std::int64_t>(alice.scope, "m").put("x", 10);
  map_state<std::string, std::int64_t>(bob.scope, "m").put("y", 20);
  list_state<std::int64_t>(al.scope, "l").add(3);

  CHECK(value_state<std::int64_t>(alice.scope, "count").value() == std::int64_t{1});
  CHECK(value_state<std::int64_t>(bob.scope, "count").value() == std::int64_t{2});
  CHECK_FALSE(value_state<std::int64_t>(al.scope, "count").value());
  CHECK(map_state<std::string, std::int64_t>(alice.scope, "m").entries() ==
        std::vector<std::pair<std::string, std::int64_t>>{{"x", 10}});
  CHECK(map_state<std::string, std::int64_t>(bob.scope, "m").entries() ==
        std::vector<std::pair<std::string, std::int64_t>>{{"y", 20}});
  CHECK(map_state<std::string, std::int64_t>(al.scope, "m").empty());
  map_state<std::string, std::int64_t>(alice.scope, "m").clear();
  CHECK(map_state<std::string, std::int64_t>(bob.scope, "m").contains("y"));
  CHECK(list_state<std::int64_t>(alice.scope, "l").get().empty());
}

TEST_CASE("typed state: TTL expires values on the injected clock and cleans them on access") {
  backend_fixture f;
  auto backend = f.make(any_backend());
  auto clock = std::make_shared<manual_clock>(1'000);
  scoped s(*backend, 5, "k", clock);

  value_state<std::int64_t> v(s.scope, "v", 100ms);
  map_state<std::int64_t, std::int64_t> m(s.scope, "m", 100ms);
  list_state<std::int64_t> l(s.scope, "l", 100ms);
  v.update(1);
  m.put(1, 1);
  l.add(1);
  clock->advance(60ms);
  m.put(2, 2);  // written later: expires later
  l.add(2);     // the list's ttl restarts with every write
  clock->advance(39ms);
  CHECK(v.value() == std::int64_t{1});  // 99 ms old: alive
  clock->advance(1ms);
  CHECK_FALSE(v.value());  // 100 ms: expired
  CHECK(m.entries() == std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 2}});
  CHECK(l.get() == std::vector<std::int64_t>{1, 2});
  // Expired entries were removed from the backend, not only hidden.
  CHECK(s.context.map_entries_bytes("value:v").empty());
  CHECK(s.context.map_entries_bytes("map:m").size() == 1);
  clock->advance(60ms);
  CHECK(m.empty());
  CHECK(l.get().empty());
  // A new write lives again.
  v.update(3);
  CHECK(v.value() == std::int64_t{3});
  // A ttl too long to add to the clock saturates instead of wrapping into the past.
  value_state<std::int64_t> forever(s.scope, "forever", std::chrono::milliseconds::max());
  forever.update(4);
  clock->advance(std::chrono::hours(24 * 365));
  CHECK(forever.value() == std::int64_t{4});
}

TEST_CASE("typed state: survives a snapshot restored into either backend") {
  backend_fixture f;
  const auto from = any_backend();
  const auto to = GENERATE(state_backend_kind::hashmap, state_backend_kind::rocksdb);
  auto clock = std::make_shared<manual_clock>();
  auto source = f.make(from);
  for (int k = 0; k < 20; ++k) {
    const std::string user = "user-" + std::to_string(k);
    scoped s(*source, hash_of_key(user), user, clock);
    value_state<std::int64_t>(s.scope, "count").update(k);
    map_state<std::int64_t, std::string>(s.scope, "m").put(k, user);
  }
  auto snapshot = source->snapshot_now();
  REQUIRE(snapshot);
  auto target = f.make(to);
  auto restored = target->restore({*snapshot});
  if (!restored) FAIL(restored.err().message);
  for (int k = 0; k < 20; ++k) {
    const std::string user = "user-" + std::to_string(k);
    scoped s(*target, hash_of_key(user), user, clock);
    CHECK(value_state<std::int64_t>(s.scope, "count").value() == std::int64_t{k});
    CHECK(map_state<std::int64_t, std::string>(s.scope, "m").get(k) == user);
  }
}

TEST_CASE("typed state: a state of another type or foreign bytes is a decode error") {
  backend_fixture f;
  auto backend = f.make(any_backend());
  scoped s(*backend, 3, "k", std::make_shared<manual_clock>());
  value_state<std::string>(s.scope, "v").update("text");
  CHECK_THROWS_AS(value_state<std::int64_t>(s.scope, "v").value(), decode_error);
  // Bytes the typed layer did not write, under its name.
  s.context.map_put_bytes("value:w", encode(std::string("k")).insert(0, std::string("\0\0\0\2", 4)),
                          "\x07garbage");
  CHECK_THROWS_AS(value_state<std::int64_t>(s.scope, "w").value(), decode_error);
}
