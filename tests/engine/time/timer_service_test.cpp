// Keyed timers in the state backend, for both backends: order, once and only once, deletion,
// and snapshot/restore at the same parallelism and rescaled 2x up and 2x down.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "engine/state/state_backend_kind.hpp"
#include "engine/time/timer_service.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

constexpr std::uint32_t max_parallelism = 128;

struct maker {
  explicit maker(state_backend_kind k) : kind(k) {}
  state_backend_kind kind;
  temp_folder dir;
  int made = 0;

  std::unique_ptr<keyed_state_backend> make(std::uint32_t index, std::uint32_t parallelism) {
    auto b = make_keyed_state_backend(
        kind, max_parallelism, key_groups::range_for_subtask(index, parallelism, max_parallelism),
        dir.path() / ("backend-" + std::to_string(made++)));
    REQUIRE(b);
    return std::move(b).value();
  }
};

using fired_list = std::vector<std::tuple<std::int64_t, std::uint64_t, std::string>>;

timer_service::fire_function collect(fired_list& out, keyed_state_backend& b) {
  return [&out, &b](const fired_timer& t) -> result<void> {
    CHECK(b.current_key() == t.key);  // the callback sees the timer's key
    out.emplace_back(t.timestamp, t.key, t.ns);
    return success();
  };
}

}  // namespace

TEST_CASE("timers fire in time order, once, and deleted ones never") {
  for (auto kind : {state_backend_kind::hashmap, state_backend_kind::rocksdb}) {
    DYNAMIC_SECTION(to_string(kind)) {
      maker m(kind);
      auto b = m.make(0, 1);
      timer_service timers(*b);
      b->set_current_key(1);
      timers.register_timer(time_domain::event_time, 30, "a");
      timers.register_timer(time_domain::event_time, 10, "a");
      timers.register_timer(time_domain::event_time, 10, "a");  // the same timer: once
      timers.register_timer(time_domain::event_time, -5, "");
      b->set_current_key(2);
      timers.register_timer(time_domain::event_time, 20, "b");
      timers.register_timer(time_domain::event_time, 25, "b");
      timers.delete_timer(time_domain::event_time, 25, "b");
      timers.register_timer(time_domain::processing_time, 1000, "p");
      CHECK(timers.size(time_domain::event_time) == 4);
      CHECK(timers.next_processing_timer() == 1000);

      fired_list fired;
      REQUIRE(timers.advance_watermark(20, collect(fired, *b)));
      CHECK(fired == fired_list{{-5, 1, ""}, {10, 1, "a"}, {20, 2, "b"}});
      fired.clear();
      REQUIRE(timers.advance_watermark(15, collect(fired, *b)));  // back: nothing
      REQUIRE(timers.advance_watermark(max_watermark, collect(fired, *b)));
      CHECK(fired == fired_list{{30, 1, "a"}});
      fired.clear();
      REQUIRE(timers.advance_processing_time(999, collect(fired, *b)));
      CHECK(fired.empty());
      REQUIRE(timers.advance_processing_time(1000, collect(fired, *b)));
      CHECK(fired == fired_list{{1000, 2, "p"}});
      CHECK(timers.size(time_domain::event_time) == 0);
      CHECK(b->num_entries() == 0);  // fired timers are gone from the state
    }
  }
}

TEST_CASE("a timer registered by a firing callback at or before the watermark fires too") {
  maker m(state_backend_kind::hashmap);
  auto b = m.make(0, 1);
  timer_service timers(*b);
  b->set_current_key(3);
  timers.register_timer(time_domain::event_time, 10, "");
  std::vector<std::int64_t> fired;
  REQUIRE(timers.advance_watermark(100, [&](const fired_timer& t) -> result<void> {
    fired.push_back(t.timestamp);
    if (t.timestamp == 10) timers.register_timer(time_domain::event_time, 50, "");
    return success();
  }));
  CHECK(fired == std::vector<std::int64_t>{10, 50});
}

TEST_CASE("timers are in snapshots: fired before it never again, pending after restore") {
  for (auto kind : {state_backend_kind::hashmap, state_backend_kind::rocksdb}) {
    DYNAMIC_SECTION(to_string(kind)) {
      maker m(kind);
      auto b = m.make(0, 1);
      timer_service timers(*b);
      for (std::uint64_t k = 0; k < 20; ++k) {
        b->set_current_key(k);
        timers.register_timer(time_domain::event_time, static_cast<std::int64_t>(k) * 10, "w");
        timers.register_timer(time_domain::processing_time,
                              5000 + static_cast<std::int64_t>(k), "");
      }
      fired_list fired;
      REQUIRE(timers.advance_watermark(95, collect(fired, *b)));  // 0..90: ten of them
      CHECK(fired.size() == 10);
      auto snapshot = b->snapshot_now();
      REQUIRE(snapshot);
      // Fires after the snapshot: the restore below goes back to before it.
      fired.clear();
      REQUIRE(timers.advance_watermark(150, collect(fired, *b)));
      CHECK(fired.size() == 6);

      auto restored = m.make(0, 1);
      REQUIRE(restored->restore({*snapshot}));
      timer_service again(*restored);
      REQUIRE(again.load());
      CHECK(again.size(time_domain::event_time) == 10);
      CHECK(again.size(time_domain::processing_time) == 20);
      fired.clear();
      REQUIRE(again.advance_watermark(max_watermark, collect(fired, *restored)));
      std::set<std::int64_t> times;
      for (auto& [t, k, ns] : fired) times.insert(t);
      CHECK(times.size() == 10);
      CHECK(*times.begin() == 100);  // none of those fired before the snapshot
      CHECK(*times.rbegin() == 190);
    }
  }
}

TEST_CASE("timers move with their key groups on a rescale, 2x up and 2x down, and fire once") {
  for (auto kind : {state_backend_kind::hashmap, state_backend_kind::rocksdb}) {
    DYNAMIC_SECTION(to_string(kind)) {
      maker m(kind);
      // Parallelism 2: 200 keys, a timer each at t = key, keys spread over both subtasks.
      std::vector<std::unique_ptr<keyed_state_backend>> two;
      std::vector<std::unique_ptr<timer_service>> timers2;
      for (std::uint32_t i = 0; i < 2; ++i) {
        two.push_back(m.make(i, 2));
        timers2.push_back(std::make_unique<timer_service>(*two.back()));
      }
      std::set<std::uint64_t> all;
      for (std::uint64_t k = 0; k < 200; ++k) {
        const auto g = key_groups::key_group_for_key(k, max_parallelism);
        const std::uint32_t owner =
            key_groups::range_for_subtask(0, 2, max_parallelism).contains(g) ? 0 : 1;
        two[owner]->set_current_key(k);
        timers2[owner]->register_timer(time_domain::event_time, static_cast<std::int64_t>(k), "");
        all.insert(k);
      }
      // Fire t < 50 before the checkpoint.
      std::set<std::uint64_t> fired_keys;
      for (std::uint32_t i = 0; i < 2; ++i) {
        fired_list f;
        REQUIRE(timers2[i]->advance_watermark(49, collect(f, *two[i])));
        for (auto& [t, k, ns] : f) CHECK(fired_keys.insert(k).second);
      }
      CHECK(fired_keys.size() == 50);
      std::vector<keyed_state_snapshot> snaps;
      for (auto& b : two) {
        auto s = b->snapshot_now();
        REQUIRE(s);
        snaps.push_back(std::move(*s));
      }

      // Restored at 4 (2x up), then from that at 2 again (2x down): every pending timer fires
      // exactly once overall, and none of those fired before the checkpoint.
      auto restore_at = [&](std::uint32_t p, const std::vector<keyed_state_snapshot>& from,
                            std::int64_t up_to, std::set<std::uint64_t>& fired,
                            std::vector<keyed_state_snapshot>* after) {
        for (std::uint32_t i = 0; i < p; ++i) {
          auto b = m.make(i, p);
          REQUIRE(b->restore(from));
          timer_service t(*b);
          REQUIRE(t.load());
          fired_list f;
          REQUIRE(t.advance_watermark(up_to, collect(f, *b)));
          for (auto& [ts, k, ns] : f) {
            CHECK(key_groups::range_for_subtask(i, p, max_parallelism)
                      .contains(key_groups::key_group_for_key(k, max_parallelism)));
            CHECK(fired.insert(k).second);
          }
          if (after) {
            auto s = b->snapshot_now();
            REQUIRE(s);
            after->push_back(std::move(*s));
          }
        }
      };
      std::vector<keyed_state_snapshot> at_four;
      std::set<std::uint64_t> up;
      restore_at(4, snaps, 99, up, &at_four);  // 50..99 fire at 4
      CHECK(up.size() == 50);
      std::set<std::uint64_t> down;
      restore_at(2, at_four, max_watermark, down, nullptr);  // 100..199 at 2
      CHECK(down.size() == 100);
      for (auto k : up) CHECK(fired_keys.insert(k).second);
      for (auto k : down) CHECK(fired_keys.insert(k).second);
      CHECK(fired_keys == all);
    }
  }
}
