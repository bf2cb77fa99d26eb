#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "engine/checkpoint/checkpoint_coordinator_core.hpp"
#include "tests/support/temp_folder.hpp"

namespace snapflow::test {

template <typename T>
std::vector<T> only(const std::vector<coordinator_action>& actions) {
  std::vector<T> out;
  for (const auto& a : actions)
    if (const T* t = std::get_if<T>(&a)) out.push_back(*t);
  return out;
}

// A store whose add fails on demand (scenario 27).
class faulty_store : public completed_checkpoint_store {
 public:
  using completed_checkpoint_store::completed_checkpoint_store;
  bool fail_next_add = false;
  result<std::vector<completed_checkpoint>> add(completed_checkpoint c) override {
    if (fail_next_add) {
      fail_next_add = false;
      return error{"injected store failure"};
    }
    return completed_checkpoint_store::add(std::move(c));
  }
};

// An id counter that fails on demand (scenario 6).
class faulty_counter : public checkpoint_id_counter {
 public:
  bool fail = false;
  result<checkpoint_id> get_and_increment() override {
    if (fail) return error{"injected disk failure"};
    return next_++;
  }
  bool next_is_cheap() const override { return true; }
  checkpoint_id peek_next() const override { return next_; }
  result<void> advance_to(checkpoint_id next) override {
    next_ = std::max(next_, next);
    return success();
  }

 private:
  checkpoint_id next_ = 1;
};

class test_hook : public master_hook {
 public:
  explicit test_hook(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void snapshot(checkpoint_id, std::int64_t, std::function<void(result<std::string>)>) override {}
  result<void> restore(checkpoint_id id, std::string_view state) override {
    restored_id = id;
    restored_state = std::string(state);
    return success();
  }
  std::optional<checkpoint_id> restored_id;
  std::string restored_state;

 private:
  std::string name_;
};

struct harness_options {
  checkpoint_config config = [] {
    checkpoint_config c;
    c.interval = std::chrono::milliseconds(100);
    c.timeout = std::chrono::milliseconds(1000);
    return c;
  }();
  std::uint32_t sources = 2;
  std::uint32_t sinks = 2;
  std::vector<std::shared_ptr<master_hook>> hooks;
  std::shared_ptr<checkpoint_id_counter> counter;
  std::shared_ptr<completed_checkpoint_store> store;
  std::filesystem::path job_dir = "job-dir";
};

// A checkpoint coordinator core over 2 source subtasks (vertex 0) and 2 sink subtasks (vertex
// 1), stepped by hand: time is a number, id allocation answers at once unless told otherwise,
// and every other action is collected for the test to inspect and answer.
struct coordinator_harness {
  explicit coordinator_harness(harness_options o = {}) : options(std::move(o)) {
    for (std::uint32_t i = 0; i < options.sources; ++i)
      vertices.push_back(std::make_unique<execution_vertex>(subtask_id{0, i}, options.sources, "source"));
    for (std::uint32_t i = 0; i < options.sinks; ++i)
      vertices.push_back(std::make_unique<execution_vertex>(subtask_id{1, i}, options.sinks, "sink"));
    for (auto& v : vertices) v->set_state(execution_state::running);
    counter = options.counter ? options.counter : std::make_shared<in_memory_checkpoint_id_counter>();
    store = options.store ? options.store
                          : std::make_shared<completed_checkpoint_store>(options.config.retained);
    stats = std::make_shared<checkpoint_stats_tracker>(10, options.config);
    hooks = std::make_shared<master_hook_registry>();
    for (auto& h : options.hooks) REQUIRE(hooks->add(h));
    checkpoint_failure_manager::callbacks cb;
    cb.fail_job = [this](const std::string& cause) {
      ++job_failures;
      last_failure_cause = cause;
    };
    cb.fail_job_due_to_task_failure = [this](const std::string& cause, const execution_attempt_id&) {
      ++job_failures;
      ++task_job_failures;
      last_failure_cause = cause;
    };
    failure_manager =
        std::make_shared<checkpoint_failure_manager>(options.config.tolerable_failures, cb);
    checkpoint_coordinator_setup s;
    s.job = job;
    s.config = options.config;
    for (std::uint32_t i = 0; i < options.sources; ++i) s.tasks_to_trigger.push_back(vertices[i].get());
    for (auto& v : vertices) {
      s.tasks_to_acknowledge.push_back(v.get());
      s.tasks_to_confirm.push_back(v.get());
    }
    s.job_dir = options.job_dir;
    s.hooks = hooks;
    s.id_counter = counter;
    s.store = store;
    s.stats = stats;
    s.failure_manager = failure_manager;
    core = std::make_unique<checkpoint_coordinator_core>(std::move(s));
  }

  // Collects the core's actions, answering id allocations on the spot when auto_ids is set.
  std::vector<coordinator_action> pump() {
    std::vector<coordinator_action> out;
    while (core->has_actions()) {
      for (auto& a : core->take_actions()) {
        if (auto* alloc = std::get_if<allocate_checkpoint_id>(&a); alloc && auto_ids) {
          core->on_checkpoint_id(alloc->request_id, counter->get_and_increment(), now);
          continue;
        }
        out.push_back(a);
      }
    }
    log.insert(log.end(), out.begin(), out.end());
    return out;
  }

  std::vector<coordinator_action> tick() {
    core->on_tick(now);
    return pump();
  }
  std::vector<coordinator_action> request(checkpoint_trigger_kind kind, std::string dir = {}) {
    core->request_checkpoint(kind, now, std::move(dir));
    return pump();
  }

  execution_attempt_id attempt(std::size_t i) const { return vertices[i]->current_attempt(); }
  std::size_t num_tasks() const { return vertices.size(); }

  checkpoint_ack make_ack(checkpoint_id id, std::size_t task, std::string file = {}) const {
    checkpoint_ack a;
    a.job = job;
    a.attempt = attempt(task);
    a.id = id;
    if (file.empty()) file = "state-" + std::to_string(id) + "-" + std::to_string(task);
    a.state.handles.push_back({file, 10, 0});
    a.state.state_size = 10;
    a.metrics.sync_duration_us = 5;
    a.metrics.async_duration_us = 7;
    a.metrics.alignment_duration_us = 3;
    return a;
  }

  ack_outcome ack(checkpoint_id id, std::size_t task) {
    auto outcome = core->on_ack(make_ack(id, task), now);
    pump();
    return outcome;
  }

  // Every task acks `id`; returns the metadata write the last ack asked for.
  std::optional<write_metadata> ack_all(checkpoint_id id) {
    for (std::size_t i = 0; i < num_tasks(); ++i) core->on_ack(make_ack(id, i), now);
    auto writes = only<write_metadata>(pump());
    if (writes.empty()) return std::nullopt;
    return writes.back();
  }

  void written(checkpoint_id id, bool ok = true) {
    core->on_metadata_written(id, ok ? result<void>() : result<void>(error{"injected"}), now);
    pump();
  }

  // Acks every task and confirms the metadata write: the checkpoint completes.
  void complete(checkpoint_id id) {
    auto w = ack_all(id);
    REQUIRE(w);
    written(id);
  }

  void decline(checkpoint_id id, std::size_t task,
               checkpoint_failure_reason reason = checkpoint_failure_reason::checkpoint_declined) {
    core->on_decline({job, attempt(task), id, reason, "test decline"}, now);
    pump();
  }

  void timeout(checkpoint_id id) {
    core->on_timeout(id, now);
    pump();
  }

  template <typename T>
  std::vector<T> logged() const {
    return only<T>(log);
  }
  std::vector<request_finished> finished() const { return logged<request_finished>(); }
  void clear_log() { log.clear(); }

  harness_options options;
  job_id job = "0123456789abcdef0123456789abcdef";
  std::vector<std::unique_ptr<execution_vertex>> vertices;
  std::shared_ptr<checkpoint_id_counter> counter;
  std::shared_ptr<completed_checkpoint_store> store;
  std::shared_ptr<checkpoint_stats_tracker> stats;
  std::shared_ptr<master_hook_registry> hooks;
  std::shared_ptr<checkpoint_failure_manager> failure_manager;
  std::unique_ptr<checkpoint_coordinator_core> core;
  std::vector<coordinator_action> log;
  std::int64_t now = 1'000'000'000;
  bool auto_ids = true;
  int job_failures = 0;
  int task_job_failures = 0;
  std::string last_failure_cause;
};

// A unique temporary folder, removed when the test ends (the shared helper, with `path` as a
// member for brevity at call sites).
struct temp_dir {
  testing::temp_folder folder;
  std::filesystem::path path = folder.path();
};

}  // namespace snapflow::test
