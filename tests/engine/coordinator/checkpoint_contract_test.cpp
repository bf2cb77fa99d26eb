// The checkpoint coordinator's contract with Flink, one TEST_CASE per rule, stepping the
// sans-I/O core by hand with a manual clock (the harness's `now`).
#include "tests/engine/coordinator/coordinator_harness.hpp"

using namespace snapflow;
using namespace snapflow::test;
using kind = checkpoint_trigger_kind;
using reason = checkpoint_failure_reason;

namespace {

harness_options tolerant() {
  harness_options o;
  o.config.tolerable_failures = 10;
  return o;
}

}  // namespace

TEST_CASE("contract: a worker's decline reason is the reason recorded") {
  coordinator_harness h(tolerant());
  for (reason r : {reason::checkpoint_declined_task_not_ready, reason::checkpoint_declined_subsumed,
                   reason::checkpoint_declined_on_cancellation_barrier,
                   reason::checkpoint_declined_task_closing, reason::checkpoint_async_exception,
                   reason::io_exception}) {
    h.request(kind::manual);
    const checkpoint_id id = h.core->pending_ids().back();
    h.decline(id, 0, r);
    REQUIRE(h.stats->find(id) != nullptr);
    CHECK(h.stats->find(id)->failure_reason == r);
    CHECK(h.finished().back().failure == r);
  }
}

TEST_CASE("contract: only io_exception, async exception, declined and expired count") {
  std::size_t counted = 0;
  for (std::size_t i = 0; i < checkpoint_failure_reason_count; ++i) {
    const auto r = static_cast<reason>(i);
    const bool expected = r == reason::io_exception || r == reason::checkpoint_async_exception ||
                          r == reason::checkpoint_declined || r == reason::checkpoint_expired;
    CHECK(counts_toward_tolerable(r) == expected);
    counted += counts_toward_tolerable(r);
    CHECK(parse_checkpoint_failure_reason(to_string(r)) == r);  // every reason has a name
  }
  CHECK(counted == 4);
  CHECK(to_string(reason::checkpoint_declined_task_closing) == "checkpoint_declined_task_closing");
}

TEST_CASE("contract: a worker's counted reason counts, an uncounted one does not") {
  coordinator_harness h(tolerant());
  h.request(kind::manual);
  h.decline(1, 0, reason::checkpoint_declined_task_not_ready);
  CHECK(h.failure_manager->continuous_failure_count() == 0);
  h.request(kind::manual);
  h.decline(2, 0, reason::checkpoint_async_exception);
  CHECK(h.failure_manager->continuous_failure_count() == 1);
  h.request(kind::manual);
  h.decline(3, 1, reason::checkpoint_declined);
  CHECK(h.failure_manager->continuous_failure_count() == 2);
}

TEST_CASE("contract: a subtask that finishes before acking ends the checkpoint as task closing") {
  coordinator_harness h(tolerant());
  h.request(kind::manual);
  REQUIRE(h.core->num_pending() == 1);
  CHECK(h.ack(1, 0) == ack_outcome::accepted);
  h.clear_log();
  h.vertices[3]->set_state(execution_state::finished);
  h.core->on_task_ended(h.attempt(3), execution_state::finished, h.now);
  h.pump();
  CHECK(h.core->num_pending() == 0);
  REQUIRE(h.finished().size() == 1);
  CHECK(h.finished().back().failure == reason::checkpoint_declined_task_closing);
  CHECK(h.logged<notify_abort>().size() == h.num_tasks());
  CHECK(h.logged<cancel_timeout>().size() == 1);
  CHECK(h.failure_manager->continuous_failure_count() == 0);
}

TEST_CASE("contract: a subtask that fails or is canceled before acking ends it as task failure") {
  for (execution_state end : {execution_state::failed, execution_state::canceled}) {
    coordinator_harness h(tolerant());
    h.request(kind::manual);
    h.clear_log();
    h.core->on_task_ended(h.attempt(2), end, h.now);
    h.pump();
    CHECK(h.core->num_pending() == 0);
    REQUIRE(h.finished().size() == 1);
    CHECK(h.finished().back().failure == reason::task_failure);
    CHECK(h.logged<notify_abort>().size() == h.num_tasks());
    CHECK(h.failure_manager->continuous_failure_count() == 0);
  }
}

TEST_CASE("contract: an ack before the subtask's FINISHED keeps the checkpoint going") {
  coordinator_harness h(tolerant());
  h.request(kind::manual);
  CHECK(h.ack(1, 3) == ack_outcome::accepted);
  h.clear_log();
  h.core->on_task_ended(h.attempt(3), execution_state::finished, h.now);
  h.pump();
  CHECK(h.core->num_pending() == 1);
  CHECK(h.finished().empty());
  // Other states are no end.
  h.core->on_task_ended(h.attempt(0), execution_state::running, h.now);
  CHECK(h.core->num_pending() == 1);
}

TEST_CASE("contract: a trigger is refused while an acknowledging subtask has ended") {
  coordinator_harness h(tolerant());
  h.vertices[3]->set_state(execution_state::finished);  // a sink: not a trigger task
  h.request(kind::manual);
  CHECK(h.core->num_pending() == 0);
  REQUIRE(h.finished().size() == 1);
  CHECK(h.finished().back().failure == reason::not_all_required_tasks_running);
  CHECK(h.finished().back().message.find("FINISHED") != std::string::npos);
  CHECK(h.logged<send_trigger>().empty());
}

TEST_CASE("contract: an ack after the abort changes no statistic of that checkpoint") {
  coordinator_harness h(tolerant());
  h.request(kind::manual);
  CHECK(h.ack(1, 0) == ack_outcome::accepted);
  h.now += 500;
  h.timeout(1);
  const checkpoint_stats before = *h.stats->find(1);
  const checkpoint_counts counts_before = h.stats->counts();
  h.now += 500;
  CHECK(h.ack(1, 1) == ack_outcome::late_discarded);
  CHECK(h.logged<discard_state>().size() >= 1);
  const checkpoint_stats* after = h.stats->find(1);
  REQUIRE(after != nullptr);
  CHECK(after->num_acknowledged == before.num_acknowledged);
  CHECK(after->state_size == before.state_size);
  CHECK(after->latest_ack_timestamp_us == before.latest_ack_timestamp_us);
  CHECK(after->end_to_end_duration_us == before.end_to_end_duration_us);
  CHECK(after->subtasks.size() == before.subtasks.size());
  CHECK(h.stats->counts().failed == counts_before.failed);
  CHECK(h.stats->counts().completed == counts_before.completed);
}
