// Shared state of incremental checkpoints under the coordinator: a seeded run of triggers,
// acknowledgements that write new shared files and reuse older ones, failed metadata writes,
// failovers, late acknowledgements, lost completion notices and coordinator crashes, over
// several retention counts. After every step no file a retained checkpoint names is missing;
// once the job ends no file is left. Files live in a model of the disk (a set of paths) that
// the coordinator's discard actions change, as its I/O pool would.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint/shared_state_registry.hpp"
#include "tests/engine/coordinator/coordinator_harness.hpp"

using namespace snapflow;
using namespace snapflow::test;

namespace {

// One subtask with an incremental backend: it reuses the shared files of the last checkpoint
// it was told completed (some dropped, as a compaction would), and writes a few new ones.
struct incremental_task {
  std::vector<std::string> base;                          // shared files it builds on
  std::map<checkpoint_id, std::vector<std::string>> sent;  // what each checkpoint named
  int written = 0;
};

class shared_state_sim {
 public:
  shared_state_sim(std::uint32_t seed, int retained) : rng_(seed), retained_(retained) {
    start_coordinator({});
  }

  void run(int steps) {
    for (int step = 0; step < steps; ++step) {
      this->step();
      check_retained_files_exist();
    }
    // The job finishes: every checkpoint goes, and so must every file (once the metadata
    // writes still in flight have ended).
    h_->core->shutdown(job_status::finished, h_->now);
    apply(h_->pump());
    for (checkpoint_id id : std::set<checkpoint_id>(writing_)) write_done(id, true);
    INFO("files left: " << describe(disk_));
    CHECK(disk_.empty());
    CHECK(h_->core->shared_state().size() == 0);
  }

  int completed() const { return completed_; }

 private:
  void step() {
    switch (pick(0, 9)) {
      case 0:
      case 1:
        trigger();
        break;
      case 2:
      case 3:
      case 4:
        ack_some();
        break;
      case 5:
      case 6:
        finish_writes();
        break;
      case 7:
        if (pick(0, 3) == 0) failover();
        break;
      case 8:
        late_ack();
        break;
      case 9:
        if (pick(0, 5) == 0) crash_coordinator();
        break;
    }
  }

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  void trigger() {
    h_->now += 1'000'000;
    apply(h_->request(checkpoint_trigger_kind::manual));
  }

  // Each task acks each pending checkpoint it has not acked, with a coin.
  void ack_some() {
    for (checkpoint_id id : h_->core->pending_ids())
      for (std::size_t t = 0; t < h_->num_tasks(); ++t)
        if (!acked_[id].contains(t) && pick(0, 1) == 0) ack(id, t);
  }

  void ack(checkpoint_id id, std::size_t t) {
    acked_[id].insert(t);
    h_->core->on_ack(make_ack(id, t), h_->now);
    apply(h_->pump());
  }

  // What task `t` writes and names for checkpoint `id`: the files reach the disk before the
  // acknowledgement is sent.
  checkpoint_ack make_ack(checkpoint_id id, std::size_t t) {
    incremental_task& task = tasks_[t];
    checkpoint_ack a;
    a.job = h_->job;
    a.attempt = h_->attempt(t);
    a.id = id;
    std::vector<std::string> named;
    for (const auto& file : task.base) {
      if (pick(0, 3) == 0) continue;  // compacted away
      a.state.handles.push_back({file, 10, 0, std::nullopt, handle_sharing::shared_reused});
      named.push_back(file);
    }
    for (int n = pick(1, 3); n > 0; --n) {
      const std::string file = "job-dir/shared/t" + std::to_string(t) + "-" +
                               std::to_string(task.written++) + ".sst";
      disk_.insert(file);
      a.state.handles.push_back({file, 10, 0, std::nullopt, handle_sharing::shared_new});
      named.push_back(file);
    }
    const std::string own = h_->core->checkpoint_location(id) + "/task-" + std::to_string(t);
    disk_.insert(own);
    a.state.handles.push_back({own, 10, 0, std::nullopt});
    a.state.state_size = 10 * a.state.handles.size();
    task.sent[id] = std::move(named);
    return a;
  }

  void finish_writes() {
    for (checkpoint_id id : std::set<checkpoint_id>(writing_))
      if (pick(0, 1) == 0) write_done(id, pick(0, 7) != 0);
  }

  void write_done(checkpoint_id id, bool ok) {
    writing_.erase(id);
    if (ok) disk_.insert(h_->core->checkpoint_location(id) + "/_metadata");
    const auto before = h_->core->latest_completed_id();
    h_->core->on_metadata_written(id, ok ? result<void>() : result<void>(error{"injected"}),
                                  h_->now);
    apply(h_->pump());
    if (h_->core->latest_completed_id() == id && before != id) ++completed_;
  }

  void failover() {
    h_->core->abort_pending_checkpoints(checkpoint_failure_reason::job_failover, "failover",
                                        h_->now);
    apply(h_->pump());
    restore_tasks();
  }

  // An acknowledgement for a checkpoint that was aborted (its files were written all the same).
  void late_ack() {
    if (aborted_.empty()) return;
    const checkpoint_id id = aborted_[static_cast<std::size_t>(pick(0, static_cast<int>(aborted_.size()) - 1))];
    const std::size_t t = static_cast<std::size_t>(pick(0, static_cast<int>(h_->num_tasks()) - 1));
    if (acked_[id].contains(t)) return;
    ack(id, t);
  }

  // The coordinator dies: a new one recovers the retained checkpoints from disk (here: the
  // store's, all durable), the start-up sweep removes shared files none of them names, and the
  // tasks restart from the latest.
  void crash_coordinator() {
    std::vector<completed_checkpoint> on_disk(h_->store->checkpoints().begin(),
                                              h_->store->checkpoints().end());
    const checkpoint_id next = h_->counter->peek_next();
    start_coordinator(on_disk);
    REQUIRE(h_->counter->advance_to(next));
    // The start-up sweeps: shared files no kept checkpoint names, and the folders of
    // checkpoints that never completed. (Acknowledgements the old coordinator never saw are
    // not sent again: its aborted checkpoints are forgotten.)
    std::set<std::string> named;
    for (const auto& c : on_disk)
      for (const auto& handle : c.all_handles()) named.insert(handle.path);
    std::erase_if(disk_, [&](const std::string& f) {
      if (named.contains(f)) return false;
      return f.starts_with("job-dir/shared/") || f.find("/task-") != std::string::npos;
    });
    aborted_.clear();
    writing_.clear();  // died with the coordinator: those checkpoints never completed
    restore_tasks();
  }

  void start_coordinator(std::vector<completed_checkpoint> recovered) {
    harness_options o;
    o.config.retained = retained_;
    o.config.max_concurrent = 3;
    o.config.min_pause = std::chrono::milliseconds(0);
    o.store = std::make_shared<completed_checkpoint_store>(retained_);
    o.store->recover(std::move(recovered));
    h_ = std::make_unique<coordinator_harness>(o);
    acked_.clear();
  }

  // Tasks restart from the latest checkpoint: it is their base.
  void restore_tasks() {
    const completed_checkpoint* latest = h_->store->latest();
    for (std::size_t t = 0; t < tasks_.size(); ++t) {
      tasks_[t].base.clear();
      if (latest == nullptr) continue;
      for (const auto& [subtask, state] : latest->subtask_states) {
        if (!(subtask == h_->attempt(t).subtask)) continue;
        for (const auto& handle : state.handles)
          if (handle.is_shared()) tasks_[t].base.push_back(handle.path);
      }
    }
  }

  void apply(const std::vector<coordinator_action>& actions) {
    for (const auto& action : actions) {
      if (const auto* d = std::get_if<discard_state>(&action)) {
        for (const auto& handle : d->handles) disk_.erase(handle.path);
      } else if (const auto* l = std::get_if<discard_location>(&action)) {
        for (const auto& handle : l->handles) disk_.erase(handle.path);
        std::erase_if(disk_, [&](const std::string& f) { return f.starts_with(l->location + "/"); });
      } else if (const auto* n = std::get_if<notify_complete>(&action)) {
        // Now and then a notice is lost: the task keeps building on an older checkpoint.
        if (pick(0, 4) == 0) continue;
        for (std::size_t t = 0; t < h_->num_tasks(); ++t)
          if (h_->attempt(t) == n->attempt) tasks_[t].base = tasks_[t].sent[n->id];
      } else if (const auto* w = std::get_if<write_metadata>(&action)) {
        writing_.insert(w->checkpoint.id);
      } else if (const auto* f = std::get_if<request_finished>(&action)) {
        if (f->id && f->failure) aborted_.push_back(*f->id);
      }
    }
  }

  void check_retained_files_exist() {
    for (const auto& c : h_->store->checkpoints())
      for (const auto& handle : c.all_handles()) {
        INFO("checkpoint " << c.id << " names " << handle.path);
        REQUIRE(disk_.contains(handle.path));
      }
  }

  static std::string describe(const std::set<std::string>& files) {
    std::string out;
    for (const auto& f : files) out += f + " ";
    return out;
  }

  std::mt19937 rng_;
  int retained_;
  std::unique_ptr<coordinator_harness> h_;
  std::vector<incremental_task> tasks_ = std::vector<incremental_task>(4);
  std::map<checkpoint_id, std::set<std::size_t>> acked_;
  std::vector<checkpoint_id> aborted_;
  std::set<checkpoint_id> writing_;  // metadata writes asked for and not yet ended
  std::set<std::string> disk_;
  int completed_ = 0;
};

}  // namespace

TEST_CASE("shared state: seeded runs keep every file a retained checkpoint names and leave none "
          "once the job ends") {
  int completed = 0;
  for (std::uint32_t seed = 1; seed <= 25; ++seed)
    for (int retained : {1, 2, 3}) {
      INFO("seed " << seed << ", retained " << retained);
      shared_state_sim sim(seed, retained);
      sim.run(300);
      completed += sim.completed();
    }
  // The runs did complete checkpoints (the invariants were not checked on an empty store).
  CHECK(completed > 300);
}

namespace {

// One source subtask (the only one to acknowledge), stepped by hand; its acknowledgements name
// the handles a test gives.
struct one_subtask : coordinator_harness {
  explicit one_subtask(int max_concurrent = 1) : coordinator_harness(options(max_concurrent)) {}

  static harness_options options(int max_concurrent) {
    harness_options o;
    o.config.max_concurrent = max_concurrent;
    o.config.min_pause = std::chrono::milliseconds(0);
    o.sources = 1;
    o.sinks = 0;
    return o;
  }

  void ack_with(checkpoint_id id, std::vector<state_handle> handles, std::uint64_t size = 0) {
    checkpoint_ack a;
    a.job = job;
    a.attempt = attempt(0);
    a.id = id;
    a.state.handles = std::move(handles);
    a.state.state_size = size;
    core->on_ack(std::move(a), now);
    pump();
  }

  // Every file the logged discards delete.
  std::set<std::string> deleted() const {
    std::set<std::string> out;
    for (const auto& d : logged<discard_state>())
      for (const auto& handle : d.handles) out.insert(handle.path);
    for (const auto& d : logged<discard_location>())
      for (const auto& handle : d.handles) out.insert(handle.path);
    return out;
  }
};

state_handle shared(const std::string& name, handle_sharing sharing) {
  return state_handle{"job-dir/shared/" + name, 10, 0, std::nullopt, sharing};
}

}  // namespace

TEST_CASE("shared state: a file a completion releases stays for the checkpoints pending then, "
          "and a checkpoint that reuses a file no longer held fails") {
  one_subtask h(3);
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(1, {shared("f", handle_sharing::shared_new)});
  h.written(1);
  // 2 does not reuse f; 3's task has not heard that 1 completed... it builds on 1 and
  // reuses f. 2 completes first: f is released, but 3 is pending, so it stays.
  h.request(checkpoint_trigger_kind::manual);
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(2, {shared("g", handle_sharing::shared_new)});
  h.ack_with(3, {shared("f", handle_sharing::shared_reused)});
  h.clear_log();
  h.written(2);
  CHECK(h.deleted().empty());
  CHECK(h.core->shared_state().holds("job-dir/shared/f"));
  // 3 completes naming f: f is in use again, g (only 2's) goes.
  h.written(3);
  CHECK(h.core->latest_completed_id() == 3);
  CHECK(h.core->shared_state().holds("job-dir/shared/f"));
  CHECK(h.deleted() == std::set<std::string>{"job-dir/shared/g"});

  // 4 reuses f but is aborted; 5 does not reuse f and completes while nothing else is
  // pending: f goes at once. A checkpoint triggered later that still names f fails.
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(4, {shared("f", handle_sharing::shared_reused)});
  h.written(4, /*ok=*/false);
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(5, {shared("h", handle_sharing::shared_new)});
  h.clear_log();
  h.written(5);
  CHECK(h.deleted() == std::set<std::string>{"job-dir/shared/f"});
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(6, {shared("f", handle_sharing::shared_reused)});
  h.clear_log();
  h.written(6);
  CHECK(h.core->latest_completed_id() == 5);
  const auto finished = h.finished();
  REQUIRE(finished.size() == 1);
  REQUIRE(finished[0].failure);
  CHECK(*finished[0].failure == checkpoint_failure_reason::finalize_checkpoint_failure);
  CHECK_THAT(finished[0].message, Catch::Contains("job-dir/shared/f"));
}

TEST_CASE("shared state: a file released while older checkpoints were pending goes once they "
          "end without naming it") {
  one_subtask h(3);
  const state_handle f = shared("f", handle_sharing::shared_new);
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(1, {f});
  h.written(1);
  h.request(checkpoint_trigger_kind::manual);
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(2, {shared("g", handle_sharing::shared_new)});
  h.written(2);
  REQUIRE(h.core->shared_state().holds(f.path));  // 3 is pending
  h.clear_log();
  h.core->abort_pending_checkpoints(checkpoint_failure_reason::job_failover, "failover", h.now);
  h.pump();
  CHECK_FALSE(h.core->shared_state().holds(f.path));
  CHECK(h.deleted().contains(f.path));
}

TEST_CASE("shared state: a failed checkpoint deletes the shared files it wrote, never those it "
          "reused or a worker claims as new while a retained checkpoint holds them") {
  one_subtask h;
  const state_handle kept = shared("kept", handle_sharing::shared_new);
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(1, {kept});
  h.written(1);
  h.request(checkpoint_trigger_kind::manual);
  const state_handle fresh = shared("fresh", handle_sharing::shared_new);
  state_handle reused = kept;
  reused.sharing = handle_sharing::shared_reused;
  state_handle claimed = kept;  // names a held file as new
  const state_handle own{"job-dir/chk-2/own", 10, 0, std::nullopt};
  h.ack_with(2, {fresh, reused, claimed, own});
  h.clear_log();
  h.written(2, /*ok=*/false);
  CHECK(h.deleted() == std::set<std::string>{fresh.path, own.path});
  CHECK(h.core->shared_state().holds(kept.path));
}

TEST_CASE("shared state registry: a file lives while its newest user is retained") {
  shared_state_registry r;
  const auto checkpoint = [](checkpoint_id id, std::vector<std::string> shared) {
    completed_checkpoint c;
    c.id = id;
    subtask_state s;
    for (auto& path : shared)
      s.handles.push_back({path, 5, 0, std::nullopt, handle_sharing::shared_reused});
    s.handles.push_back({"chk-" + std::to_string(id) + "/own", 5, 0, std::nullopt});
    c.subtask_states[{0, 0}] = s;
    return c;
  };
  r.register_checkpoint(checkpoint(1, {"a", "b"}));
  r.register_checkpoint(checkpoint(2, {"b", "c"}));
  CHECK(r.size() == 3);
  CHECK(r.bytes() == 15);
  CHECK(exclusive_handles(checkpoint(2, {"b", "c"})).size() == 1);
  // Only checkpoint 2 is retained: a (last used by 1) goes, b and c stay.
  auto released = r.release_older_than(2);
  REQUIRE(released.size() == 1);
  CHECK(released[0].path == "a");
  CHECK(r.holds("b"));
  CHECK(r.check_reused(checkpoint(3, {"b"})) == std::nullopt);
  const auto why = r.check_reused(checkpoint(3, {"a"}));
  REQUIRE(why);
  CHECK_THAT(*why, Catch::Contains("shared state file a"));
  // A restarted coordinator rebuilds it from the retained checkpoints.
  shared_state_registry recovered;
  recovered.recover(std::deque<completed_checkpoint>{checkpoint(2, {"b", "c"})});
  CHECK(recovered.size() == 2);
  CHECK(r.release_all().size() == 2);
  CHECK(r.size() == 0);
  CHECK(r.bytes() == 0);
}

TEST_CASE("shared state: a checkpoint's checkpointed size leaves out the files it reused") {
  one_subtask h;
  const state_handle f{"job-dir/shared/f", 100, 0, std::nullopt, handle_sharing::shared_new};
  state_handle f_again = f;
  f_again.sharing = handle_sharing::shared_reused;
  const state_handle g{"job-dir/shared/g", 7, 0, std::nullopt, handle_sharing::shared_new};
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(1, {f, {"job-dir/chk-1/own", 3, 0, std::nullopt}}, 103);
  h.written(1);
  h.request(checkpoint_trigger_kind::manual);
  h.ack_with(2, {f_again, g, {"job-dir/chk-2/own", 3, 0, std::nullopt}}, 110);
  h.written(2);
  const auto* latest = h.core->stats().latest_completed();
  REQUIRE(latest != nullptr);
  CHECK(latest->id == 2);
  CHECK(latest->state_size == 110);
  CHECK(latest->checkpointed_size == 10);
  CHECK(latest->subtasks.at(0).checkpointed_size == 10);
  // Nothing reused: everything was written.
  const auto* first = h.core->stats().find(1);
  REQUIRE(first != nullptr);
  CHECK(first->checkpointed_size == 103);
}
