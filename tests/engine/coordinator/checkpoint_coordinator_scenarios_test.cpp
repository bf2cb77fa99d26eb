// The checkpoint coordinator's lifecycle scenarios, one TEST_CASE each,
// stepping the sans-I/O core by hand (no sockets, no clock, no sleeps).
#include <fstream>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "tests/engine/coordinator/coordinator_harness.hpp"

using namespace snapflow;
using namespace snapflow::test;
using namespace std::chrono_literals;
using kind = checkpoint_trigger_kind;
using reason = checkpoint_failure_reason;

namespace {

harness_options with(std::function<void(harness_options&)> change) {
  harness_options o;
  change(o);
  return o;
}

std::size_t triggers_for(const std::vector<coordinator_action>& actions, checkpoint_id id) {
  std::size_t n = 0;
  for (const auto& t : only<send_trigger>(actions)) n += t.id == id;
  return n;
}

std::optional<request_finished> finished_for(const coordinator_harness& h, std::uint64_t request) {
  for (const auto& f : h.finished())
    if (f.request_id == request) return f;
  return std::nullopt;
}

std::optional<request_finished> finished_checkpoint(const coordinator_harness& h, checkpoint_id id) {
  for (const auto& f : h.finished())
    if (f.id == id) return f;
  return std::nullopt;
}

}  // namespace

TEST_CASE("scenario 1: a trigger while a trigger subtask is not running fails and creates nothing") {
  coordinator_harness h;
  h.vertices[1]->set_state(execution_state::deploying);
  auto actions = h.request(kind::manual);
  CHECK(h.core->num_pending() == 0);
  CHECK(only<send_trigger>(actions).empty());
  CHECK(only<allocate_checkpoint_id>(actions).empty());
  REQUIRE(h.finished().size() == 1);
  CHECK(h.finished()[0].failure == reason::not_all_required_tasks_running);
  CHECK_THAT(h.finished()[0].message, Catch::Contains("DEPLOYING"));
  CHECK(h.counter->peek_next() == 1);  // no id was spent
}

TEST_CASE("scenario 2: ticks while a subtask is not running create nothing, then trigger once it runs") {
  coordinator_harness h;
  h.core->start_periodic_scheduling();
  h.vertices[0]->set_state(execution_state::scheduled);
  for (int i = 0; i < 3; ++i) CHECK(only<send_trigger>(h.tick()).empty());
  CHECK(h.core->num_pending() == 0);
  h.vertices[0]->set_state(execution_state::running);
  auto actions = h.tick();
  CHECK(h.core->num_pending() == 1);
  CHECK(triggers_for(actions, 1) == 2);
}

TEST_CASE("scenario 3: a periodic request after the trigger stopped fails; a manual one succeeds") {
  coordinator_harness h;
  h.core->start_periodic_scheduling();
  h.core->stop_periodic_scheduling(h.now);
  h.tick();
  REQUIRE(h.finished().size() == 1);
  CHECK(h.finished()[0].failure == reason::periodic_scheduler_shutdown);
  CHECK(h.core->num_pending() == 0);

  auto actions = h.request(kind::manual);
  CHECK(triggers_for(actions, 1) == 2);
  h.complete(1);
  auto done = finished_checkpoint(h, 1);
  REQUIRE(done);
  CHECK_FALSE(done->failure);
  CHECK(h.store->latest()->id == 1);
}

TEST_CASE("scenario 4: shutdown with a queued request fails it as coordinator shutdown") {
  coordinator_harness h;
  h.request(kind::manual);
  REQUIRE(h.core->num_pending() == 1);
  h.core->request_checkpoint(kind::manual, h.now);
  h.pump();
  REQUIRE(h.core->num_queued_requests() == 1);
  h.core->shutdown(job_status::canceled, h.now);
  h.pump();
  CHECK(h.core->num_queued_requests() == 0);
  CHECK(h.core->num_pending() == 0);
  auto queued = finished_for(h, 2);
  REQUIRE(queued);
  CHECK(queued->failure == reason::checkpoint_coordinator_shutdown);
  auto pending = finished_checkpoint(h, 1);
  REQUIRE(pending);
  CHECK(pending->failure == reason::checkpoint_coordinator_shutdown);
  // After shutdown every new request fails the same way.
  h.request(kind::savepoint, "sp");
  CHECK(h.finished().back().failure == reason::checkpoint_coordinator_shutdown);
}

TEST_CASE("scenario 5: a request during another's trigger queues and runs after it") {
  coordinator_harness h(with([](harness_options& o) { o.config.max_concurrent = 2; }));
  h.auto_ids = false;
  auto first = h.request(kind::manual);
  auto alloc1 = only<allocate_checkpoint_id>(first);
  REQUIRE(alloc1.size() == 1);
  CHECK(h.core->is_triggering());
  auto second = h.request(kind::manual);
  CHECK(only<allocate_checkpoint_id>(second).empty());
  CHECK(h.core->num_queued_requests() == 1);

  h.core->on_checkpoint_id(alloc1[0].request_id, h.counter->get_and_increment(), h.now);
  auto after1 = h.pump();
  CHECK(triggers_for(after1, 1) == 2);
  auto alloc2 = only<allocate_checkpoint_id>(after1);
  REQUIRE(alloc2.size() == 1);
  h.core->on_checkpoint_id(alloc2[0].request_id, h.counter->get_and_increment(), h.now);
  auto after2 = h.pump();
  CHECK(triggers_for(after2, 2) == 2);
  CHECK(h.core->num_pending() == 2);
  CHECK_FALSE(h.core->is_triggering());
}

TEST_CASE("scenario 6: an id counter I/O failure fails the checkpoint and, with tolerable 0, the job") {
  auto counter = std::make_shared<faulty_counter>();
  counter->fail = true;
  coordinator_harness h(with([&](harness_options& o) { o.counter = counter; }));
  h.request(kind::manual);
  REQUIRE(h.finished().size() == 1);
  CHECK(h.finished()[0].failure == reason::io_exception);
  CHECK(h.core->num_pending() == 0);
  CHECK(h.job_failures == 1);
  CHECK(h.stats->counts().failed == 1);
  CHECK_FALSE(h.core->is_triggering());
}

TEST_CASE("scenario 7: a failing master hook fails the trigger; a hook that never finishes expires it") {
  auto hook = std::make_shared<test_hook>("offsets");
  coordinator_harness h(with([&](harness_options& o) { o.hooks = {hook}; }));

  auto a = h.request(kind::manual);
  REQUIRE(only<snapshot_master_hooks>(a).size() == 1);
  CHECK(only<send_trigger>(a).empty());
  h.core->on_master_hooks_done(1, error{"hook exploded"}, h.now);
  auto after = h.pump();
  CHECK(only<send_trigger>(after).empty());
  CHECK(h.core->num_pending() == 0);
  REQUIRE(finished_checkpoint(h, 1));
  CHECK(finished_checkpoint(h, 1)->failure == reason::trigger_checkpoint_failure);

  auto b = h.request(kind::manual);
  REQUIRE(only<snapshot_master_hooks>(b).size() == 1);
  CHECK(only<arm_timeout>(b).size() == 1);
  h.timeout(2);
  CHECK(finished_checkpoint(h, 2)->failure == reason::checkpoint_expired);
  h.core->on_master_hooks_done(2, std::map<std::string, std::string>{{"offsets", "x"}}, h.now);
  CHECK(only<send_trigger>(h.pump()).empty());
  CHECK_FALSE(h.core->is_triggering());

  // A hook that answers in time puts its state into the checkpoint.
  h.request(kind::manual);
  h.core->on_master_hooks_done(3, std::map<std::string, std::string>{{"offsets", "42"}}, h.now);
  CHECK(triggers_for(h.pump(), 3) == 2);
  auto w = h.ack_all(3);
  REQUIRE(w);
  CHECK(w->checkpoint.master_states.at("offsets") == "42");
}

TEST_CASE("scenario 8: max concurrent N lets ticks trigger exactly N, one completion one more") {
  const int n = GENERATE(1, 2, 5);
  coordinator_harness h(with([&](harness_options& o) { o.config.max_concurrent = n; }));
  h.core->start_periodic_scheduling();
  std::size_t triggered = 0;
  for (int i = 0; i < 3 * n + 3; ++i) triggered += only<send_trigger>(h.tick()).size();
  CHECK(h.core->num_pending() == static_cast<std::size_t>(n));
  CHECK(triggered == 2u * n);
  h.complete(1);
  CHECK(h.core->num_pending() == static_cast<std::size_t>(n));
  CHECK(h.logged<send_trigger>().size() == 2u * (n + 1));
  for (int i = 0; i < 3; ++i) h.tick();
  CHECK(h.logged<send_trigger>().size() == 2u * (n + 1));
}

TEST_CASE("scenario 9: with 1 and 2 pending, 2 completes, 1 is subsumed, 3 and 4 trigger") {
  coordinator_harness h(with([](harness_options& o) { o.config.max_concurrent = 2; }));
  h.core->start_periodic_scheduling();
  h.tick();
  h.tick();
  REQUIRE(h.core->pending_ids() == std::vector<checkpoint_id>{1, 2});
  h.tick();  // queued: max concurrent reached
  h.complete(2);
  REQUIRE(finished_checkpoint(h, 1));
  CHECK(finished_checkpoint(h, 1)->failure == reason::checkpoint_subsumed);
  h.tick();
  CHECK(h.core->pending_ids() == std::vector<checkpoint_id>{3, 4});
  CHECK(triggers_for(h.log, 3) == 2);
  CHECK(triggers_for(h.log, 4) == 2);
}

TEST_CASE("scenario 10: min pause delays periodic checkpoints; manual ones and savepoints run at once") {
  coordinator_harness h(with([](harness_options& o) {
    o.config.interval = 10ms;
    o.config.min_pause = 50ms;
    o.config.savepoint_dir = "savepoints";
  }));
  h.core->start_periodic_scheduling();
  h.tick();
  h.complete(1);
  const std::int64_t completed_at = h.now;
  h.now += 10'000;
  auto inside = h.tick();
  CHECK(h.core->num_pending() == 0);
  auto reschedule = only<reschedule_periodic>(inside);
  REQUIRE(reschedule.size() == 1);
  CHECK(reschedule[0].delay_us == 40'000);
  CHECK(h.finished().back().failure == reason::minimum_time_between_checkpoints);

  CHECK(triggers_for(h.request(kind::manual), 2) == 2);
  h.complete(2);
  CHECK(triggers_for(h.request(kind::savepoint), 3) == 2);
  h.complete(3);
  CHECK(h.now == completed_at + 10'000);
  const std::int64_t last_completion = h.now;

  h.now = last_completion + 49'000;
  h.tick();
  CHECK(h.core->num_pending() == 0);  // the pause runs from the latest completion
  h.now = last_completion + 50'000;
  h.tick();
  CHECK(h.core->num_pending() == 1);
  CHECK(h.core->pending_ids() == std::vector<checkpoint_id>{4});
}

TEST_CASE("scenario 11: five concurrent savepoints with max concurrent 1 all complete") {
  coordinator_harness h;
  for (int i = 0; i < 5; ++i) h.request(kind::savepoint, "savepoints");
  CHECK(h.core->num_pending() == 5);
  for (checkpoint_id id = 1; id <= 5; ++id) h.complete(id);
  CHECK(h.store->savepoints().size() == 5);
  for (checkpoint_id id = 1; id <= 5; ++id) {
    auto f = finished_checkpoint(h, id);
    REQUIRE(f);
    CHECK_FALSE(f->failure);
    CHECK_THAT(f->location, Catch::Contains("savepoint-"));
  }
  CHECK(h.logged<notify_complete>().empty());
}

TEST_CASE("scenario 12: queue priority is savepoint, manual, periodic; a full queue drops the lowest") {
  coordinator_harness h(with([](harness_options& o) { o.config.max_concurrent = 10; }));
  h.core->start_periodic_scheduling();
  h.auto_ids = false;
  auto first = only<allocate_checkpoint_id>(h.request(kind::manual));
  REQUIRE(first.size() == 1);
  h.tick();
  h.request(kind::manual);
  h.request(kind::savepoint, "sp");
  CHECK(h.core->num_queued_requests() == 3);
  std::vector<checkpoint_trigger_kind> order;
  std::uint64_t next_request = first[0].request_id;
  for (int i = 0; i < 4; ++i) {
    h.core->on_checkpoint_id(next_request, h.counter->get_and_increment(), h.now);
    auto actions = h.pump();
    checkpoint_id id = i + 1;
    order.push_back(h.core->find_pending(id)->kind());
    auto alloc = only<allocate_checkpoint_id>(actions);
    if (i < 3) {
      REQUIRE(alloc.size() == 1);
      next_request = alloc[0].request_id;
    }
  }
  CHECK(order == std::vector<checkpoint_trigger_kind>{kind::manual, kind::savepoint, kind::manual,
                                                      kind::periodic});

  // Fill the queue (1000) while a trigger is in flight.
  coordinator_harness f;
  f.core->start_periodic_scheduling();
  f.auto_ids = false;
  f.request(kind::manual);
  f.tick();
  for (int i = 0; i < 999; ++i) f.core->request_checkpoint(kind::manual, f.now);
  f.pump();
  CHECK(f.core->num_queued_requests() == 1000);
  CHECK(f.finished().empty());
  f.request(kind::savepoint, "sp");
  REQUIRE(f.finished().size() == 1);
  CHECK(f.finished()[0].kind == kind::periodic);
  CHECK(f.finished()[0].failure == reason::too_many_checkpoint_requests);
  const std::uint64_t newest = f.core->request_checkpoint(kind::manual, f.now);
  f.pump();
  REQUIRE(f.finished().size() == 2);
  CHECK(f.finished()[1].request_id == newest);
  CHECK(f.finished()[1].failure == reason::too_many_checkpoint_requests);
}

TEST_CASE("scenario 13: start, stop, start: ids increase, timestamps never go back, nothing while stopped") {
  coordinator_harness h;
  h.core->start_periodic_scheduling();
  h.tick();
  const std::int64_t ts1 = h.core->find_pending(1)->trigger_timestamp_us();
  h.complete(1);
  h.core->stop_periodic_scheduling(h.now);
  for (int i = 0; i < 3; ++i) CHECK(only<send_trigger>(h.tick()).empty());
  CHECK(h.core->num_pending() == 0);
  h.core->start_periodic_scheduling();
  h.now -= 5'000;  // a clock that steps back must not move trigger timestamps back
  h.tick();
  REQUIRE(h.core->pending_ids() == std::vector<checkpoint_id>{2});
  CHECK(h.core->find_pending(2)->trigger_timestamp_us() >= ts1);
}

TEST_CASE("scenario 14: acks count down, duplicates change nothing, the last ack completes durably") {
  coordinator_harness h;
  h.request(kind::manual);
  const pending_checkpoint* p = h.core->find_pending(1);
  REQUIRE(p->num_not_yet_acknowledged() == 4);
  CHECK(h.ack(1, 0) == ack_outcome::accepted);
  CHECK(p->num_not_yet_acknowledged() == 3);
  CHECK(h.ack(1, 0) == ack_outcome::duplicate);
  CHECK(p->num_not_yet_acknowledged() == 3);
  h.ack(1, 1);
  h.ack(1, 2);
  CHECK(p->num_not_yet_acknowledged() == 1);
  h.clear_log();
  CHECK(h.ack(1, 3) == ack_outcome::completed);
  CHECK(h.logged<cancel_timeout>().size() == 1);
  REQUIRE(h.logged<write_metadata>().size() == 1);
  // Durability comes before anyone hears of the completion.
  CHECK(h.logged<notify_complete>().empty());
  CHECK(h.store->latest() == nullptr);
  h.written(1);
  auto notified = h.logged<notify_complete>();
  REQUIRE(notified.size() == 4);
  std::set<execution_attempt_id> attempts;
  for (auto& n : notified) attempts.insert(n.attempt);
  CHECK(attempts.size() == 4);
  CHECK(h.store->latest()->id == 1);
  CHECK(h.stats->counts().completed == 1);
  CHECK(h.core->num_pending() == 0);
}

TEST_CASE("scenario 15: with retained 1 a second checkpoint replaces the first and its files go") {
  coordinator_harness h;
  h.request(kind::manual);
  h.complete(1);
  h.request(kind::manual);
  h.complete(2);
  REQUIRE(h.store->checkpoints().size() == 1);
  CHECK(h.store->latest()->id == 2);
  auto discards = h.logged<discard_location>();
  REQUIRE(discards.size() == 1);
  CHECK_THAT(discards[0].location, Catch::EndsWith("chk-1"));
  CHECK(discards[0].handles.size() == 4);
}

TEST_CASE("scenario 16: an ack with the wrong job id is ignored and touches nothing") {
  coordinator_harness h;
  h.request(kind::manual);
  h.clear_log();
  auto ack = h.make_ack(1, 0);
  ack.job = "ffffffffffffffffffffffffffffffff";
  CHECK(h.core->on_ack(ack, h.now) == ack_outcome::ignored_wrong_job);
  CHECK(h.pump().empty());
  CHECK(h.core->find_pending(1)->num_acknowledged() == 0);
  CHECK(h.stats->find(1)->num_acknowledged == 0);
}

TEST_CASE("scenario 17: an ack from an unknown attempt discards its state; the checkpoint is unaffected") {
  coordinator_harness h;
  h.request(kind::manual);
  h.clear_log();
  auto ack = h.make_ack(1, 0, "stale-file");
  ack.attempt.attempt = 7;
  CHECK(h.core->on_ack(ack, h.now) == ack_outcome::unknown_attempt);
  auto discards = only<discard_state>(h.pump());
  REQUIRE(discards.size() == 1);
  CHECK(discards[0].handles[0].path == "stale-file");
  CHECK(h.core->find_pending(1)->num_not_yet_acknowledged() == 4);
  h.complete(1);
  CHECK(h.store->latest()->id == 1);
}

TEST_CASE("scenario 18: an ack after a decline or expiry discards its state and changes no statistic") {
  coordinator_harness h(with([](harness_options& o) { o.config.tolerable_failures = 10; }));
  h.request(kind::manual);
  h.decline(1, 0);
  h.clear_log();
  CHECK(h.ack(1, 1) == ack_outcome::late_discarded);
  REQUIRE(h.logged<discard_state>().size() == 1);
  const checkpoint_stats* s = h.stats->find(1);
  REQUIRE(s);
  CHECK(s->status == checkpoint_stats_status::failed);
  CHECK(s->num_acknowledged == 0);

  h.request(kind::manual);
  h.timeout(2);
  h.clear_log();
  CHECK(h.ack(2, 3) == ack_outcome::late_discarded);
  CHECK(h.logged<discard_state>().size() == 1);
  CHECK(h.stats->find(2)->num_acknowledged == 0);
}

TEST_CASE("scenario 19: a decline aborts, discards acked state, cancels the timeout, notifies abort once") {
  coordinator_harness h(with([](harness_options& o) { o.config.tolerable_failures = 10; }));
  h.request(kind::manual);
  h.ack(1, 1);
  h.clear_log();
  h.decline(1, 0);
  CHECK(h.core->num_pending() == 0);
  auto discards = h.logged<discard_state>();
  REQUIRE(discards.size() == 1);
  CHECK(discards[0].handles[0].path == "state-1-1");
  CHECK(h.logged<cancel_timeout>().size() == 1);
  CHECK(h.logged<notify_abort>().size() == 4);
  CHECK(h.finished().back().failure == reason::checkpoint_declined);
  h.clear_log();
  h.decline(1, 0);
  h.decline(1, 2);
  CHECK(h.log.empty());
  CHECK(h.stats->counts().failed == 1);
}

TEST_CASE("scenario 20: a decline of 1 while 2 is pending aborts only 1") {
  coordinator_harness h(with([](harness_options& o) {
    o.config.max_concurrent = 2;
    o.config.tolerable_failures = 10;
  }));
  h.request(kind::manual);
  h.request(kind::manual);
  REQUIRE(h.core->num_pending() == 2);
  h.decline(1, 2);
  CHECK(h.core->pending_ids() == std::vector<checkpoint_id>{2});
  h.complete(2);
  CHECK(h.store->latest()->id == 2);
}

TEST_CASE("scenario 21: tolerable 0 and a decline or async failure fails the job exactly once") {
  SECTION("decline") {
    coordinator_harness h;
    h.request(kind::manual);
    h.decline(1, 0);
    CHECK(h.job_failures == 1);
    h.request(kind::manual);
    h.decline(2, 1);
    CHECK(h.job_failures == 1);
    CHECK_THAT(h.last_failure_cause, Catch::Contains("checkpoint_declined"));
  }
  SECTION("async failure") {
    coordinator_harness h;
    h.request(kind::manual);
    h.decline(1, 3, reason::checkpoint_async_exception);
    CHECK(h.job_failures == 1);
    CHECK(h.task_job_failures == 1);
  }
}

TEST_CASE("scenario 22: a partially acked checkpoint that times out is disposed without completion") {
  coordinator_harness h(with([](harness_options& o) { o.config.tolerable_failures = 10; }));
  h.request(kind::manual);
  h.ack(1, 0);
  h.ack(1, 1);
  h.clear_log();
  h.timeout(1);
  CHECK(h.core->num_pending() == 0);
  auto discards = h.logged<discard_state>();
  REQUIRE(discards.size() == 1);
  CHECK(discards[0].handles.size() == 2);
  // The folder the subtasks wrote into goes too.
  auto folders = h.logged<discard_location>();
  REQUIRE(folders.size() == 1);
  CHECK_THAT(folders[0].location, Catch::EndsWith("chk-1"));
  CHECK(h.logged<notify_complete>().empty());
  CHECK(h.logged<write_metadata>().empty());
  CHECK(h.finished().back().failure == reason::checkpoint_expired);
  CHECK(h.ack(1, 2) == ack_outcome::late_discarded);
  CHECK(h.store->latest() == nullptr);
}

TEST_CASE("scenario 23: tolerable 0 and an expiry or I/O failure fails the job") {
  SECTION("expiry") {
    coordinator_harness h;
    h.request(kind::manual);
    h.timeout(1);
    CHECK(h.job_failures == 1);
    CHECK_THAT(h.last_failure_cause, Catch::Contains("checkpoint_expired"));
  }
  SECTION("I/O failure") {
    auto counter = std::make_shared<faulty_counter>();
    counter->fail = true;
    coordinator_harness h(with([&](harness_options& o) { o.counter = counter; }));
    h.request(kind::manual);
    CHECK(h.job_failures == 1);
  }
}

TEST_CASE("scenario 24: an abort notification carries the latest completed checkpoint id") {
  coordinator_harness h(with([](harness_options& o) { o.config.tolerable_failures = 10; }));
  h.request(kind::manual);
  h.decline(1, 0);
  for (const auto& n : h.logged<notify_abort>()) CHECK(n.latest_completed_id == 0);
  h.request(kind::manual);
  h.complete(2);
  h.clear_log();
  h.request(kind::manual);
  h.decline(3, 0);
  auto aborts = h.logged<notify_abort>();
  REQUIRE(aborts.size() == 4);
  for (const auto& n : aborts) {
    CHECK(n.id == 3);
    CHECK(n.latest_completed_id == 2);
  }
}

TEST_CASE("scenario 25: 2 completes while 1 is pending: 1 is subsumed, a late ack for 1 is discarded") {
  coordinator_harness h(with([](harness_options& o) { o.config.max_concurrent = 2; }));
  h.request(kind::manual);
  h.request(kind::manual);
  h.ack(1, 0);
  h.clear_log();
  h.complete(2);
  auto f1 = finished_checkpoint(h, 1);
  REQUIRE(f1);
  CHECK(f1->failure == reason::checkpoint_subsumed);
  bool discarded_1 = false;
  for (const auto& d : h.logged<discard_state>())
    for (const auto& handle : d.handles) discarded_1 |= handle.path == "state-1-0";
  CHECK(discarded_1);
  h.clear_log();
  CHECK(h.ack(1, 1) == ack_outcome::late_discarded);
  CHECK(h.logged<discard_state>().size() == 1);
  CHECK(h.job_failures == 0);  // subsumption is not a failure of the job
}

TEST_CASE("scenario 26: a savepoint stays out of retention, notifies nothing and subsumes nothing") {
  coordinator_harness h(with([](harness_options& o) { o.config.max_concurrent = 2; }));
  h.request(kind::manual);
  h.complete(1);
  h.request(kind::manual);  // 2 stays pending
  h.clear_log();
  h.request(kind::savepoint, "savepoints");
  h.complete(3);
  CHECK(h.logged<notify_complete>().empty());
  CHECK(h.logged<discard_location>().empty());
  CHECK(h.core->pending_ids() == std::vector<checkpoint_id>{2});
  REQUIRE(h.store->checkpoints().size() == 1);
  CHECK(h.store->latest()->id == 1);
  REQUIRE(h.store->savepoints().size() == 1);
  CHECK(h.store->savepoints()[0].id == 3);
  h.complete(2);
  CHECK(h.store->latest()->id == 2);
  CHECK(h.store->savepoints().size() == 1);
}

TEST_CASE("scenario 27: a metadata write or store failure fails the checkpoint as finalize, not counted (as Flink)") {
  auto store = std::make_shared<faulty_store>(1);
  coordinator_harness h(with([&](harness_options& o) {
    o.config.tolerable_failures = 10;
    o.store = store;
  }));
  h.request(kind::manual);
  REQUIRE(h.ack_all(1));
  h.written(1, false);
  CHECK(h.finished().back().failure == reason::finalize_checkpoint_failure);
  CHECK(h.failure_manager->continuous_failure_count() == 0);
  CHECK(h.logged<discard_location>().size() == 1);
  CHECK(h.logged<notify_complete>().empty());

  store->fail_next_add = true;
  h.request(kind::manual);
  h.complete(2);
  CHECK(h.finished().back().failure == reason::finalize_checkpoint_failure);
  CHECK(h.failure_manager->continuous_failure_count() == 0);
  CHECK(h.store->latest() == nullptr);
  CHECK(h.logged<notify_complete>().empty());
  CHECK(h.stats->counts().failed == 2);
}

TEST_CASE("scenario 28: tolerable 2 fails the job exactly once on the third counted failure") {
  coordinator_harness h(with([](harness_options& o) { o.config.tolerable_failures = 2; }));
  auto fail_with = [&](checkpoint_id id, reason r) {
    h.request(kind::manual);
    REQUIRE(h.core->find_pending(id));
    if (r == reason::checkpoint_expired)
      h.timeout(id);
    else
      h.decline(id, 0, r);
  };
  fail_with(1, reason::checkpoint_declined);               // counted: 1
  fail_with(2, reason::checkpoint_declined_subsumed);      // not counted
  fail_with(3, reason::checkpoint_expired);                // counted: 2
  fail_with(4, reason::checkpoint_declined_task_not_ready);// not counted
  CHECK(h.job_failures == 0);
  fail_with(5, reason::checkpoint_declined);               // counted: 3 > 2
  CHECK(h.job_failures == 1);
  fail_with(6, reason::checkpoint_expired);
  CHECK(h.job_failures == 1);
  h.request(kind::manual);
  h.complete(7);
  CHECK(h.failure_manager->continuous_failure_count() == 0);
  fail_with(8, reason::checkpoint_declined);
  CHECK(h.failure_manager->continuous_failure_count() == 1);
  CHECK(h.job_failures == 1);
}

TEST_CASE("scenario 29: failures of ids older than the last success are ignored; an id counts once") {
  coordinator_harness h(with([](harness_options& o) { o.config.max_concurrent = 2; }));
  h.request(kind::savepoint, "savepoints");  // 1: a savepoint is never subsumed
  h.request(kind::manual);                   // 2
  h.complete(2);
  REQUIRE(h.core->pending_ids() == std::vector<checkpoint_id>{1});
  h.decline(1, 0);
  CHECK(finished_checkpoint(h, 1)->failure == reason::checkpoint_declined);
  CHECK(h.failure_manager->continuous_failure_count() == 0);
  CHECK(h.job_failures == 0);

  h.failure_manager->handle_checkpoint_failure(9, reason::checkpoint_declined, "x");
  h.failure_manager->handle_checkpoint_failure(9, reason::checkpoint_expired, "again");
  CHECK(h.failure_manager->continuous_failure_count() == 1);
}

TEST_CASE("scenario 30: the id counter starts at 1, survives a restart and jumps past a savepoint") {
  temp_dir dir;
  checkpoint_id last = 0;
  {
    auto counter = file_checkpoint_id_counter::open(dir.path);
    REQUIRE(counter);
    std::shared_ptr<checkpoint_id_counter> c = std::move(*counter);
    coordinator_harness h(with([&](harness_options& o) { o.counter = c; }));
    h.request(kind::manual);
    CHECK(h.core->pending_ids() == std::vector<checkpoint_id>{1});
    h.complete(1);
    h.request(kind::manual);
    h.complete(2);
    last = 2;
  }
  auto reopened = file_checkpoint_id_counter::open(dir.path);
  REQUIRE(reopened);
  std::shared_ptr<checkpoint_id_counter> c = std::move(*reopened);
  coordinator_harness h(with([&](harness_options& o) { o.counter = c; }));
  h.request(kind::manual);
  REQUIRE(h.core->num_pending() == 1);
  const checkpoint_id after_restart = h.core->pending_ids()[0];
  CHECK(after_restart > last);
  h.complete(after_restart);
  REQUIRE(c->advance_to(1000 + 1));  // restoring savepoint 1000
  h.request(kind::manual);
  REQUIRE(h.core->num_pending() == 1);
  CHECK(h.core->pending_ids()[0] > 1000);
}

TEST_CASE("scenario 31: the store rebuilt from disk has the same latest; a torn _metadata is skipped") {
  temp_dir dir;
  const auto job_dir = dir.path / "job";
  coordinator_harness h(with([&](harness_options& o) {
    o.job_dir = job_dir;
    o.config.retained = 3;
  }));
  checkpoint_storage storage(job_dir);
  for (checkpoint_id id = 1; id <= 3; ++id) {
    h.request(kind::manual);
    auto w = h.ack_all(id);
    REQUIRE(w);
    REQUIRE(storage.write_metadata(w->checkpoint));
    h.written(id);
  }
  {
    completed_checkpoint_store rebuilt(3);
    auto recovered = storage.recover();
    CHECK(recovered.warnings.empty());
    rebuilt.recover(recovered.checkpoints);
    REQUIRE(rebuilt.latest());
    CHECK(*rebuilt.latest() == *h.store->latest());
  }
  // Tear the newest metadata file in half, as a crash mid-write without rename would not, but
  // a broken disk might.
  const auto meta = storage.checkpoint_dir(3) / "_metadata";
  const auto size = std::filesystem::file_size(meta);
  std::filesystem::resize_file(meta, size / 2);
  completed_checkpoint_store rebuilt(3);
  auto recovered = storage.recover();
  CHECK(recovered.warnings.size() == 1);
  rebuilt.recover(recovered.checkpoints);
  REQUIRE(rebuilt.latest());
  CHECK(rebuilt.latest()->id == 2);
}

// Found by the simulation (tests/sim; without this check seeds 12, 29 and 30 failed when it was
// written): reserving a block of ids goes through the disk, so the id can arrive after the job
// failed over. It must not become a checkpoint.
TEST_CASE("an id that arrives after the job stopped running creates no checkpoint") {
  SECTION("periodic: the trigger stopped meanwhile") {
    coordinator_harness h;
    h.auto_ids = false;
    h.core->start_periodic_scheduling();
    auto alloc = only<allocate_checkpoint_id>(h.tick());
    REQUIRE(alloc.size() == 1);
    h.core->stop_periodic_scheduling(h.now);  // the job left RUNNING
    for (auto& v : h.vertices) v->reset_for_new_attempt();
    h.core->on_checkpoint_id(alloc[0].request_id, h.counter->get_and_increment(), h.now);
    auto after = h.pump();
    CHECK(only<send_trigger>(after).empty());
    CHECK(h.core->num_pending() == 0);
    CHECK_FALSE(h.core->is_triggering());
    REQUIRE(finished_for(h, alloc[0].request_id));
    CHECK(finished_for(h, alloc[0].request_id)->failure == reason::periodic_scheduler_shutdown);
    CHECK(h.job_failures == 0);
  }
  SECTION("manual: a trigger subtask is no longer running") {
    coordinator_harness h;
    h.auto_ids = false;
    auto alloc = only<allocate_checkpoint_id>(h.request(kind::manual));
    REQUIRE(alloc.size() == 1);
    h.vertices[0]->set_state(execution_state::canceled);
    h.core->on_checkpoint_id(alloc[0].request_id, h.counter->get_and_increment(), h.now);
    CHECK(only<send_trigger>(h.pump()).empty());
    CHECK(h.core->num_pending() == 0);
    REQUIRE(finished_for(h, alloc[0].request_id));
    CHECK(finished_for(h, alloc[0].request_id)->failure ==
          reason::not_all_required_tasks_running);
    // The id is spent, never reused; the next checkpoint takes the next one.
    h.vertices[0]->set_state(execution_state::running);
    h.auto_ids = true;
    CHECK(triggers_for(h.request(kind::manual), 2) == 2);
  }
}

// Found by the simulation (without this, seeds 267 and 579 failed when it was written): each
// abort started the next queued request, so aborting every pending checkpoint in a failover
// (before the job master cancels the tasks) created a new checkpoint of the dying attempts,
// which outlived the abort loop.
TEST_CASE("aborting every pending checkpoint starts no queued request") {
  coordinator_harness h;  // max concurrent 1
  h.request(kind::manual);
  h.request(kind::savepoint, "sp");  // waits: a savepoint passes a full house, not a trigger...
  h.request(kind::manual);           // ...and this one waits for the house
  REQUIRE(h.core->pending_ids() == std::vector<checkpoint_id>{1, 2});
  REQUIRE(h.core->num_queued_requests() == 1);
  h.clear_log();
  h.core->abort_pending_checkpoints(reason::job_failover, "a task failed", h.now);
  auto actions = h.pump();
  CHECK(h.core->num_pending() == 0);
  CHECK(only<send_trigger>(actions).empty());
  CHECK(only<allocate_checkpoint_id>(actions).empty());
  CHECK(h.core->num_queued_requests() == 1);
  // It runs on the next occasion, once the job runs again.
  CHECK(triggers_for(h.request(kind::manual), 3) == 2);
}
