#include <catch2/catch.hpp>

#include <vector>

#include "engine/checkpoint/checkpoint_stats_tracker.hpp"

using namespace snapflow;

namespace {

using kind = checkpoint_trigger_kind;

subtask_checkpoint_stats ack(std::uint32_t index, std::int64_t at_us, std::uint64_t size = 0,
                             std::int64_t alignment_us = 0) {
  subtask_checkpoint_stats s;
  s.subtask = {1, index};
  s.ack_timestamp_us = at_us;
  s.state_size = size;
  s.alignment_duration_us = alignment_us;
  return s;
}

std::vector<checkpoint_id> ids(const std::vector<const checkpoint_stats*>& history) {
  std::vector<checkpoint_id> out;
  for (const auto* s : history) out.push_back(s->id);
  return out;
}

}  // namespace

TEST_CASE("stats tracker counts triggered, in progress, completed, failed and restored") {
  checkpoint_stats_tracker t(10, checkpoint_config{});
  t.report_pending(1, kind::periodic, 100, 2);
  t.report_pending(2, kind::periodic, 200, 2);
  t.report_pending(3, kind::manual, 300, 2);
  t.report_completed(1, 150, "chk-1");
  t.report_failed(2, 250, checkpoint_failure_reason::checkpoint_expired, "timeout");
  t.report_failed_without_checkpoint(260, checkpoint_failure_reason::too_many_checkpoint_requests);
  t.report_restored(1, 400, "chk-1", false);
  // Repeated or unknown reports change nothing.
  t.report_completed(1, 500, "chk-1");
  t.report_failed(1, 500, checkpoint_failure_reason::checkpoint_declined, "late");
  t.report_completed(99, 500, "nowhere");

  const checkpoint_counts c = t.counts();
  CHECK(c.triggered == 4);
  CHECK(c.in_progress == 1);
  CHECK(c.completed == 1);
  CHECK(c.failed == 2);
  CHECK(c.restored == 1);
  CHECK(c.triggered == c.in_progress + c.completed + c.failed);

  REQUIRE(t.find(1) != nullptr);
  CHECK(t.find(1)->status == checkpoint_stats_status::completed);
  CHECK(t.find(1)->end_to_end_duration_us == 50);
  CHECK(t.find(1)->external_path == "chk-1");
  REQUIRE(t.find(2) != nullptr);
  CHECK(t.find(2)->failure_reason == checkpoint_failure_reason::checkpoint_expired);
  CHECK(t.find(2)->failure_message == "timeout");
  CHECK(t.find(3)->status == checkpoint_stats_status::in_progress);
  CHECK(t.find(99) == nullptr);
}

TEST_CASE("stats tracker records subtask acks in order and ignores unknown or extra acks") {
  checkpoint_stats_tracker t(10, checkpoint_config{});
  t.report_pending(1, kind::savepoint, 1000, 3);
  t.report_ack(1, ack(2, 1300, 10, 5));
  t.report_ack(1, ack(0, 1200, 20, 40));
  t.report_ack(7, ack(0, 1200, 999));  // unknown checkpoint
  const checkpoint_stats* s = t.find(1);
  REQUIRE(s != nullptr);
  CHECK(s->num_acknowledged == 2);
  CHECK(s->state_size == 30);
  CHECK(s->latest_ack_timestamp_us == 1300);
  CHECK(s->end_to_end_duration_us == 300);
  CHECK(s->max_alignment_duration_us == 40);
  REQUIRE(s->subtasks.size() == 2);
  CHECK(s->subtasks[0] == ack(2, 1300, 10, 5));
  CHECK(s->subtasks[1] == ack(0, 1200, 20, 40));
  t.report_ack(1, ack(1, 1400, 1));
  t.report_ack(1, ack(1, 1500, 1));  // one more than there are subtasks
  CHECK(t.find(1)->num_acknowledged == 3);
  CHECK(t.find(1)->subtasks.size() == 3);
  t.report_completed(1, 1600, "savepoint-abc123-1");
  REQUIRE(t.latest_savepoint() != nullptr);
  CHECK(t.latest_savepoint()->id == 1);
  CHECK(t.latest_completed() == t.latest_savepoint());
  CHECK(t.latest_completed()->end_to_end_duration_us == 600);
}

TEST_CASE("stats tracker bounds the history but never drops an in-progress checkpoint") {
  checkpoint_stats_tracker t(2, checkpoint_config{});
  for (checkpoint_id id = 1; id <= 4; ++id) t.report_pending(id, kind::periodic, id * 100, 1);
  CHECK(t.tracked() == 4);
  for (checkpoint_id id = 1; id <= 4; ++id) CHECK(t.find(id) != nullptr);
  CHECK(ids(t.history()) == std::vector<checkpoint_id>{4, 3});

  // Once finished outside the window, the old one goes; latest_completed keeps it.
  t.report_completed(1, 1000, "chk-1");
  CHECK(t.find(1) == nullptr);
  REQUIRE(t.latest_completed() != nullptr);
  CHECK(t.latest_completed()->id == 1);
  CHECK(t.find(2) != nullptr);

  t.report_failed(4, 1100, checkpoint_failure_reason::checkpoint_declined, "no");
  t.report_completed(3, 1200, "chk-3");
  CHECK(ids(t.history()) == std::vector<checkpoint_id>{4, 3});
  CHECK(t.find(2) != nullptr);  // still in progress
  t.report_pending(5, kind::periodic, 1300, 1);
  CHECK(ids(t.history()) == std::vector<checkpoint_id>{5, 4});
  CHECK(t.find(3) == nullptr);
  CHECK(t.find(2) != nullptr);
  t.report_completed(2, 1400, "chk-2");
  CHECK(t.find(2) == nullptr);
  CHECK(t.tracked() == 2);
  CHECK(t.latest_completed()->id == 3);  // the newest completed, not the last reported
}

TEST_CASE("stats tracker with history size 0 keeps no history but still counts") {
  checkpoint_stats_tracker t(0, checkpoint_config{});
  t.report_pending(1, kind::periodic, 0, 1);
  CHECK(t.find(1) != nullptr);
  CHECK(t.history().empty());
  t.report_ack(1, ack(0, 10, 5));
  t.report_completed(1, 20, "chk-1");
  CHECK(t.find(1) == nullptr);
  CHECK(t.tracked() == 0);
  CHECK(t.counts().completed == 1);
  REQUIRE(t.latest_completed() != nullptr);
  CHECK(t.latest_completed()->state_size == 5);
  CHECK(t.end_to_end_duration_us().count == 1);
}

TEST_CASE("stats tracker: a late ack changes no statistic of a failed checkpoint") {
  checkpoint_stats_tracker t(5, checkpoint_config{});
  t.report_pending(1, kind::periodic, 0, 3);
  t.report_ack(1, ack(0, 10, 100, 3));
  t.report_failed(1, 50, checkpoint_failure_reason::checkpoint_expired, "timeout");
  t.report_ack(1, ack(1, 70, 200, 9));
  const checkpoint_stats* s = t.find(1);
  REQUIRE(s != nullptr);
  CHECK(s->status == checkpoint_stats_status::failed);
  CHECK(s->num_acknowledged == 1);
  CHECK(s->state_size == 100);
  CHECK(s->latest_ack_timestamp_us == 10);
  CHECK(s->max_alignment_duration_us == 3);
  CHECK(s->end_to_end_duration_us == 50);  // a failed checkpoint ended when it failed
  CHECK(t.latest_failed() == s);

  // Also when the failed checkpoint is no longer in the history.
  checkpoint_stats_tracker none(0, checkpoint_config{});
  none.report_pending(1, kind::periodic, 0, 2);
  none.report_failed(1, 50, checkpoint_failure_reason::checkpoint_expired, "timeout");
  none.report_ack(1, ack(0, 60, 7));
  REQUIRE(none.latest_failed() != nullptr);
  CHECK(none.latest_failed()->num_acknowledged == 0);
  CHECK(none.latest_failed()->state_size == 0);
}

TEST_CASE("stats tracker summaries give nearest-rank percentiles over 1..1000") {
  checkpoint_stats_tracker t(3, checkpoint_config{});
  // Completed in a shuffled order so the summary has to sort.
  for (std::int64_t i = 0; i < 1000; ++i) {
    const std::int64_t value = (i * 389) % 1000 + 1;  // 389 is coprime to 1000: a permutation
    const checkpoint_id id = i + 1;
    t.report_pending(id, kind::periodic, 0, 1);
    t.report_ack(id, ack(0, value, static_cast<std::uint64_t>(value) * 10, value * 2));
    t.report_completed(id, value, "");
  }
  const stats_summary d = t.end_to_end_duration_us();
  CHECK(d.count == 1000);
  CHECK(d.min == 1);
  CHECK(d.max == 1000);
  CHECK(d.avg == Approx(500.5));
  CHECK(d.p50 == 500);
  CHECK(d.p90 == 900);
  CHECK(d.p95 == 950);
  CHECK(d.p99 == 990);
  CHECK(d.p999 == 999);
  const stats_summary s = t.state_size();
  CHECK(s.p50 == 5000);
  CHECK(s.max == 10000);
  const stats_summary a = t.alignment_duration_us();
  CHECK(a.p90 == 1800);
  CHECK(a.min == 2);
}

TEST_CASE("stats tracker summaries cover only the latest window of completed checkpoints") {
  checkpoint_stats_tracker t(1, checkpoint_config{});
  const auto total = static_cast<std::int64_t>(checkpoint_stats_tracker::summary_window) + 5;
  for (std::int64_t id = 1; id <= total; ++id) {
    t.report_pending(id, kind::periodic, 0, 0);
    t.report_completed(id, id, "");
  }
  const stats_summary d = t.end_to_end_duration_us();
  CHECK(d.count == static_cast<std::int64_t>(checkpoint_stats_tracker::summary_window));
  CHECK(d.min == 6);
  CHECK(d.max == total);
  CHECK(checkpoint_stats_tracker(1, checkpoint_config{}).end_to_end_duration_us().count == 0);
}

TEST_CASE("stats tracker remembers the latest restore") {
  checkpoint_config config;
  config.stats_history_size = 7;
  checkpoint_stats_tracker t(7, config);
  CHECK_FALSE(t.latest_restored());
  t.report_restored(4, 1000, "chk-4", false);
  t.report_restored(9, 2000, "savepoint-abcdef-9", true);
  auto r = t.latest_restored();
  REQUIRE(r);
  CHECK(r->id == 9);
  CHECK(r->restore_us == 2000);
  CHECK(r->external_path == "savepoint-abcdef-9");
  CHECK(r->savepoint);
  CHECK(t.counts().restored == 2);
  CHECK(t.config() == config);
}

TEST_CASE("stats tracker learns the time to all subtasks notified once every subtask reported") {
  checkpoint_stats_tracker t(10, checkpoint_config{});
  t.report_pending(1, kind::periodic, 1'000, 3);
  // Acks in an order unlike the subtask order: reports must find their subtask anyway.
  t.report_ack(1, ack(2, 1'100));
  t.report_ack(1, ack(0, 1'200));
  t.report_ack(1, ack(1, 1'300));
  // Not completed yet: nothing can have been notified.
  t.report_notified(1, {1, 0}, 1'350);
  CHECK(t.find(1)->num_notified == 0);
  t.report_completed(1, 1'400, "chk-1");

  t.report_notified(1, {1, 1}, 1'700);
  t.report_notified(1, {1, 2}, 1'900);
  const checkpoint_stats* s = t.find(1);
  REQUIRE(s != nullptr);
  CHECK(s->num_notified == 2);
  CHECK_FALSE(s->notified_duration_us);  // subtask 0 has not reported: unknown, not 900
  CHECK(t.notified_duration_us().count == 0);

  // A repeat, a subtask the checkpoint does not have, and unknown checkpoints change nothing.
  t.report_notified(1, {1, 2}, 5'000);
  t.report_notified(1, {1, 7}, 5'000);
  t.report_notified(1, {2, 0}, 5'000);
  t.report_notified(99, {1, 0}, 5'000);
  CHECK(s->num_notified == 2);

  t.report_notified(1, {1, 0}, 1'600);
  CHECK(s->num_notified == 3);
  REQUIRE(s->notified_duration_us);
  CHECK(*s->notified_duration_us == 900);  // trigger 1'000 -> the latest, subtask 2 at 1'900
  CHECK(s->latest_notified_timestamp_us == 1'900);
  for (const auto& sub : s->subtasks) REQUIRE(sub.notified_timestamp_us);
  CHECK(s->subtasks[0].notified_timestamp_us == 1'900);  // subtask 2, the first to ack
  CHECK(s->subtasks[1].notified_timestamp_us == 1'600);
  CHECK(s->subtasks[2].notified_timestamp_us == 1'700);
  CHECK(t.notified_duration_us().count == 1);
  CHECK(t.notified_duration_us().p50 == 900);

  // After the duration is known, a late report cannot move it.
  t.report_notified(1, {1, 0}, 9'000);
  CHECK(*t.find(1)->notified_duration_us == 900);
}

TEST_CASE("stats tracker ignores notifications of failed checkpoints and savepoints") {
  checkpoint_stats_tracker t(10, checkpoint_config{});
  t.report_pending(1, kind::periodic, 100, 1);
  t.report_ack(1, ack(0, 150));
  t.report_failed(1, 200, checkpoint_failure_reason::checkpoint_expired, "timeout");
  t.report_notified(1, {1, 0}, 300);
  CHECK(t.find(1)->num_notified == 0);

  t.report_pending(2, kind::savepoint, 400, 1);
  t.report_ack(2, ack(0, 450));
  t.report_completed(2, 500, "savepoint-2");
  t.report_notified(2, {1, 0}, 600);
  CHECK(t.find(2)->num_notified == 0);
  CHECK_FALSE(t.find(2)->notified_duration_us);
  CHECK(t.notified_duration_us().count == 0);
}

TEST_CASE("stats tracker drops notifications of checkpoints that left the history") {
  checkpoint_stats_tracker t(1, checkpoint_config{});
  t.report_pending(1, kind::periodic, 100, 2);
  t.report_ack(1, ack(0, 110));
  t.report_ack(1, ack(1, 120));
  t.report_completed(1, 130, "chk-1");
  t.report_notified(1, {1, 0}, 140);  // builds the index for checkpoint 1
  t.report_pending(2, kind::periodic, 200, 2);
  t.report_ack(2, ack(0, 210));
  t.report_ack(2, ack(1, 220));
  t.report_completed(2, 230, "chk-2");  // evicts checkpoint 1
  REQUIRE(t.find(1) == nullptr);
  t.report_notified(1, {1, 1}, 240);  // nowhere to go
  CHECK(t.latest_completed()->id == 2);
  t.report_notified(2, {1, 0}, 250);
  t.report_notified(2, {1, 1}, 260);
  REQUIRE(t.find(2)->notified_duration_us);
  CHECK(*t.find(2)->notified_duration_us == 60);
}

TEST_CASE("stats tracker: a failed savepoint is counted apart, never as a failed checkpoint") {
  checkpoint_stats_tracker t(10, checkpoint_config{});
  t.report_pending(1, kind::periodic, 100, 1);
  t.report_pending(2, kind::savepoint, 200, 1);
  t.report_failed(2, 250, checkpoint_failure_reason::checkpoint_declined, "no room");
  // A savepoint request that failed before it had an id.
  t.report_failed_without_checkpoint(260, checkpoint_failure_reason::trigger_checkpoint_failure,
                                     true);
  t.report_failed(1, 300, checkpoint_failure_reason::checkpoint_expired, "timeout");

  const checkpoint_counts c = t.counts();
  CHECK(c.triggered == 3);
  CHECK(c.failed == 1);
  CHECK(c.failed_savepoints == 2);
  CHECK(c.in_progress == 0);
  CHECK(c.triggered == c.in_progress + c.completed + c.failed + c.failed_savepoints);
  // The failed savepoint stays in the history like any failed checkpoint.
  REQUIRE(t.find(2) != nullptr);
  CHECK(t.find(2)->status == checkpoint_stats_status::failed);
}
