#include <catch2/catch.hpp>

#include <vector>

#include "engine/checkpoint/completed_checkpoint_store.hpp"

using namespace snapflow;

namespace {

completed_checkpoint checkpoint(checkpoint_id id,
                                checkpoint_trigger_kind kind = checkpoint_trigger_kind::periodic) {
  completed_checkpoint c;
  c.job = "job";
  c.id = id;
  c.kind = kind;
  c.location = (kind == checkpoint_trigger_kind::savepoint ? "savepoint-job-" : "chk-") +
               std::to_string(id);
  return c;
}

completed_checkpoint savepoint(checkpoint_id id) {
  return checkpoint(id, checkpoint_trigger_kind::savepoint);
}

std::vector<checkpoint_id> ids(const std::vector<completed_checkpoint>& list) {
  std::vector<checkpoint_id> out;
  for (const auto& c : list) out.push_back(c.id);
  return out;
}

std::vector<checkpoint_id> ids(const std::deque<completed_checkpoint>& list) {
  return ids(std::vector<completed_checkpoint>(list.begin(), list.end()));
}

std::vector<checkpoint_id> add(completed_checkpoint_store& store, completed_checkpoint c) {
  auto subsumed = store.add(std::move(c));
  INFO((subsumed ? std::string() : subsumed.err().message));
  REQUIRE(subsumed.ok());
  return ids(*subsumed);
}

}  // namespace

TEST_CASE("store retaining 1 replaces the checkpoint and returns the subsumed one") {
  completed_checkpoint_store store(1);
  CHECK(store.latest() == nullptr);
  CHECK(add(store, checkpoint(1)).empty());
  REQUIRE(store.latest() != nullptr);
  CHECK(store.latest()->id == 1);
  CHECK(add(store, checkpoint(2)) == std::vector<checkpoint_id>{1});
  CHECK(store.latest()->id == 2);
  CHECK(ids(store.checkpoints()) == std::vector<checkpoint_id>{2});
  CHECK(add(store, checkpoint(5, checkpoint_trigger_kind::manual)) ==
        std::vector<checkpoint_id>{2});
  CHECK(store.latest()->id == 5);
}

TEST_CASE("store retaining 3 keeps the newest three, oldest first") {
  completed_checkpoint_store store(3);
  for (checkpoint_id id = 1; id <= 3; ++id) CHECK(add(store, checkpoint(id)).empty());
  CHECK(add(store, checkpoint(4)) == std::vector<checkpoint_id>{1});
  CHECK(ids(store.checkpoints()) == std::vector<checkpoint_id>{2, 3, 4});
  CHECK(store.retained() == 3);
}

TEST_CASE("store keeps savepoints aside: never subsumed, never counted, never subsuming") {
  completed_checkpoint_store store(1);
  CHECK(add(store, checkpoint(1)).empty());
  CHECK(add(store, savepoint(2)).empty());  // does not push out checkpoint 1
  CHECK(store.latest()->id == 1);
  REQUIRE(store.latest_savepoint() != nullptr);
  CHECK(store.latest_savepoint()->id == 2);
  CHECK(add(store, checkpoint(3)) == std::vector<checkpoint_id>{1});  // not the savepoint
  CHECK(add(store, savepoint(4)).empty());
  CHECK(add(store, checkpoint(5)) == std::vector<checkpoint_id>{3});
  CHECK(ids(store.savepoints()) == std::vector<checkpoint_id>{2, 4});
  CHECK(ids(store.checkpoints()) == std::vector<checkpoint_id>{5});
  CHECK(store.latest()->id == 5);
}

TEST_CASE("store refuses a checkpoint whose id is not newer than the latest") {
  completed_checkpoint_store store(2);
  CHECK(add(store, checkpoint(5)).empty());
  auto same = store.add(checkpoint(5));
  REQUIRE_FALSE(same.ok());
  CHECK_THAT(same.err().message, Catch::Contains("5"));
  CHECK_FALSE(store.add(checkpoint(3)).ok());
  CHECK(ids(store.checkpoints()) == std::vector<checkpoint_id>{5});

  CHECK(add(store, savepoint(4)).empty());  // savepoints are ordered among themselves
  CHECK_FALSE(store.add(savepoint(4)).ok());
  CHECK_FALSE(store.add(savepoint(2)).ok());
  CHECK(add(store, checkpoint(6)).empty());
}

TEST_CASE("store recover keeps the newest retained checkpoints and every savepoint") {
  completed_checkpoint_store store(2);
  CHECK(add(store, checkpoint(100)).empty());
  store.recover({checkpoint(3), savepoint(4), checkpoint(1), checkpoint(7), checkpoint(5),
                 savepoint(2), checkpoint(7)});
  CHECK(ids(store.checkpoints()) == std::vector<checkpoint_id>{5, 7});
  CHECK(ids(store.savepoints()) == std::vector<checkpoint_id>{2, 4});
  CHECK(store.latest()->id == 7);
  CHECK(store.latest_savepoint()->id == 4);
  CHECK_FALSE(store.add(checkpoint(6)).ok());
  CHECK(add(store, checkpoint(8)) == std::vector<checkpoint_id>{5});

  store.recover({});
  CHECK(store.latest() == nullptr);
  CHECK(store.latest_savepoint() == nullptr);
}

TEST_CASE("store shutdown returns what to delete following Flink's retention rules") {
  const auto filled = [] {
    completed_checkpoint_store store(2);
    for (checkpoint_id id = 1; id <= 3; ++id) (void)store.add(checkpoint(id));
    (void)store.add(savepoint(4));
    return store;
  };
  using retention = externalized_retention;

  SECTION("finished deletes every retained checkpoint, whatever the retention") {
    for (auto r : {retention::delete_on_cancellation, retention::retain_on_cancellation}) {
      auto store = filled();
      CHECK(ids(store.shutdown(job_status::finished, r)) == std::vector<checkpoint_id>{2, 3});
      CHECK(store.latest() == nullptr);
      CHECK(store.shutdown(job_status::finished, r).empty());  // nothing twice
    }
  }
  SECTION("canceled deletes only with delete_on_cancellation") {
    auto deleting = filled();
    CHECK(ids(deleting.shutdown(job_status::canceled, retention::delete_on_cancellation)) ==
          std::vector<checkpoint_id>{2, 3});
    auto retaining = filled();
    CHECK(retaining.shutdown(job_status::canceled, retention::retain_on_cancellation).empty());
  }
  SECTION("failed keeps them to resume from by hand") {
    for (auto r : {retention::delete_on_cancellation, retention::retain_on_cancellation}) {
      auto store = filled();
      CHECK(store.shutdown(job_status::failed, r).empty());
    }
  }
  SECTION("suspended keeps them for the coordinator that takes over") {
    for (auto r : {retention::delete_on_cancellation, retention::retain_on_cancellation}) {
      auto store = filled();
      CHECK(store.shutdown(job_status::suspended, r).empty());
    }
  }
}
