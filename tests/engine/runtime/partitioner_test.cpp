// Key groups and partitioners: where a record goes, and which key groups a subtask owns.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "engine/state/key_groups.hpp"
#include "engine/runtime/partitioner.hpp"

using namespace snapflow;

TEST_CASE("key groups: subtask = key_group * parallelism / max_parallelism") {
  CHECK(key_groups::subtask_for_key_group(0, 4, 128) == 0);
  CHECK(key_groups::subtask_for_key_group(31, 4, 128) == 0);
  CHECK(key_groups::subtask_for_key_group(32, 4, 128) == 1);
  CHECK(key_groups::subtask_for_key_group(127, 4, 128) == 3);
  CHECK(key_groups::subtask_for_key_group(9, 3, 10) == 2);
  CHECK(key_groups::subtask_for_key_group(3, 3, 10) == 0);
  CHECK(key_groups::subtask_for_key_group(4, 3, 10) == 1);
  // No overflow at the limits.
  CHECK(key_groups::subtask_for_key_group(32767, 32768, 32768) == 32767);
}

TEST_CASE("key groups: a key's group is stable and within max parallelism") {
  for (std::uint64_t key = 0; key < 1000; ++key) {
    const auto g = key_groups::key_group_for_key(key, 128);
    CHECK(g < 128);
    CHECK(g == key_groups::key_group_for_key(key, 128));
  }
  // The hash spreads consecutive keys: 16 keys land in more than a handful of groups.
  std::set<std::uint32_t> groups;
  for (std::uint64_t key = 0; key < 16; ++key)
    groups.insert(key_groups::key_group_for_key(key, 128));
  CHECK(groups.size() >= 12);
}

TEST_CASE("key groups: subtask ranges partition the key groups and invert the mapping") {
  for (std::uint32_t max_p : {1u, 7u, 10u, 128u, 1000u}) {
    for (std::uint32_t p = 1; p <= std::min(max_p, 13u); ++p) {
      std::uint32_t next = 0;
      for (std::uint32_t i = 0; i < p; ++i) {
        const key_group_range r = key_groups::range_for_subtask(i, p, max_p);
        INFO("max_p=" << max_p << " p=" << p << " i=" << i << " " << r);
        REQUIRE_FALSE(r.empty());
        CHECK(r.first == next);
        for (std::uint32_t g = r.first; g <= r.last; ++g)
          CHECK(key_groups::subtask_for_key_group(g, p, max_p) == i);
        next = r.last + 1;
      }
      CHECK(next == max_p);
    }
  }
}

TEST_CASE("key groups: overlapping_subtasks names exactly the other subtasks sharing key groups") {
  // Brute force: walk every key group a subtask owns and collect the other side's owners.
  for (std::uint32_t max_p : {1u, 7u, 10u, 128u}) {
    for (std::uint32_t p = 1; p <= std::min(max_p, 9u); ++p) {
      for (std::uint32_t other = 1; other <= std::min(max_p, 9u); ++other) {
        for (std::uint32_t i = 0; i < p; ++i) {
          std::set<std::uint32_t> owners;
          const key_group_range own = key_groups::range_for_subtask(i, p, max_p);
          for (std::uint32_t g = own.first; g <= own.last; ++g)
            owners.insert(key_groups::subtask_for_key_group(g, other, max_p));
          const key_groups::subtask_range r = key_groups::overlapping_subtasks(i, p, other, max_p);
          INFO("max_p=" << max_p << " p=" << p << " other=" << other << " i=" << i);
          CHECK(r.first == *owners.begin());
          CHECK(r.last == *owners.rbegin());
          CHECK(owners.size() == r.last - r.first + 1);  // contiguous
        }
      }
    }
  }
}

TEST_CASE("partitioner: hash sends a key to the subtask owning its key group") {
  partitioner part(partitioning::hash, 4, 128, 0);
  for (std::uint64_t key = 0; key < 500; ++key) {
    record r{key, 0, 0, {}};
    const auto channel = part.select(r);
    CHECK(channel == key_groups::subtask_for_key(key, 4, 128));
    CHECK(key_groups::range_for_subtask(channel, 4, 128)
              .contains(key_groups::key_group_for_key(key, 128)));
  }
}

TEST_CASE("partitioner: forward always picks its one channel") {
  partitioner part(partitioning::forward, 1, 128, 3);
  for (int i = 0; i < 10; ++i)
    CHECK(part.select(record{static_cast<std::uint64_t>(i), i, 0, {}}) == 0);
}

TEST_CASE("partitioner: rebalance spreads records evenly, staggered by subtask") {
  partitioner a(partitioning::rebalance, 3, 128, 0);
  partitioner b(partitioning::rebalance, 3, 128, 1);
  std::map<std::uint32_t, int> counts;
  for (int i = 0; i < 300; ++i) ++counts[a.select(record{})];
  CHECK(counts.size() == 3);
  for (const auto& [_, n] : counts) CHECK(n == 100);
  // Two producers do not start on the same channel.
  partitioner a2(partitioning::rebalance, 3, 128, 0);
  CHECK(a2.select(record{}) != b.select(record{}));
}

TEST_CASE("partitioner: broadcast selects every channel") {
  partitioner part(partitioning::broadcast, 5, 128, 0);
  CHECK(part.select(record{}) == partitioner::all_channels);
}
