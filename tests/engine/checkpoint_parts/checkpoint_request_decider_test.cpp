#include <catch2/catch.hpp>

#include "engine/checkpoint/checkpoint_request_decider.hpp"

using namespace snapflow;

namespace {

using kind = checkpoint_trigger_kind;

checkpoint_request request(std::uint64_t id, kind k) {
  checkpoint_request r;
  r.request_id = id;
  r.kind = k;
  r.submitted_us = static_cast<std::int64_t>(id) * 10;
  if (k == kind::savepoint) r.target_dir = "savepoints";
  return r;
}

coordinator_load idle(std::int64_t now_us = 1'000'000) {
  coordinator_load load;
  load.now_us = now_us;
  return load;
}

coordinator_load triggering() {
  coordinator_load load = idle();
  load.triggering = true;
  return load;
}

coordinator_load busy(int pending) {
  coordinator_load load = idle();
  load.pending = pending;
  return load;
}

std::uint64_t executed_id(const checkpoint_request_decider::decision& d) {
  REQUIRE(d.execute.has_value());
  return d.execute->request_id;
}

}  // namespace

TEST_CASE("decider runs savepoints, then manual, then periodic requests, older first") {
  checkpoint_request_decider decider(10, 0);
  const std::vector<std::pair<std::uint64_t, kind>> submitted = {
      {1, kind::periodic}, {2, kind::manual}, {3, kind::savepoint}, {4, kind::manual},
      {5, kind::savepoint}};
  for (const auto& [id, k] : submitted) {
    auto d = decider.submit(request(id, k), triggering());
    CHECK_FALSE(d.execute);
    CHECK(d.failed.empty());
  }
  REQUIRE(decider.queued() == 5);
  std::vector<std::uint64_t> order;
  for (int i = 0; i < 5; ++i) order.push_back(executed_id(decider.next(idle())));
  CHECK(order == std::vector<std::uint64_t>{3, 5, 2, 4, 1});
  CHECK(decider.queued() == 0);
  auto d = decider.next(idle());
  CHECK_FALSE(d.execute);
  CHECK(d.failed.empty());
}

TEST_CASE("decider executes at most one request per decision") {
  checkpoint_request_decider decider(10, 0);
  for (std::uint64_t id = 1; id <= 3; ++id)
    (void)decider.submit(request(id, kind::manual), triggering());
  auto d = decider.next(idle());
  CHECK(executed_id(d) == 1);
  CHECK(decider.queued() == 2);
  d = decider.submit(request(4, kind::savepoint), idle());
  CHECK(executed_id(d) == 4);
  CHECK(decider.queued() == 2);
}

TEST_CASE("decider overflow fails the lowest priority request, possibly the submitted one") {
  checkpoint_request_decider decider(1, 0, 3);
  (void)decider.submit(request(1, kind::savepoint), triggering());
  (void)decider.submit(request(2, kind::manual), triggering());
  (void)decider.submit(request(3, kind::periodic), triggering());
  REQUIRE(decider.queued() == 3);

  // A manual request pushes out the queued periodic one.
  auto d = decider.submit(request(4, kind::manual), triggering());
  REQUIRE(d.failed.size() == 1);
  CHECK(d.failed[0].first == request(3, kind::periodic));
  CHECK(d.failed[0].second == checkpoint_failure_reason::too_many_checkpoint_requests);
  CHECK(decider.queued() == 3);

  // Among manual requests the newest goes: here that is the submitted one.
  d = decider.submit(request(5, kind::manual), triggering());
  REQUIRE(d.failed.size() == 1);
  CHECK(d.failed[0].first.request_id == 5);
  CHECK(d.failed[0].second == checkpoint_failure_reason::too_many_checkpoint_requests);

  // A savepoint pushes out the newest manual request.
  d = decider.submit(request(6, kind::savepoint), triggering());
  REQUIRE(d.failed.size() == 1);
  CHECK(d.failed[0].first.request_id == 4);

  // A periodic request into a full queue of better ones fails itself.
  d = decider.submit(request(7, kind::periodic), triggering());
  REQUIRE(d.failed.size() == 1);
  CHECK(d.failed[0].first.request_id == 7);
  CHECK_FALSE(d.coalesced);

  auto left = decider.drain();
  REQUIRE(left.size() == 3);
  CHECK(left[0].request_id == 1);
  CHECK(left[1].request_id == 6);
  CHECK(left[2].request_id == 2);
}

TEST_CASE("decider holds manual and periodic requests while max concurrent are pending") {
  checkpoint_request_decider decider(2, 0);
  auto d = decider.submit(request(1, kind::manual), busy(2));
  CHECK_FALSE(d.execute);
  CHECK(d.failed.empty());
  d = decider.submit(request(2, kind::periodic), busy(2));
  CHECK_FALSE(d.execute);
  CHECK(d.failed.empty());
  CHECK(decider.queued() == 2);
  CHECK_FALSE(decider.next(busy(3)).execute);
  CHECK(executed_id(decider.next(busy(1))) == 1);
  CHECK_FALSE(decider.next(busy(2)).execute);
  CHECK(executed_id(decider.next(busy(1))) == 2);

  decider.set_max_concurrent(3);
  CHECK(executed_id(decider.submit(request(3, kind::manual), busy(2))) == 3);
}

TEST_CASE("decider fails a periodic request inside the min pause and says when to retry") {
  checkpoint_request_decider decider(1, 1000);
  coordinator_load load = idle(5300);
  load.last_completion_us = 5000;
  auto d = decider.submit(request(1, kind::periodic), load);
  CHECK_FALSE(d.execute);
  REQUIRE(d.failed.size() == 1);
  CHECK(d.failed[0].first.request_id == 1);
  CHECK(d.failed[0].second == checkpoint_failure_reason::minimum_time_between_checkpoints);
  REQUIRE(d.reschedule_periodic_in_us);
  CHECK(*d.reschedule_periodic_in_us == 700);
  CHECK(decider.queued() == 0);

  load.now_us = 6000;  // exactly at the end of the pause
  d = decider.submit(request(2, kind::periodic), load);
  CHECK(executed_id(d) == 2);
  CHECK_FALSE(d.reschedule_periodic_in_us);

  // Without any completion yet there is no pause to respect.
  checkpoint_request_decider fresh(1, 1000);
  CHECK(executed_id(fresh.submit(request(3, kind::periodic), idle(0))) == 3);
}

TEST_CASE("decider lets a queued periodic request wait out the pause behind other kinds") {
  checkpoint_request_decider decider(1, 1000);
  (void)decider.submit(request(1, kind::manual), triggering());
  (void)decider.submit(request(2, kind::periodic), triggering());
  coordinator_load load = idle(5100);
  load.last_completion_us = 5000;
  auto d = decider.next(load);
  CHECK(executed_id(d) == 1);  // manual: no pause
  CHECK(d.failed.empty());
  d = decider.next(load);
  CHECK_FALSE(d.execute);
  REQUIRE(d.failed.size() == 1);
  CHECK(d.failed[0].first.request_id == 2);
  CHECK(d.reschedule_periodic_in_us == std::optional<std::int64_t>(900));
}

TEST_CASE("decider runs savepoints regardless of max concurrent and min pause") {
  checkpoint_request_decider decider(1, 1'000'000);
  coordinator_load load = busy(5);
  load.last_completion_us = load.now_us;
  auto d = decider.submit(request(1, kind::savepoint), load);
  CHECK(executed_id(d) == 1);
  CHECK(d.failed.empty());
  CHECK_FALSE(d.reschedule_periodic_in_us);
}

TEST_CASE("decider runs manual checkpoints inside the min pause but not past max concurrent") {
  checkpoint_request_decider decider(1, 1'000'000);
  coordinator_load load = idle();
  load.last_completion_us = load.now_us - 1;
  auto d = decider.submit(request(1, kind::manual), load);
  CHECK(executed_id(d) == 1);
  CHECK(d.failed.empty());

  load.pending = 1;
  d = decider.submit(request(2, kind::manual), load);
  CHECK_FALSE(d.execute);
  CHECK(d.failed.empty());
  CHECK(decider.queued() == 1);
}

TEST_CASE("decider executes nothing while a trigger is in progress") {
  checkpoint_request_decider decider(10, 0);
  for (auto k : {kind::savepoint, kind::manual, kind::periodic}) {
    auto d = decider.submit(request(static_cast<std::uint64_t>(k) + 1, k), triggering());
    CHECK_FALSE(d.execute);
    CHECK(d.failed.empty());
  }
  CHECK_FALSE(decider.next(triggering()).execute);
  CHECK(decider.queued() == 3);
  CHECK(executed_id(decider.next(idle())) == 1);
}

TEST_CASE("decider coalesces a periodic request into the one already queued") {
  checkpoint_request_decider decider(1, 0);
  auto d = decider.submit(request(1, kind::periodic), busy(1));
  CHECK_FALSE(d.coalesced);
  CHECK(decider.queued() == 1);
  d = decider.submit(request(2, kind::periodic), busy(1));
  CHECK(d.coalesced);
  CHECK(d.failed.empty());
  CHECK_FALSE(d.execute);
  CHECK(decider.queued() == 1);
  // Other kinds are never coalesced.
  d = decider.submit(request(3, kind::manual), busy(1));
  CHECK_FALSE(d.coalesced);
  CHECK(decider.queued() == 2);

  CHECK(executed_id(decider.next(idle())) == 3);
  CHECK(executed_id(decider.next(idle())) == 1);
  d = decider.submit(request(4, kind::periodic), busy(1));
  CHECK_FALSE(d.coalesced);
  CHECK(decider.queued() == 1);
}

TEST_CASE("decider drain returns every queued request in priority order and empties it") {
  checkpoint_request_decider decider(1, 0);
  (void)decider.submit(request(1, kind::periodic), triggering());
  (void)decider.submit(request(2, kind::manual), triggering());
  (void)decider.submit(request(3, kind::savepoint), triggering());
  auto drained = decider.drain();
  REQUIRE(drained.size() == 3);
  CHECK(drained[0] == request(3, kind::savepoint));
  CHECK(drained[1] == request(2, kind::manual));
  CHECK(drained[2] == request(1, kind::periodic));
  CHECK(decider.queued() == 0);
  CHECK(decider.drain().empty());
  CHECK_FALSE(decider.next(idle()).execute);
}
