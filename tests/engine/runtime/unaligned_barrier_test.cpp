// barrier_aligner with unaligned checkpoints, stepped by hand: a first barrier that snapshots
// at once, the inputs that owe it, the aligned timeout that switches, and a barrier that
// overtook records.
#include <catch2/catch.hpp>

#include "engine/runtime/barrier_aligner.hpp"

using namespace snapflow;

namespace {

checkpoint_barrier unaligned_barrier(checkpoint_id id, std::int64_t aligned_timeout_ms = 0) {
  checkpoint_barrier b;
  b.id = id;
  b.timestamp_us = 1000 * id;
  b.options.unaligned = true;
  b.options.aligned_timeout_ms = aligned_timeout_ms;
  b.options.target_location = "chk-" + std::to_string(id);
  return b;
}

template <class T>
const T* action(const barrier_actions& actions, std::size_t i) {
  REQUIRE(actions.size() > i);
  return std::get_if<T>(&actions[i]);
}

}  // namespace

TEST_CASE("unaligned: the first barrier snapshots at once; the other inputs owe it") {
  barrier_aligner a(3);
  auto actions = a.on_barrier(1, unaligned_barrier(5), 1'000);
  REQUIRE(actions.size() == 1);
  const auto* t = action<trigger_snapshot>(actions, 0);
  REQUIRE(t != nullptr);
  CHECK(t->unaligned);
  CHECK(t->barrier.id == 5);
  CHECK(t->alignment_duration_us == 0);
  for (std::size_t i = 0; i < 3; ++i) CHECK_FALSE(a.is_blocked(i));
  CHECK(a.owes_barrier(0));
  CHECK_FALSE(a.owes_barrier(1));
  CHECK(a.owes_barrier(2));
  CHECK(a.on_barrier(0, unaligned_barrier(5), 2'000).empty());
  CHECK(a.on_barrier(0, unaligned_barrier(5), 2'100).empty());  // a duplicate
  CHECK_FALSE(a.owes_barrier(0));
  actions = a.on_barrier(2, unaligned_barrier(5), 3'000);
  REQUIRE(actions.size() == 1);
  const auto* done = action<channel_state_complete>(actions, 0);
  REQUIRE(done != nullptr);
  CHECK(done->id == 5);
  CHECK_FALSE(a.is_unaligned());
  CHECK(a.last_handled_id() == 5);
  CHECK(a.on_barrier(1, unaligned_barrier(5), 4'000).empty());  // stale now
}

TEST_CASE("unaligned: a single input snapshots and completes at once") {
  barrier_aligner a(1);
  auto actions = a.on_barrier(0, unaligned_barrier(2), 10);
  REQUIRE(actions.size() == 2);
  CHECK(action<trigger_snapshot>(actions, 0) != nullptr);
  CHECK(action<channel_state_complete>(actions, 1) != nullptr);
  CHECK_FALSE(a.is_aligning());
}

TEST_CASE("unaligned: an input that ends owes nothing more") {
  barrier_aligner a(2);
  a.on_barrier(0, unaligned_barrier(3), 10);
  CHECK(a.owes_barrier(1));
  auto actions = a.on_end_of_input(1, 20);
  REQUIRE(actions.size() == 1);
  CHECK(action<channel_state_complete>(actions, 0) != nullptr);
}

TEST_CASE("unaligned: a newer barrier before the channel state is complete gives the older up") {
  barrier_aligner a(2);
  a.on_barrier(0, unaligned_barrier(3), 10);
  auto actions = a.on_barrier(0, unaligned_barrier(4), 20);
  REQUIRE(actions.size() == 2);
  const auto* abort = action<abort_snapshot>(actions, 0);
  REQUIRE(abort != nullptr);
  CHECK(abort->id == 3);
  CHECK(abort->reason == checkpoint_failure_reason::checkpoint_declined_subsumed);
  const auto* t = action<trigger_snapshot>(actions, 1);
  REQUIRE(t != nullptr);
  CHECK(t->barrier.id == 4);
  CHECK(a.owes_barrier(1));
  CHECK(a.on_barrier(1, unaligned_barrier(3), 30).empty());  // the given-up one: stale
  CHECK(a.owes_barrier(1));
}

TEST_CASE("unaligned: a notify-abort ends the checkpoint; its late barriers are ignored") {
  barrier_aligner a(2);
  a.on_barrier(0, unaligned_barrier(3), 10);
  CHECK(a.on_checkpoint_aborted(3));
  CHECK_FALSE(a.is_unaligned());
  CHECK_FALSE(a.owes_barrier(1));
  CHECK(a.on_barrier(1, unaligned_barrier(3), 20).empty());
}

TEST_CASE("aligned timeout: alignment switches to unaligned once it took the timeout") {
  barrier_aligner a(3);
  CHECK(a.on_barrier(0, unaligned_barrier(7, 10), 1'000).empty());
  CHECK(a.is_blocked(0));
  REQUIRE(a.switch_deadline_us() == 11'000);
  CHECK(a.on_alignment_timeout(10'999).empty());
  CHECK(a.on_barrier(2, unaligned_barrier(7, 10), 5'000).empty());
  CHECK(a.is_blocked(2));
  auto actions = a.on_alignment_timeout(11'000);
  REQUIRE(actions.size() == 1);
  const auto* t = action<trigger_snapshot>(actions, 0);
  REQUIRE(t != nullptr);
  CHECK(t->unaligned);
  CHECK(t->alignment_duration_us == 10'000);
  // Forwarded as unaligned from the start: downstream must not align on it.
  CHECK(t->barrier.options.aligned_timeout_ms == 0);
  // The blocked inputs delivered it: released, owing nothing. The open one owes it.
  CHECK_FALSE(a.is_blocked(0));
  CHECK_FALSE(a.is_blocked(2));
  CHECK_FALSE(a.owes_barrier(0));
  CHECK_FALSE(a.owes_barrier(2));
  CHECK(a.owes_barrier(1));
  CHECK_FALSE(a.switch_deadline_us());
  actions = a.on_barrier(1, unaligned_barrier(7, 10), 12'000);
  REQUIRE(actions.size() == 1);
  CHECK(action<channel_state_complete>(actions, 0) != nullptr);
}

TEST_CASE("aligned timeout: alignment that ends in time stays aligned") {
  barrier_aligner a(2);
  a.on_barrier(0, unaligned_barrier(7, 10), 1'000);
  auto actions = a.on_barrier(1, unaligned_barrier(7, 10), 2'000);
  REQUIRE(actions.size() == 1);
  const auto* t = action<trigger_snapshot>(actions, 0);
  REQUIRE(t != nullptr);
  CHECK_FALSE(t->unaligned);
  CHECK_FALSE(a.switch_deadline_us());
  CHECK(a.on_alignment_timeout(100'000).empty());
}

TEST_CASE("aligned timeout: a barrier that overtook records, or came unaligned, switches at once") {
  SECTION("overtook") {
    barrier_aligner a(3);
    a.on_barrier(0, unaligned_barrier(7, 10'000), 1'000);
    auto actions = a.on_barrier(1, unaligned_barrier(7, 10'000), 2'000, /*overtook=*/true);
    REQUIRE(actions.size() == 1);
    const auto* t = action<trigger_snapshot>(actions, 0);
    REQUIRE(t != nullptr);
    CHECK(t->unaligned);
    CHECK_FALSE(a.owes_barrier(0));
    CHECK_FALSE(a.owes_barrier(1));
    CHECK(a.owes_barrier(2));
  }
  SECTION("forwarded by a subtask that switched") {
    barrier_aligner a(2);
    a.on_barrier(0, unaligned_barrier(7, 10'000), 1'000);
    auto actions = a.on_barrier(1, unaligned_barrier(7, 0), 2'000);
    REQUIRE(actions.size() == 2);
    CHECK(action<trigger_snapshot>(actions, 0)->unaligned);
    CHECK(action<channel_state_complete>(actions, 1) != nullptr);
  }
  SECTION("the first barrier overtook") {
    barrier_aligner a(2);
    auto actions = a.on_barrier(1, unaligned_barrier(7, 10'000), 2'000, true);
    REQUIRE(actions.size() == 1);
    CHECK(action<trigger_snapshot>(actions, 0)->unaligned);
    CHECK(a.owes_barrier(0));
  }
}

TEST_CASE("aligned checkpoints never switch, whatever the time") {
  barrier_aligner a(2);
  checkpoint_barrier b = unaligned_barrier(1);
  b.options.unaligned = false;
  b.options.aligned_timeout_ms = 5;
  a.on_barrier(0, b, 0);
  CHECK_FALSE(a.switch_deadline_us());
  CHECK(a.on_alignment_timeout(1'000'000'000).empty());
  CHECK(a.is_blocked(0));
}
