#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_failure_manager.hpp"

using namespace snapflow;

namespace {

using reason = checkpoint_failure_reason;

// Records every callback so a test can count and inspect them.
struct recorder {
  std::vector<std::string> job_failures;
  std::vector<std::pair<std::string, execution_attempt_id>> task_failures;

  checkpoint_failure_manager::callbacks callbacks() {
    return {[this](const std::string& cause) { job_failures.push_back(cause); },
            [this](const std::string& cause, const execution_attempt_id& task) {
              task_failures.emplace_back(cause, task);
            }};
  }
  std::size_t calls() const { return job_failures.size() + task_failures.size(); }
};

}  // namespace

TEST_CASE("failure manager counts only the reasons that count toward the tolerable number") {
  recorder r;
  checkpoint_failure_manager m(0, r.callbacks());
  for (auto uncounted : {reason::too_many_checkpoint_requests,
                         reason::minimum_time_between_checkpoints, reason::checkpoint_subsumed,
                         reason::checkpoint_coordinator_shutdown, reason::job_failover,
                         reason::not_all_required_tasks_running, reason::task_failure}) {
    m.handle_checkpoint_failure(std::nullopt, uncounted, "ignored");
    m.handle_checkpoint_failure(1, uncounted, "ignored");
  }
  CHECK(m.continuous_failure_count() == 0);
  CHECK(r.calls() == 0);
  CHECK_FALSE(m.job_failed());
}

TEST_CASE("failure manager counts each checkpoint id once") {
  recorder r;
  checkpoint_failure_manager m(5, r.callbacks());
  m.handle_checkpoint_failure(1, reason::checkpoint_declined, "task said no");
  m.handle_checkpoint_failure(1, reason::checkpoint_expired, "and then it expired");
  m.handle_checkpoint_failure(1, reason::checkpoint_declined, "again");
  CHECK(m.continuous_failure_count() == 1);
  m.handle_checkpoint_failure(2, reason::checkpoint_expired, "timeout");
  CHECK(m.continuous_failure_count() == 2);
  // Failures without an id always count.
  m.handle_checkpoint_failure(std::nullopt, reason::io_exception, "disk full");
  m.handle_checkpoint_failure(std::nullopt, reason::io_exception, "disk full");
  CHECK(m.continuous_failure_count() == 4);
  CHECK(r.calls() == 0);
}

TEST_CASE("failure manager ignores failures of ids at or below the last success") {
  recorder r;
  checkpoint_failure_manager m(0, r.callbacks());
  m.handle_checkpoint_success(10);
  m.handle_checkpoint_failure(9, reason::checkpoint_declined, "stale");
  m.handle_checkpoint_failure(10, reason::checkpoint_expired, "stale");
  CHECK(m.continuous_failure_count() == 0);
  CHECK(r.calls() == 0);
  // An older success does not move the mark back.
  m.handle_checkpoint_success(4);
  m.handle_checkpoint_failure(8, reason::checkpoint_declined, "stale");
  CHECK(m.continuous_failure_count() == 0);
  m.handle_checkpoint_failure(11, reason::checkpoint_declined, "fresh");
  CHECK(m.continuous_failure_count() == 1);
  CHECK(r.calls() == 1);
}

TEST_CASE("failure manager resets the streak on success") {
  recorder r;
  checkpoint_failure_manager m(1, r.callbacks());
  m.handle_checkpoint_failure(1, reason::checkpoint_declined, "one");
  CHECK(m.continuous_failure_count() == 1);
  m.handle_checkpoint_success(2);
  CHECK(m.continuous_failure_count() == 0);
  m.handle_checkpoint_failure(3, reason::checkpoint_declined, "one again");
  CHECK(m.continuous_failure_count() == 1);
  CHECK(r.calls() == 0);
  m.handle_checkpoint_failure(4, reason::checkpoint_declined, "two");
  CHECK(r.calls() == 1);
  CHECK(m.job_failed());
  m.handle_checkpoint_success(5);
  CHECK_FALSE(m.job_failed());
  CHECK(m.continuous_failure_count() == 0);
}

TEST_CASE("failure manager with tolerable 0 fails the job once on the first counted failure") {
  recorder r;
  checkpoint_failure_manager m(0, r.callbacks());
  m.handle_checkpoint_failure(1, reason::checkpoint_expired, "took too long");
  REQUIRE(r.job_failures.size() == 1);
  CHECK(m.job_failed());
  CHECK_THAT(r.job_failures[0], Catch::Contains("checkpoint_expired"));
  CHECK_THAT(r.job_failures[0], Catch::Contains("took too long"));
  CHECK_THAT(r.job_failures[0], Catch::Contains("1 failed in a row"));
  m.handle_checkpoint_failure(2, reason::checkpoint_expired, "again");
  m.handle_checkpoint_failure(std::nullopt, reason::io_exception, "and again");
  CHECK(r.calls() == 1);
}

TEST_CASE("failure manager with tolerable 2 fails exactly once on the third counted failure") {
  recorder r;
  checkpoint_failure_manager m(2, r.callbacks());
  m.handle_checkpoint_failure(1, reason::checkpoint_declined, "a");
  m.handle_checkpoint_failure(std::nullopt, reason::too_many_checkpoint_requests, "not counted");
  m.handle_checkpoint_failure(2, reason::checkpoint_subsumed, "not counted");
  m.handle_checkpoint_failure(3, reason::checkpoint_async_exception, "b");
  m.handle_checkpoint_failure(4, reason::minimum_time_between_checkpoints, "not counted");
  CHECK(m.continuous_failure_count() == 2);
  CHECK(r.calls() == 0);
  m.handle_checkpoint_failure(5, reason::finalize_checkpoint_failure, "not counted (Flink)");
  CHECK(r.calls() == 0);
  m.handle_checkpoint_failure(6, reason::checkpoint_expired, "c");
  REQUIRE(r.job_failures.size() == 1);
  CHECK(r.task_failures.empty());
  CHECK_THAT(r.job_failures[0], Catch::Contains("checkpoint_expired"));
  CHECK_THAT(r.job_failures[0], Catch::Contains("3 failed in a row"));
  for (checkpoint_id id = 7; id < 10; ++id)
    m.handle_checkpoint_failure(id, reason::checkpoint_declined, "more");
  CHECK(r.calls() == 1);
}

TEST_CASE("failure manager fails the job through the task failure path when a task is named") {
  recorder r;
  checkpoint_failure_manager m(0, r.callbacks());
  const execution_attempt_id task{{3, 1}, 2};
  m.handle_checkpoint_failure(7, reason::checkpoint_async_exception, "snapshot failed", task);
  CHECK(r.job_failures.empty());
  REQUIRE(r.task_failures.size() == 1);
  CHECK(r.task_failures[0].second == task);
  CHECK_THAT(r.task_failures[0].first, Catch::Contains("snapshot failed"));
}

TEST_CASE("failure manager reset forgets the streak so a restarted job can fail again") {
  recorder r;
  checkpoint_failure_manager m(0, r.callbacks());
  m.handle_checkpoint_failure(1, reason::checkpoint_declined, "first run");
  CHECK(m.job_failed());
  m.reset();
  CHECK_FALSE(m.job_failed());
  CHECK(m.continuous_failure_count() == 0);
  m.handle_checkpoint_failure(2, reason::checkpoint_declined, "second run");
  CHECK(r.calls() == 2);
}
