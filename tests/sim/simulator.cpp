#include "tests/sim/simulator.hpp"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <variant>
#include <vector>

#include "engine/checkpoint/checkpoint_coordinator_core.hpp"
#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/jobmaster/restart_strategy.hpp"
#include "graph/job_status.hpp"
#include "tests/sim/sim_id_counter.hpp"
#include "tests/sim/sim_rng.hpp"
#include "tests/sim/sim_task.hpp"

namespace snapflow::sim {

namespace {

constexpr std::int64_t ms = 1000;
constexpr std::int64_t start_us = 1'000'000'000;
// After the faults stop, the job has this long (simulated) to complete a checkpoint.
constexpr std::int64_t quiet_limit_us = 3'000 * ms;
constexpr vertex_id source_vertex = 0;
constexpr vertex_id middle_vertex = 1;
constexpr vertex_id sink_vertex = 2;

const job_id the_job = "5eed5eed5eed5eed5eed5eed5eed5eed";
// Relative names only: nothing here touches a disk.
const std::filesystem::path job_dir = std::filesystem::path("sim-state") / the_job;
const std::string savepoint_base = "sim-savepoints";
const std::string hook_name = "sim-hook";

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

// For verbose runs (coordinator_action's operator<< is declared but has no definition).
std::string describe(const coordinator_action& action) {
  std::ostringstream os;
  std::visit(
      overloaded{
          [&](const allocate_checkpoint_id& a) { os << "allocate id, request " << a.request_id; },
          [&](const snapshot_master_hooks& a) { os << "snapshot hooks " << a.id; },
          [&](const arm_timeout& a) { os << "arm timeout " << a.id; },
          [&](const cancel_timeout& a) { os << "cancel timeout " << a.id; },
          [&](const send_trigger& a) { os << "trigger " << a.id << " at " << a.attempt; },
          [&](const write_metadata& a) { os << "write metadata " << a.checkpoint.id; },
          [&](const discard_state& a) { os << "discard " << a.handles.size() << " file(s)"; },
          [&](const discard_location& a) { os << "discard folder " << a.location; },
          [&](const notify_complete& a) {
            os << "notify complete " << a.id << " to " << a.attempt;
          },
          [&](const notify_abort& a) { os << "notify abort " << a.id << " to " << a.attempt; },
          [&](const reschedule_periodic& a) { os << "reschedule tick in " << a.delay_us << " us"; },
          [&](const request_finished& a) {
            os << "request " << a.request_id << " (" << to_string(a.kind) << ") finished";
            if (a.id) os << ", checkpoint " << *a.id;
            if (a.failure) os << ", failed: " << *a.failure << ": " << a.message;
          },
      },
      action);
  return os.str();
}

std::string chk_location(checkpoint_id id) {
  return checkpoint_storage::checkpoint_dir(job_dir, id).string();
}

// Everything a seed decides before the run starts.
struct sim_config {
  std::uint32_t sources = 1;
  std::uint32_t middles = 1;
  std::uint32_t sinks = 1;
  std::uint32_t workers = 1;  // slot sharing: worker k hosts subtask k of every vertex
  checkpoint_config checkpoint;
  bool hooks = false;
  std::int64_t id_block = 1;
  bool calm = false;  // no faults at all
  double p_drop = 0;
  double p_duplicate = 0;
  double p_delay = 0;
  double p_write_fail = 0;
  double p_write_lands_but_fails = 0;
  double p_slow_write = 0;
  double p_crash_during_write = 0;
  double p_counter_fail = 0;
  double p_hook_fail = 0;
  double p_decline = 0;
  double p_async_fail = 0;
  int worker_crashes = 0;
  int coordinator_crashes = 0;
  int task_failures = 0;
  int manual_requests = 0;
  int savepoints = 0;
  std::int64_t faulty_us = 0;
  // Unaligned checkpoints, and the aligned phase before a checkpoint goes unaligned (0: none).
  bool unaligned = false;
  std::int64_t aligned_timeout_us = 0;

  std::string describe() const {
    std::ostringstream os;
    os << "topology " << sources << "-" << middles << "-" << sinks << " on " << workers
       << " worker(s); interval " << checkpoint.interval->count() << " ms, timeout "
       << checkpoint.timeout.count() << " ms, min pause " << checkpoint.min_pause.count()
       << " ms, max concurrent " << checkpoint.max_concurrent << ", tolerable "
       << checkpoint.tolerable_failures << ", retained " << checkpoint.retained << ", hooks "
       << hooks << ", id block " << id_block << "; faults for " << faulty_us / ms << " ms"
       << (calm ? " (calm: none)" : "") << ": drop " << p_drop << ", duplicate " << p_duplicate
       << ", delay " << p_delay << ", write fail " << p_write_fail << ", write lands but fails "
       << p_write_lands_but_fails << ", slow write " << p_slow_write << ", crash in write "
       << p_crash_during_write << ", counter fail " << p_counter_fail << ", hook fail "
       << p_hook_fail << ", decline " << p_decline << ", async fail " << p_async_fail
       << "; crashes: " << worker_crashes << " worker, " << coordinator_crashes << " coordinator, "
       << task_failures << " task; " << manual_requests << " manual, " << savepoints
       << " savepoint request(s); " << (unaligned ? "unaligned" : "aligned")
       << (unaligned && aligned_timeout_us > 0
               ? " after " + std::to_string(aligned_timeout_us) + " us of alignment"
               : "");
    return os.str();
  }
};

sim_config make_config(sim_rng& rng) {
  sim_config c;
  c.sources = static_cast<std::uint32_t>(rng.between(1, 2));
  c.middles = static_cast<std::uint32_t>(rng.between(1, 2));
  c.sinks = static_cast<std::uint32_t>(rng.between(1, 2));
  c.workers = std::max({c.sources, c.middles, c.sinks});
  c.checkpoint.interval = std::chrono::milliseconds(rng.between(4, 12));
  c.checkpoint.timeout = std::chrono::milliseconds(rng.between(15, 50));
  c.checkpoint.min_pause = std::chrono::milliseconds(rng.chance(0.5) ? 0 : rng.between(1, 4));
  c.checkpoint.max_concurrent = static_cast<std::int32_t>(rng.between(1, 3));
  c.checkpoint.tolerable_failures = static_cast<std::int32_t>(rng.between(0, 3));
  c.checkpoint.retained = static_cast<std::int32_t>(rng.between(1, 3));
  c.hooks = rng.chance(0.5);
  c.id_block = rng.between(1, 6);
  c.faulty_us = rng.between(150, 400) * ms;
  c.calm = rng.chance(0.08);
  if (c.calm) return c;
  auto rate = [&](double max) { return rng.chance(0.2) ? 0.0 : rng.unit() * max; };
  c.p_drop = rate(0.08);
  c.p_duplicate = rate(0.08);
  c.p_delay = rate(0.08);
  c.p_write_fail = rate(0.15);
  c.p_write_lands_but_fails = rate(0.08);
  c.p_slow_write = rate(0.25);
  c.p_crash_during_write = rate(0.05);
  c.p_counter_fail = rate(0.15);
  c.p_hook_fail = rate(0.08);
  c.p_decline = rate(0.02);
  c.p_async_fail = rate(0.02);
  c.worker_crashes = static_cast<int>(rng.between(0, 4));
  c.coordinator_crashes = static_cast<int>(rng.between(0, 3));
  c.task_failures = static_cast<int>(rng.between(0, 3));
  c.manual_requests = static_cast<int>(rng.between(0, 4));
  c.savepoints = static_cast<int>(rng.between(0, 3));
  return c;
}

std::uint32_t parallelism_of(const sim_config& c, vertex_id v) {
  return v == source_vertex ? c.sources : v == middle_vertex ? c.middles : c.sinks;
}

// The simulator answers snapshot_master_hooks itself (with simulated delay and faults); the
// hook only checks that a restore hands back the state that checkpoint stored.
class sim_hook final : public master_hook {
 public:
  std::string name() const override { return hook_name; }
  void snapshot(checkpoint_id, std::int64_t, std::function<void(result<std::string>)>) override {
    std::abort();
  }
  result<void> restore(checkpoint_id id, std::string_view state) override {
    if (state != std::to_string(id))
      return error{"hook state '" + std::string(state) + "' is not checkpoint " +
                   std::to_string(id) + "'s"};
    return success();
  }
};

struct event {
  std::int64_t time_us = 0;
  std::uint64_t seq = 0;
  const char* what = "";
  std::int64_t a = 0;
  std::optional<execution_attempt_id> attempt;
  std::function<void()> fire;
};

struct event_after {
  bool operator()(const event& x, const event& y) const {
    return x.time_us != y.time_us ? x.time_us > y.time_us : x.seq > y.seq;
  }
};

struct trace_entry {
  std::uint64_t step = 0;
  std::int64_t time_us = 0;
  const char* what = "";
  std::int64_t a = 0;
  std::optional<execution_attempt_id> attempt;
  bool note = false;  // something that happened inside a step (a drop), not a step
};

// What survives every crash: checkpoint metadata, state files, the id counter's reservation.
struct sim_storage {
  std::map<std::string, completed_checkpoint> metadata;  // by location
  std::map<std::string, sim_task_state> files;           // by path
  std::shared_ptr<sim_id_counter::durable_state> counter =
      std::make_shared<sim_id_counter::durable_state>();

  void remove_location(const std::string& location, const std::vector<state_handle>& handles) {
    for (const auto& h : handles) files.erase(h.path);
    if (location.empty()) return;
    metadata.erase(location);
    // The whole folder goes: state files no ack ever reported too.
    const std::string prefix = location + "/";
    for (auto it = files.lower_bound(prefix);
         it != files.end() && it->first.compare(0, prefix.size(), prefix) == 0;)
      it = files.erase(it);
  }
};

// One deployment of the job: its tasks and the data channels between them.
struct sim_run {
  std::uint64_t id = 0;
  std::uint64_t coordinator_epoch = 0;
  std::vector<std::unique_ptr<sim_channel>> channels;
  std::map<subtask_id, std::unique_ptr<sim_task>> tasks;
};

struct sim_worker {
  bool alive = true;
  std::uint64_t incarnation = 1;      // grows when the process restarts
  std::uint64_t registered_with = 0;  // the coordinator epoch it registered with
  std::map<subtask_id, sim_task*> hosted;
};

struct deployment {
  std::uint64_t run = 0;
  execution_attempt_id attempt;
  std::uint32_t worker = 0;
  std::uint64_t worker_incarnation = 0;
  std::uint64_t epoch = 0;
  checkpoint_id restore_id = 0;
  std::string state_path;
};

// The coordinator process: the real coordinator core plus what the simulator does in place of
// checkpoint_coordinator (the driver) and job_master (failover), all lost in a crash.
struct coordinator_process {
  std::uint64_t epoch = 0;
  std::vector<std::vector<std::unique_ptr<execution_vertex>>> vertices;
  std::shared_ptr<sim_id_counter> counter;
  std::shared_ptr<completed_checkpoint_store> store;
  std::shared_ptr<checkpoint_failure_manager> failures;
  std::unique_ptr<checkpoint_coordinator_core> core;
  job_status_machine status;
  std::unique_ptr<restart_strategy> restarts;
  std::map<std::uint32_t, std::uint64_t> registered;  // worker -> its incarnation
  bool placed = false;
  bool waiting_for_slots = false;
  std::uint64_t restart_token = 0;

  // driver
  std::uint64_t periodic_generation = 0;
  std::uint64_t tick_token = 0;
  std::int64_t next_tick_us = 0;
  std::map<checkpoint_id, std::uint64_t> timeouts;
  std::uint64_t next_token = 1;
  bool running_actions = false;
  // Disk work a crash interrupts: each may or may not have reached the disk.
  std::map<std::uint64_t, completed_checkpoint> writes_in_flight;
  std::map<std::uint64_t, discard_location> discards_in_flight;

  // For the invariants.
  checkpoint_id latest_known = 0;  // what a restore must use
  std::map<checkpoint_id, std::set<execution_attempt_id>> required;
  std::map<checkpoint_id, std::set<execution_attempt_id>> acked;

  std::vector<execution_vertex*> all() const {
    std::vector<execution_vertex*> out;
    for (const auto& v : vertices)
      for (const auto& s : v) out.push_back(s.get());
    return out;
  }
  execution_vertex* find_current(const execution_attempt_id& a) const {
    if (a.subtask.vertex >= vertices.size()) return nullptr;
    const auto& v = vertices[a.subtask.vertex];
    if (a.subtask.index >= v.size()) return nullptr;
    execution_vertex* s = v[a.subtask.index].get();
    return s->current_attempt() == a ? s : nullptr;
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------

struct simulator::impl final : sim_task_host {
  explicit impl(sim_options o) : options_(o), rng_(o.seed), cfg_(make_config(rng_)) {
    // From a stream of its own, so the rest of a seed's configuration is as it always was.
    sim_rng mode(o.seed * 0x9E3779B97F4A7C15ull + 7);
    const auto kind = mode.between(0, 2);
    cfg_.unaligned = kind != 0;
    cfg_.aligned_timeout_us = kind == 2 ? mode.between(300, 3000) : 0;
    if (cfg_.unaligned) cfg_.checkpoint.max_concurrent = 1;  // as the configuration requires
    commits_.resize(cfg_.sources);
    frontier_pos_.assign(cfg_.sources, 0);
    workers_.resize(cfg_.workers);
  }

  sim_result run();

  // --- sim_task_host
  std::string write_state(const sim_task_state& state, const std::string& location) override;
  void acknowledge(sim_task& task, checkpoint_id id, const std::string& path) override;
  void decline(sim_task& task, checkpoint_id id, checkpoint_failure_reason reason) override;
  void commit(sim_task& task, const sim_transaction& txn) override;
  void wake(sim_task& task) override;
  std::uint64_t next_transaction_uid() override { return ++transaction_uids_; }
  std::int64_t now_us() const override { return now_; }
  void wake_at(sim_task& task, std::int64_t at_us) override;
  void took_unaligned(bool switched) override {
    ++counters_.unaligned_snapshots;
    if (switched) ++counters_.switched_to_unaligned;
  }

  // --- events and the network
  void schedule(std::int64_t at_us, const char* what, std::int64_t a,
                std::optional<execution_attempt_id> attempt, std::function<void()> fire);
  void note(const char* what, std::int64_t a, std::optional<execution_attempt_id> attempt = {}) {
    trace(what, a, attempt, true);
  }
  void trace(const char* what, std::int64_t a, std::optional<execution_attempt_id> attempt,
             bool note);
  bool faults_active() const { return !cfg_.calm && now_ < faulty_end_us_; }
  std::int64_t latency() { return rng_.between(50, 600); }
  void send(bool faulty, const char* what, std::int64_t a,
            std::optional<execution_attempt_id> attempt, std::function<void()> deliver);
  sim_task* hosted(const execution_attempt_id& attempt);
  void to_task(bool faulty, const char* what, const execution_attempt_id& attempt, checkpoint_id id,
               std::function<void(sim_task&)> handle);
  void to_coordinator(bool faulty, const char* what, std::uint32_t worker, std::int64_t a,
                      std::optional<execution_attempt_id> attempt,
                      std::function<void(coordinator_process&)> handle);
  coordinator_process* coordinator(std::uint64_t epoch) {
    return coordinator_ && coordinator_->epoch == epoch ? coordinator_.get() : nullptr;
  }

  // --- the coordinator process
  void start_coordinator();
  void crash_coordinator();
  void run_actions(coordinator_process& c);
  void perform(coordinator_process& c, coordinator_action& action);
  void allocate(coordinator_process& c, std::uint64_t request_id);
  void start_scheduler(coordinator_process& c);
  void stop_scheduler(coordinator_process& c);
  void arm_tick(coordinator_process& c);
  void on_request_finished(coordinator_process& c, const request_finished& f);
  void schedule_discard(coordinator_process& c, discard_location d);

  // --- the job master
  void jm_start(coordinator_process& c);
  void jm_try_schedule(coordinator_process& c);
  void jm_deploy_all(coordinator_process& c);
  void jm_on_task_state(coordinator_process& c, const execution_attempt_id& attempt,
                        execution_state state);
  void jm_fail(coordinator_process& c, const std::string& cause);
  void jm_restart(coordinator_process& c);
  void jm_on_worker_lost(coordinator_process& c, std::uint32_t worker);
  void jm_on_slots_available(coordinator_process& c) {
    if (c.waiting_for_slots) jm_try_schedule(c);
  }

  // --- workers and tasks
  void register_worker(std::uint32_t worker);
  void worker_notices_coordinator(std::uint32_t worker, std::uint64_t epoch);
  void crash_worker(std::uint32_t worker);
  void fail_task();
  void deliver_deploy(const deployment& d);
  void source_tick(sim_task& task);

  // --- invariants
  void violate(const std::string& message);
  void check_invariants();
  void check_end();
  void check_written(coordinator_process& c, const completed_checkpoint& cp);
  void check_restore(coordinator_process& c, const std::optional<completed_checkpoint>& restored);
  void check_discard(coordinator_process& c, const discard_location& d, const char* when);
  void declare_complete(coordinator_process& c, checkpoint_id id);
  std::optional<std::vector<std::uint64_t>> positions_of(const completed_checkpoint& cp);
  void advance_frontier(checkpoint_id id, const std::vector<std::uint64_t>& positions,
                        const char* why);
  std::string format_trace() const;

  sim_options options_;
  sim_rng rng_;
  sim_config cfg_;
  sim_counters counters_;
  std::int64_t now_ = start_us;
  std::int64_t faulty_end_us_ = 0;
  std::uint64_t step_ = 0;
  std::uint64_t next_seq_ = 0;
  std::vector<event> queue_;  // a heap by (time, seq)
  std::vector<trace_entry> trace_;
  std::size_t trace_next_ = 0;
  bool finished_ = false;
  std::string violation_;

  sim_storage storage_;
  std::unique_ptr<coordinator_process> coordinator_;
  std::uint64_t coordinator_epochs_ = 0;
  std::vector<sim_worker> workers_;
  std::map<std::uint64_t, std::unique_ptr<sim_run>> runs_;
  std::uint64_t instances_ = 0;
  std::map<std::uint64_t, std::uint64_t> deployed_by_;  // task instance -> coordinator epoch
  std::uint64_t transaction_uids_ = 0;

  // The oracle.
  std::vector<std::vector<std::uint8_t>> commits_;  // [source][seq] -> times committed
  std::set<std::uint64_t> committed_transactions_;
  checkpoint_id frontier_id_ = 0;            // the newest checkpoint declared complete or restored
  std::vector<std::uint64_t> frontier_pos_;  // its source positions
  checkpoint_id latest_declared_ = 0;        // over every coordinator incarnation
  checkpoint_id max_allocated_ = 0;
  bool completed_in_quiet_ = false;
  bool disk_faults_paused_ = false;
};

// ---------------------------------------------------------------------------------------------
// Events, trace, network

void simulator::impl::schedule(std::int64_t at_us, const char* what, std::int64_t a,
                               std::optional<execution_attempt_id> attempt,
                               std::function<void()> fire) {
  queue_.push_back(event{std::max(at_us, now_), next_seq_++, what, a, attempt, std::move(fire)});
  std::push_heap(queue_.begin(), queue_.end(), event_after{});
}

void simulator::impl::trace(const char* what, std::int64_t a,
                            std::optional<execution_attempt_id> attempt, bool note) {
  trace_entry e{step_, now_, what, a, attempt, note};
  if (trace_.size() < options_.trace_length) {
    trace_.push_back(e);
  } else if (!trace_.empty()) {
    trace_[trace_next_] = e;
    trace_next_ = (trace_next_ + 1) % trace_.size();
  }
  if (options_.verbose) {
    std::ostringstream os;
    char time[32];
    std::snprintf(time, sizeof time, "%10.3f", static_cast<double>(now_ - start_us) / 1000.0);
    os << (note ? "       " : "") << "#" << step_ << " " << time << " ms  " << what << " " << a;
    if (attempt) os << " " << *attempt;
    std::cerr << os.str() << "\n";
  }
}

void simulator::impl::send(bool faulty, const char* what, std::int64_t a,
                           std::optional<execution_attempt_id> attempt,
                           std::function<void()> deliver) {
  ++counters_.control_messages;
  int copies = 1;
  if (faulty && faults_active()) {
    if (rng_.chance(cfg_.p_drop)) {
      ++counters_.dropped;
      note("dropped", a, attempt);
      return;
    }
    if (rng_.chance(cfg_.p_duplicate)) {
      ++counters_.duplicated;
      copies = 2;
    }
  }
  for (int i = 0; i < copies; ++i) {
    // The jitter alone reorders messages; a delay fault holds one back for much longer.
    std::int64_t delay = latency();
    if (faulty && faults_active() && rng_.chance(cfg_.p_delay)) {
      ++counters_.delayed;
      delay += rng_.between(2 * ms, 30 * ms);
    }
    schedule(now_ + delay, what, a, attempt, deliver);
  }
}

sim_task* simulator::impl::hosted(const execution_attempt_id& attempt) {
  if (attempt.subtask.index >= workers_.size()) return nullptr;
  sim_worker& w = workers_[attempt.subtask.index];
  if (!w.alive) return nullptr;
  auto it = w.hosted.find(attempt.subtask);
  if (it == w.hosted.end() || !it->second->alive() || it->second->attempt() != attempt)
    return nullptr;
  return it->second;
}

void simulator::impl::to_task(bool faulty, const char* what, const execution_attempt_id& attempt,
                              checkpoint_id id, std::function<void(sim_task&)> handle) {
  // Routed by attempt id only, as a worker does: a message from an earlier coordinator may
  // reach a task of a later one that reuses the attempt number.
  const std::uint64_t epoch = coordinator_ ? coordinator_->epoch : 0;
  send(faulty, what, id, attempt, [this, attempt, epoch, handle = std::move(handle)] {
    sim_task* t = hosted(attempt);
    if (t == nullptr) {
      ++counters_.stale_deliveries;
      return;
    }
    if (deployed_by_.at(t->instance()) != epoch) ++counters_.cross_incarnation_deliveries;
    handle(*t);
  });
}

void simulator::impl::to_coordinator(bool faulty, const char* what, std::uint32_t worker,
                                     std::int64_t a, std::optional<execution_attempt_id> attempt,
                                     std::function<void(coordinator_process&)> handle) {
  const std::uint64_t incarnation = workers_[worker].incarnation;
  const std::uint64_t epoch = workers_[worker].registered_with;
  send(faulty, what, a, attempt, [this, worker, incarnation, epoch, handle = std::move(handle)] {
    // A coordinator answers anything from a worker that is not registered with it with
    // not_registered and drops it: a restarted coordinator hears nothing from the tasks of
    // its predecessor.
    coordinator_process* c = coordinator(epoch);
    if (c == nullptr) {
      ++counters_.stale_deliveries;
      return;
    }
    auto it = c->registered.find(worker);
    if (it == c->registered.end() || it->second != incarnation) {
      ++counters_.stale_deliveries;
      return;
    }
    handle(*c);
  });
}

// ---------------------------------------------------------------------------------------------
// Tasks (sim_task_host)

std::string simulator::impl::write_state(const sim_task_state& state, const std::string& location) {
  assert(!location.empty());
  std::ostringstream path;
  path << location << "/v" << state.attempt.subtask.vertex << "-" << state.attempt.subtask.index
       << "-a" << state.attempt.attempt << "-i" << state.instance;
  storage_.files[path.str()] = state;
  if (options_.sabotage == sim_sabotage::sink_commits_at_pre_commit && !state.pending.empty()) {
    sim_task* t = nullptr;
    for (auto& [_, run] : runs_)
      for (auto& [_, task] : run->tasks)
        if (task->instance() == state.instance) t = task.get();
    assert(t);
    commit(*t, state.pending.back());
  }
  return path.str();
}

void simulator::impl::acknowledge(sim_task& task, checkpoint_id id, const std::string& path) {
  // The asynchronous part of the snapshot ends a little later; a task that dies meanwhile
  // never acks.
  sim_task* t = &task;
  schedule(now_ + rng_.between(50, 1500), "snapshot done", id, task.attempt(), [this, t, id, path] {
    if (!t->alive()) return;
    const std::uint32_t worker = t->attempt().subtask.index;
    if (faults_active() && rng_.chance(cfg_.p_async_fail)) {
      decline(*t, id, checkpoint_failure_reason::checkpoint_async_exception);
      return;
    }
    if (faults_active() && rng_.chance(cfg_.p_decline)) {
      decline(*t, id, checkpoint_failure_reason::checkpoint_declined);
      return;
    }
    checkpoint_ack ack;
    ack.job = the_job;
    ack.attempt = t->attempt();
    ack.id = id;
    ack.state.handles.push_back(state_handle{path, 1, 0});
    ack.state.state_size = 1;
    to_coordinator(true, "ack arrives", worker, id, ack.attempt,
                   [this, ack](coordinator_process& c) {
                     const ack_outcome outcome = c.core->on_ack(ack, now_);
                     if (outcome == ack_outcome::accepted || outcome == ack_outcome::completed) {
                       ++counters_.acks;
                       c.acked[ack.id].insert(ack.attempt);
                     }
                     run_actions(c);
                   });
  });
}

void simulator::impl::decline(sim_task& task, checkpoint_id id, checkpoint_failure_reason reason) {
  checkpoint_decline d{the_job, task.attempt(), id, reason, "simulated"};
  to_coordinator(true, "decline arrives", task.attempt().subtask.index, id, task.attempt(),
                 [this, d](coordinator_process& c) {
                   ++counters_.declines;
                   c.core->on_decline(d, now_);
                   run_actions(c);
                 });
}

void simulator::impl::commit(sim_task& task, const sim_transaction& txn) {
  (void)task;
  if (!committed_transactions_.insert(txn.uid).second) return;  // the same commit again
  for (const sim_record& r : txn.records) {
    assert(r.source < commits_.size());
    if (r.seq >= frontier_pos_[r.source]) {
      std::ostringstream os;
      os << "sink committed record " << r.source << ":" << r.seq << " (transaction " << txn.uid
         << " of checkpoint " << txn.id << ") beyond what the latest completed checkpoint "
         << frontier_id_ << " covers (" << frontier_pos_[r.source] << ")";
      violate(os.str());
      return;
    }
    auto& counts = commits_[r.source];
    if (counts.size() <= r.seq) counts.resize(r.seq + 1, 0);
    if (++counts[r.seq] > 1) {
      std::ostringstream os;
      os << "record " << r.source << ":" << r.seq << " committed twice (transaction " << txn.uid
         << " of checkpoint " << txn.id << ")";
      violate(os.str());
      return;
    }
    ++counters_.records_committed;
  }
}

void simulator::impl::wake(sim_task& task) {
  if (!task.alive() || task.step_scheduled()) return;
  task.set_step_scheduled(true);
  sim_task* t = &task;
  schedule(now_ + rng_.between(100, 500), "task step", 0, task.attempt(), [this, t] {
    t->set_step_scheduled(false);
    if (!t->alive()) return;
    if (t->process(4)) wake(*t);
  });
}

void simulator::impl::wake_at(sim_task& task, std::int64_t at_us) {
  sim_task* t = &task;
  schedule(at_us, "alignment timeout", 0, task.attempt(), [this, t] {
    if (!t->alive()) return;
    if (t->process(4)) wake(*t);
  });
}

void simulator::impl::source_tick(sim_task& task) {
  sim_task* t = &task;
  schedule(now_ + rng_.between(600, 1400), "source emits", 0, task.attempt(), [this, t] {
    if (!t->alive()) return;
    counters_.records_emitted += t->emit(static_cast<std::uint32_t>(rng_.between(1, 3)));
    source_tick(*t);
  });
}

// ---------------------------------------------------------------------------------------------
// The coordinator process

void simulator::impl::start_coordinator() {
  auto c = std::make_unique<coordinator_process>();
  c->epoch = ++coordinator_epochs_;
  const std::uint64_t epoch = c->epoch;
  c->vertices.resize(3);
  for (vertex_id v = 0; v < 3; ++v) {
    const std::uint32_t p = parallelism_of(cfg_, v);
    for (std::uint32_t i = 0; i < p; ++i)
      c->vertices[v].push_back(std::make_unique<execution_vertex>(subtask_id{v, i}, p,
                                                                  v == source_vertex   ? "source"
                                                                  : v == middle_vertex ? "middle"
                                                                                       : "sink"));
  }
  // What job_master::create does: the store from the metadata on disk, the counter from its
  // persisted reservation, advanced past every checkpoint found. Disk faults spare the start
  // (a start that cannot write the counter would just be retried).
  c->counter = std::make_shared<sim_id_counter>(storage_.counter, cfg_.id_block, [this] {
    return !disk_faults_paused_ && faults_active() && rng_.chance(cfg_.p_counter_fail);
  });
  std::vector<completed_checkpoint> found;
  for (const auto& [location, cp] : storage_.metadata)
    if (!cp.is_savepoint() && location == chk_location(cp.id)) found.push_back(cp);
  if (!found.empty()) {
    checkpoint_id newest = 0;
    for (const auto& cp : found) newest = std::max(newest, cp.id);
    disk_faults_paused_ = true;
    auto advanced = c->counter->advance_to(newest + 1);
    disk_faults_paused_ = false;
    assert(advanced);
    (void)advanced;
  }
  c->store = std::make_shared<completed_checkpoint_store>(cfg_.checkpoint.retained);
  c->store->recover(std::move(found));
  c->latest_known = c->store->latest() ? c->store->latest()->id : 0;
  if (c->latest_known < latest_declared_) {
    violate("coordinator restart recovered checkpoint " + std::to_string(c->latest_known) +
            " but checkpoint " + std::to_string(latest_declared_) + " had completed");
  }

  checkpoint_failure_manager::callbacks callbacks;
  // Like execution_graph: the job is failed from outside the coordinator's call stack.
  auto fail_later = [this, epoch](const std::string& cause) {
    schedule(now_, "checkpoint failures fail the job", 0, std::nullopt, [this, epoch, cause] {
      if (coordinator_process* c = coordinator(epoch))
        jm_fail(*c, "too many failed checkpoints: " + cause);
    });
  };
  callbacks.fail_job = fail_later;
  callbacks.fail_job_due_to_task_failure =
      [fail_later](const std::string& cause, const execution_attempt_id&) { fail_later(cause); };
  c->failures =
      std::make_shared<checkpoint_failure_manager>(cfg_.checkpoint.tolerable_failures, callbacks);

  checkpoint_coordinator_setup setup;
  setup.job = the_job;
  setup.config = cfg_.checkpoint;
  for (auto& s : c->vertices[source_vertex]) setup.tasks_to_trigger.push_back(s.get());
  for (execution_vertex* v : c->all()) {
    setup.tasks_to_acknowledge.push_back(v);
    setup.tasks_to_confirm.push_back(v);
  }
  setup.job_dir = job_dir;
  setup.hooks = std::make_shared<master_hook_registry>();
  if (cfg_.hooks) {
    auto added = setup.hooks->add(std::make_shared<sim_hook>());
    assert(added);
    (void)added;
  }
  setup.id_counter = c->counter;
  setup.store = c->store;
  setup.stats = std::make_shared<checkpoint_stats_tracker>(10, cfg_.checkpoint);
  setup.failure_manager = c->failures;
  c->core = std::make_unique<checkpoint_coordinator_core>(std::move(setup));

  // checkpoint_coordinator_deactivator: RUNNING starts the periodic trigger, anything else
  // stops it.
  c->status.add_listener([this, epoch](job_status, job_status to, std::int64_t) {
    coordinator_process* c = coordinator(epoch);
    if (c == nullptr) return;
    if (to == job_status::running)
      start_scheduler(*c);
    else
      stop_scheduler(*c);
  });
  restart_strategy_config restart;
  restart.type = restart_strategy_config::kind::exponential_delay;
  restart.initial_backoff_ms = 1;
  restart.max_backoff_ms = 16;
  restart.reset_backoff_after_ms = 100;
  c->restarts = std::make_unique<restart_strategy>(restart);
  coordinator_ = std::move(c);

  // Each worker hears from the new coordinator (not_registered), drops its tasks and
  // registers again.
  for (std::uint32_t w = 0; w < workers_.size(); ++w)
    schedule(now_ + rng_.between(300, 3000), "worker notices the coordinator", w, std::nullopt,
             [this, w, epoch] { worker_notices_coordinator(w, epoch); });
  jm_start(*coordinator_);
}

void simulator::impl::crash_coordinator() {
  if (!coordinator_) return;
  ++counters_.coordinator_crashes;
  coordinator_process& c = *coordinator_;
  // Disk work in flight either reached the disk or did not; metadata is written atomically
  // (temp file, rename), so never half.
  for (auto& [_, cp] : c.writes_in_flight) {
    if (rng_.chance(0.5)) {
      ++counters_.writes_landed_in_crash;
      note("in-flight metadata write landed", cp.id);
      storage_.metadata[cp.location] = cp;
    }
  }
  for (auto& [_, d] : c.discards_in_flight)
    if (rng_.chance(0.5)) storage_.remove_location(d.location, d.handles);
  coordinator_.reset();
  schedule(now_ + rng_.between(2 * ms, 20 * ms), "coordinator restarts", 0, std::nullopt,
           [this] { start_coordinator(); });
}

void simulator::impl::run_actions(coordinator_process& c) {
  // As checkpoint_coordinator::run_actions: an action may feed an event back into the core
  // (a cheap id), which queues more; drain without recursion.
  if (c.running_actions) return;
  c.running_actions = true;
  while (c.core->has_actions() && !finished_) {
    auto actions = c.core->take_actions();
    for (auto& a : actions) {
      perform(c, a);
      if (finished_) break;
    }
  }
  c.running_actions = false;
}

void simulator::impl::allocate(coordinator_process& c, std::uint64_t request_id) {
  result<checkpoint_id> id = c.counter->get_and_increment();
  if (id) {
    if (*id <= max_allocated_) {
      violate("checkpoint id " + std::to_string(*id) + " handed out after id " +
              std::to_string(max_allocated_));
      return;
    }
    max_allocated_ = *id;
  } else {
    ++counters_.counter_persist_failures;
  }
  c.core->on_checkpoint_id(request_id, id, now_);
  if (id && c.core->find_pending(*id) != nullptr) {
    ++counters_.checkpoints_started;
    auto& required = c.required[*id];
    for (const execution_vertex* v : c.all()) required.insert(v->current_attempt());
  }
}

void simulator::impl::perform(coordinator_process& c, coordinator_action& action) {
  const std::uint64_t epoch = c.epoch;
  if (options_.verbose)
    std::cerr << "         coordinator " << epoch << ": " << describe(action) << "\n";
  std::visit(
      overloaded{
          [&](allocate_checkpoint_id& a) {
            if (c.counter->next_is_cheap()) {
              allocate(c, a.request_id);
              return;
            }
            // Reserving a block touches the disk: off the coordinator thread, later.
            schedule(now_ + rng_.between(100, 2000), "id block reserved", 0, std::nullopt,
                     [this, epoch, rid = a.request_id] {
                       if (coordinator_process* c = coordinator(epoch)) {
                         allocate(*c, rid);
                         run_actions(*c);
                       }
                     });
          },
          [&](snapshot_master_hooks& a) {
            const std::int64_t delay = faults_active() && rng_.chance(0.1)
                                           ? rng_.between(5 * ms, 60 * ms)
                                           : rng_.between(50, 1000);
            schedule(
                now_ + delay, "master hooks done", a.id, std::nullopt, [this, epoch, id = a.id] {
                  coordinator_process* c = coordinator(epoch);
                  if (c == nullptr) return;
                  if (faults_active() && rng_.chance(cfg_.p_hook_fail)) {
                    ++counters_.hook_failures;
                    c->core->on_master_hooks_done(id, error{"simulated hook failure"}, now_);
                  } else {
                    c->core->on_master_hooks_done(
                        id, std::map<std::string, std::string>{{hook_name, std::to_string(id)}},
                        now_);
                  }
                  run_actions(*c);
                });
          },
          [&](arm_timeout& a) {
            const std::uint64_t token = c.next_token++;
            c.timeouts[a.id] = token;
            schedule(a.deadline_us, "checkpoint timeout", a.id, std::nullopt,
                     [this, epoch, id = a.id, token] {
                       coordinator_process* c = coordinator(epoch);
                       if (c == nullptr) return;
                       auto it = c->timeouts.find(id);
                       if (it == c->timeouts.end() || it->second != token) return;
                       c->timeouts.erase(it);
                       c->core->on_timeout(id, now_);
                       run_actions(*c);
                     });
          },
          [&](cancel_timeout& a) { c.timeouts.erase(a.id); },
          [&](send_trigger& a) {
            const execution_vertex* v = c.find_current(a.attempt);
            if (v == nullptr || !v->is_running()) {
              std::ostringstream os;
              os << "checkpoint " << a.id << " triggered at " << a.attempt << ", which is "
                 << (v == nullptr ? std::string("not a current attempt")
                                  : std::string(to_string(v->state())))
                 << " (job " << c.status.current() << ")";
              violate(os.str());
              return;
            }
            to_task(true, "trigger arrives", a.attempt, a.id,
                    [id = a.id, location = a.options.target_location](sim_task& t) {
                      t.trigger(id, location);
                    });
          },
          [&](write_metadata& a) {
            check_written(c, a.checkpoint);
            if (finished_) return;
            ++counters_.metadata_writes;
            std::int64_t delay = rng_.between(100, 1500);
            if (faults_active() && rng_.chance(cfg_.p_slow_write)) {
              ++counters_.slow_writes;
              delay = rng_.between(5 * ms, 40 * ms);
            }
            if (faults_active() && rng_.chance(cfg_.p_crash_during_write))
              schedule(now_ + rng_.between(0, delay), "coordinator crashes mid-write",
                       a.checkpoint.id, std::nullopt, [this, epoch] {
                         if (coordinator(epoch) != nullptr) crash_coordinator();
                       });
            const std::uint64_t token = c.next_token++;
            c.writes_in_flight.emplace(token, a.checkpoint);
            schedule(now_ + delay, "metadata write ends", a.checkpoint.id, std::nullopt,
                     [this, epoch, token] {
                       coordinator_process* c = coordinator(epoch);
                       if (c == nullptr) return;
                       auto node = c->writes_in_flight.extract(token);
                       assert(node);
                       completed_checkpoint cp = std::move(node.mapped());
                       if (faults_active() && rng_.chance(cfg_.p_write_fail)) {
                         ++counters_.metadata_write_failures;
                         c->core->on_metadata_written(cp.id, error{"simulated write failure"},
                                                      now_);
                       } else if (faults_active() && rng_.chance(cfg_.p_write_lands_but_fails)) {
                         // The rename made it, the folder fsync then failed: durable, yet
                         // reported as a failure.
                         ++counters_.metadata_write_failures;
                         storage_.metadata[cp.location] = cp;
                         c->core->on_metadata_written(
                             cp.id, error{"simulated fsync failure after the rename"}, now_);
                       } else if (options_.sabotage == sim_sabotage::metadata_durable_late) {
                         c->core->on_metadata_written(cp.id, success(), now_);
                         schedule(now_ + ms, "metadata finally durable", cp.id, std::nullopt,
                                  [this, cp] { storage_.metadata[cp.location] = cp; });
                       } else {
                         storage_.metadata[cp.location] = cp;
                         c->core->on_metadata_written(cp.id, success(), now_);
                       }
                       run_actions(*c);
                     });
          },
          [&](discard_state& a) {
            schedule_discard(c, discard_location{{}, std::move(a.handles)});
          },
          [&](discard_location& a) { schedule_discard(c, std::move(a)); },
          [&](notify_complete& a) {
            if (!storage_.metadata.contains(chk_location(a.id))) {
              violate("notify-complete for checkpoint " + std::to_string(a.id) +
                      " sent before its metadata is durable");
              return;
            }
            to_task(true, "notify-complete arrives", a.attempt, a.id,
                    [id = a.id](sim_task& t) { t.notify_complete(id); });
          },
          [&](notify_abort& a) {
            to_task(true, "notify-abort arrives", a.attempt, a.id,
                    [id = a.id](sim_task& t) { t.notify_aborted(id); });
          },
          [&](reschedule_periodic& a) {
            if (!c.core->periodic_scheduling()) return;
            c.next_tick_us = now_ + a.delay_us;
            arm_tick(c);
          },
          [&](request_finished& a) { on_request_finished(c, a); },
      },
      action);
}

void simulator::impl::schedule_discard(coordinator_process& c, discard_location d) {
  check_discard(c, d, "asked for");
  if (finished_) return;
  const std::uint64_t epoch = c.epoch;
  const std::uint64_t token = c.next_token++;
  c.discards_in_flight.emplace(token, std::move(d));
  schedule(now_ + rng_.between(100, 3000), "discard done", 0, std::nullopt, [this, epoch, token] {
    coordinator_process* c = coordinator(epoch);
    if (c == nullptr) return;
    auto node = c->discards_in_flight.extract(token);
    assert(node);
    check_discard(*c, node.mapped(), "carried out");
    storage_.remove_location(node.mapped().location, node.mapped().handles);
  });
}

void simulator::impl::start_scheduler(coordinator_process& c) {
  if (c.core->is_shutdown() || !cfg_.checkpoint.interval || c.core->periodic_scheduling()) return;
  c.core->start_periodic_scheduling();
  ++c.periodic_generation;
  // The driver's first tick comes after a random delay in [min pause, interval].
  const std::int64_t lo = cfg_.checkpoint.min_pause.count() * ms;
  const std::int64_t hi = cfg_.checkpoint.interval->count() * ms;
  c.next_tick_us = now_ + (lo >= hi ? hi : rng_.between(lo, hi));
  arm_tick(c);
}

void simulator::impl::stop_scheduler(coordinator_process& c) {
  if (!c.core->periodic_scheduling()) return;
  ++c.periodic_generation;
  c.core->stop_periodic_scheduling(now_);
  run_actions(c);
}

void simulator::impl::arm_tick(coordinator_process& c) {
  const std::uint64_t token = ++c.tick_token;
  const std::uint64_t generation = c.periodic_generation;
  const std::uint64_t epoch = c.epoch;
  schedule(c.next_tick_us, "periodic tick", 0, std::nullopt, [this, epoch, generation, token] {
    coordinator_process* c = coordinator(epoch);
    if (c == nullptr || c->periodic_generation != generation || c->tick_token != token ||
        !c->core->periodic_scheduling())
      return;
    c->next_tick_us = now_ + cfg_.checkpoint.interval->count() * ms;
    c->core->on_tick(now_);
    run_actions(*c);
    if (coordinator(epoch) == c && c->periodic_generation == generation) arm_tick(*c);
  });
}

void simulator::impl::on_request_finished(coordinator_process& c, const request_finished& f) {
  if (f.failure) {
    if (f.id) {
      ++counters_.checkpoints_failed;
      c.required.erase(*f.id);
      c.acked.erase(*f.id);
    }
    return;
  }
  assert(f.id);
  if (f.kind == checkpoint_trigger_kind::savepoint) {
    ++counters_.savepoints_completed;
    if (!storage_.metadata.contains(f.location))
      violate("savepoint " + std::to_string(*f.id) + " completed without durable metadata");
    c.required.erase(*f.id);
    c.acked.erase(*f.id);
    return;
  }
  declare_complete(c, *f.id);
}

// ---------------------------------------------------------------------------------------------
// The job master (engine/jobmaster/job_master.cpp, without Asio)

void simulator::impl::jm_start(coordinator_process& c) {
  if (c.status.current() != job_status::created) return;
  jm_try_schedule(c);
}

void simulator::impl::jm_try_schedule(coordinator_process& c) {
  const job_status s = c.status.current();
  if (s != job_status::created && s != job_status::restarting) return;
  if (c.placed) return;
  if (c.registered.size() < workers_.size()) {
    c.waiting_for_slots = true;
    return;
  }
  c.waiting_for_slots = false;
  jm_deploy_all(c);
}

void simulator::impl::jm_deploy_all(coordinator_process& c) {
  c.placed = true;
  auto latest = c.core->restore_latest_checkpoint(now_);
  if (!latest) {
    violate("restore failed: " + latest.err().message);
    return;
  }
  check_restore(c, *latest);
  if (finished_) return;
  const std::optional<completed_checkpoint>& restore = *latest;

  auto run = std::make_unique<sim_run>();
  run->id = runs_.size() + 1;
  run->coordinator_epoch = c.epoch;
  const std::size_t channels = cfg_.sources * cfg_.middles + cfg_.middles * cfg_.sinks;
  for (std::size_t i = 0; i < channels; ++i)
    run->channels.push_back(std::make_unique<sim_channel>());
  for (execution_vertex* v : c.all()) {
    v->set_state(execution_state::deploying);
    deployment d;
    d.run = run->id;
    d.attempt = v->current_attempt();
    d.worker = v->id().index;
    d.worker_incarnation = c.registered.at(d.worker);
    d.epoch = c.epoch;
    if (restore) {
      d.restore_id = restore->id;
      d.state_path = restore->subtask_states.at(v->id()).handles.at(0).path;
    }
    send(false, "deploy arrives", d.restore_id, d.attempt, [this, d] { deliver_deploy(d); });
  }
  runs_.emplace(run->id, std::move(run));
}

void simulator::impl::jm_on_task_state(coordinator_process& c, const execution_attempt_id& attempt,
                                       execution_state state) {
  execution_vertex* v = c.find_current(attempt);
  if (v == nullptr || is_terminal(c.status.current()) || is_terminal(v->state())) return;
  v->set_state(state);
  const job_status status = c.status.current();
  if (state == execution_state::running) {
    if (status != job_status::created && status != job_status::restarting) return;
    auto all = c.all();
    if (std::all_of(all.begin(), all.end(),
                    [](const execution_vertex* x) { return x->is_running(); }))
      c.status.transition(job_status::running, now_ / ms);
  } else if (state == execution_state::failed) {
    jm_fail(c, "a task failed");
  }
}

void simulator::impl::jm_fail(coordinator_process& c, const std::string& cause) {
  const job_status status = c.status.current();
  if (is_terminal(status) || status == job_status::failing || status == job_status::cancelling)
    return;
  ++counters_.failovers;
  note("job fails over", 0);
  const std::uint64_t epoch = c.epoch;
  ++c.restart_token;
  // Leaving RUNNING stops the periodic trigger and aborts pending checkpoints (listener).
  c.status.transition(job_status::failing, now_ / ms);
  if (coordinator(epoch) != &c) return;
  c.core->abort_pending_checkpoints(checkpoint_failure_reason::job_failover, cause, now_);
  run_actions(c);
  if (finished_) return;
  for (execution_vertex* v : c.all()) {
    if (is_terminal(v->state()) || v->state() == execution_state::created) continue;
    const execution_attempt_id attempt = v->current_attempt();
    send(false, "cancel arrives", 0, attempt, [this, attempt] {
      if (sim_task* t = hosted(attempt)) {
        t->kill();
        workers_[attempt.subtask.index].hosted.erase(attempt.subtask);
      }
    });
    v->set_state(execution_state::canceled);
  }
  c.placed = false;
  const auto delay_us = c.restarts->on_failure(now_);
  assert(delay_us);  // unlimited restarts
  c.status.transition(job_status::restarting, now_ / ms);
  const std::uint64_t token = ++c.restart_token;
  schedule(now_ + *delay_us, "job restarts", 0, std::nullopt, [this, epoch, token] {
    coordinator_process* c = coordinator(epoch);
    if (c != nullptr && c->restart_token == token) jm_restart(*c);
  });
}

void simulator::impl::jm_restart(coordinator_process& c) {
  if (c.status.current() != job_status::restarting) return;
  c.failures->reset();
  for (execution_vertex* v : c.all()) v->reset_for_new_attempt();
  jm_try_schedule(c);
}

void simulator::impl::jm_on_worker_lost(coordinator_process& c, std::uint32_t worker) {
  if (!c.placed) return;  // nothing of the job runs anywhere now
  jm_fail(c, "worker " + std::to_string(worker) + " was lost");
}

// ---------------------------------------------------------------------------------------------
// Workers

void simulator::impl::register_worker(std::uint32_t worker) {
  sim_worker& w = workers_[worker];
  if (!w.alive || !coordinator_) return;
  const std::uint64_t epoch = coordinator_->epoch;
  const std::uint64_t incarnation = w.incarnation;
  send(false, "worker registers", worker, std::nullopt, [this, worker, epoch, incarnation] {
    coordinator_process* c = coordinator(epoch);
    sim_worker& w = workers_[worker];
    if (c == nullptr || !w.alive || w.incarnation != incarnation) return;
    if (auto it = c->registered.find(worker); it != c->registered.end()) {
      if (it->second == incarnation) {
        w.registered_with = epoch;
        return;
      }
      // The same worker id again: its earlier incarnation, and whatever ran there, is gone.
      c->registered.erase(it);
      jm_on_worker_lost(*c, worker);
      if (coordinator(epoch) != c) return;
    }
    c->registered[worker] = incarnation;
    w.registered_with = epoch;
    jm_on_slots_available(*c);
  });
}

void simulator::impl::worker_notices_coordinator(std::uint32_t worker, std::uint64_t epoch) {
  sim_worker& w = workers_[worker];
  // A restarted worker registers by itself; one that already did has nothing to notice.
  if (coordinator(epoch) == nullptr || !w.alive || w.registered_with == epoch) return;
  for (auto& [_, t] : w.hosted) t->kill();
  w.hosted.clear();
  w.registered_with = 0;
  register_worker(worker);
}

void simulator::impl::crash_worker(std::uint32_t worker) {
  sim_worker& w = workers_[worker];
  if (!w.alive) return;
  ++counters_.worker_crashes;
  w.alive = false;
  for (auto& [_, t] : w.hosted) t->kill();
  w.hosted.clear();
  w.registered_with = 0;
  const std::uint64_t incarnation = w.incarnation;
  // The coordinator notices missing heartbeats, unless the restarted worker registers first.
  schedule(now_ + rng_.between(3 * ms, 8 * ms), "heartbeat timeout", worker, std::nullopt,
           [this, worker, incarnation] {
             coordinator_process* c = coordinator_.get();
             if (c == nullptr) return;
             auto it = c->registered.find(worker);
             if (it == c->registered.end() || it->second != incarnation) return;
             c->registered.erase(it);
             jm_on_worker_lost(*c, worker);
           });
  schedule(now_ + rng_.between(2 * ms, 25 * ms), "worker restarts", worker, std::nullopt,
           [this, worker] {
             sim_worker& w = workers_[worker];
             w.alive = true;
             ++w.incarnation;
             register_worker(worker);
           });
}

void simulator::impl::fail_task() {
  std::vector<sim_task*> candidates;
  for (auto& w : workers_)
    if (w.alive)
      for (auto& [_, t] : w.hosted)
        if (t->alive()) candidates.push_back(t);
  if (candidates.empty()) return;
  sim_task* t = candidates[rng_.below(candidates.size())];
  ++counters_.task_failures;
  t->kill();
  const execution_attempt_id attempt = t->attempt();
  workers_[attempt.subtask.index].hosted.erase(attempt.subtask);
  to_coordinator(false, "task failure reported", attempt.subtask.index, 0, attempt,
                 [this, attempt](coordinator_process& c) {
                   jm_on_task_state(c, attempt, execution_state::failed);
                 });
}

void simulator::impl::deliver_deploy(const deployment& d) {
  sim_worker& w = workers_[d.worker];
  if (!w.alive || w.incarnation != d.worker_incarnation || w.registered_with != d.epoch) {
    ++counters_.stale_deliveries;
    return;
  }
  sim_run& run = *runs_.at(d.run);
  const subtask_id sub = d.attempt.subtask;
  if (auto it = w.hosted.find(sub); it != w.hosted.end()) it->second->kill();
  const sim_role role = sub.vertex == source_vertex   ? sim_role::source
                        : sub.vertex == middle_vertex ? sim_role::middle
                                                      : sim_role::sink;
  auto task = std::make_unique<sim_task>(*this, role, d.attempt, ++instances_);
  task->set_unaligned(cfg_.unaligned, cfg_.aligned_timeout_us);
  sim_task* t = task.get();
  deployed_by_[t->instance()] = d.epoch;
  assert(!run.tasks.contains(sub));
  run.tasks.emplace(sub, std::move(task));

  const std::uint32_t S = cfg_.sources, M = cfg_.middles, K = cfg_.sinks;
  auto src_mid = [&](std::uint32_t s, std::uint32_t m) { return run.channels[s * M + m].get(); };
  auto mid_sink = [&](std::uint32_t m, std::uint32_t k) {
    return run.channels[S * M + m * K + k].get();
  };
  std::vector<sim_channel*> inputs, outputs;
  if (role == sim_role::source) {
    for (std::uint32_t m = 0; m < M; ++m) outputs.push_back(src_mid(sub.index, m));
  } else if (role == sim_role::middle) {
    for (std::uint32_t s = 0; s < S; ++s) inputs.push_back(src_mid(s, sub.index));
    for (std::uint32_t k = 0; k < K; ++k) outputs.push_back(mid_sink(sub.index, k));
  } else {
    for (std::uint32_t m = 0; m < M; ++m) inputs.push_back(mid_sink(m, sub.index));
  }
  for (sim_channel* in : inputs) in->consumer = t;
  for (sim_channel* out : outputs) out->producer = t;
  t->connect(std::move(inputs), std::move(outputs));

  const sim_task_state* state = nullptr;
  if (d.restore_id != 0) {
    auto it = storage_.files.find(d.state_path);
    if (it == storage_.files.end()) {
      violate("restoring " + std::to_string(d.restore_id) + " needs state file " + d.state_path +
              ", which was discarded");
      return;
    }
    state = &it->second;
  }
  t->restore(d.restore_id, state);
  w.hosted[sub] = t;

  schedule(now_ + rng_.between(200, 1500), "task initialized", 0, d.attempt, [this, t] {
    if (!t->alive()) return;
    const execution_attempt_id attempt = t->attempt();
    to_coordinator(false, "task running reported", attempt.subtask.index, 0, attempt,
                   [this, attempt](coordinator_process& c) {
                     jm_on_task_state(c, attempt, execution_state::running);
                   });
  });
  if (role == sim_role::source)
    source_tick(*t);
  else if (t->has_work())
    wake(*t);
}

// ---------------------------------------------------------------------------------------------
// Invariants

void simulator::impl::violate(const std::string& message) {
  if (finished_) return;
  finished_ = true;
  violation_ = message;
}

void simulator::impl::check_invariants() {
  coordinator_process* c = coordinator_.get();
  if (c == nullptr) return;
  std::size_t checkpoints = 0;
  for (checkpoint_id id : c->core->pending_ids()) {
    if (id > max_allocated_) {
      violate("pending checkpoint " + std::to_string(id) + " was never handed out");
      return;
    }
    if (!c->core->find_pending(id)->is_savepoint()) ++checkpoints;
  }
  if (checkpoints > static_cast<std::size_t>(cfg_.checkpoint.max_concurrent))
    violate(std::to_string(checkpoints) + " checkpoints pending, max concurrent is " +
            std::to_string(cfg_.checkpoint.max_concurrent));
}

void simulator::impl::check_written(coordinator_process& c, const completed_checkpoint& cp) {
  auto fail = [&](const std::string& why) {
    violate("metadata write for checkpoint " + std::to_string(cp.id) + ": " + why);
  };
  auto required = c.required.find(cp.id);
  if (required == c.required.end()) return fail("not a checkpoint this coordinator started");
  auto acked = c.acked.find(cp.id);
  if (acked == c.acked.end() || acked->second != required->second)
    return fail("asked for before every required ack arrived");
  if (cp.subtask_states.size() != required->second.size())
    return fail(std::to_string(cp.subtask_states.size()) + " subtask states, expected " +
                std::to_string(required->second.size()));
  for (const execution_attempt_id& attempt : required->second) {
    auto it = cp.subtask_states.find(attempt.subtask);
    if (it == cp.subtask_states.end() || it->second.handles.size() != 1)
      return fail("no state for a required subtask");
    auto file = storage_.files.find(it->second.handles[0].path);
    if (file == storage_.files.end()) return fail("a state file it lists is gone");
    if (file->second.checkpoint != cp.id || file->second.attempt != attempt)
      return fail("a state file of another checkpoint or attempt");
  }
  if (cfg_.hooks) {
    auto hook = cp.master_states.find(hook_name);
    if (hook == cp.master_states.end() || hook->second != std::to_string(cp.id))
      return fail("master hook state missing or wrong");
  }
}

std::optional<std::vector<std::uint64_t>> simulator::impl::positions_of(
    const completed_checkpoint& cp) {
  std::vector<std::uint64_t> out;
  for (std::uint32_t s = 0; s < cfg_.sources; ++s) {
    auto state = cp.subtask_states.find(subtask_id{source_vertex, s});
    if (state == cp.subtask_states.end() || state->second.handles.empty()) return std::nullopt;
    auto file = storage_.files.find(state->second.handles[0].path);
    if (file == storage_.files.end()) return std::nullopt;
    out.push_back(file->second.next_seq);
  }
  return out;
}

void simulator::impl::advance_frontier(checkpoint_id id,
                                       const std::vector<std::uint64_t>& positions,
                                       const char* why) {
  if (id <= frontier_id_) return;
  for (std::uint32_t s = 0; s < cfg_.sources; ++s) {
    if (positions[s] < frontier_pos_[s]) {
      std::ostringstream os;
      os << why << " checkpoint " << id << " has source " << s << " at " << positions[s]
         << ", behind checkpoint " << frontier_id_ << " at " << frontier_pos_[s];
      violate(os.str());
      return;
    }
  }
  frontier_id_ = id;
  frontier_pos_ = positions;
}

void simulator::impl::declare_complete(coordinator_process& c, checkpoint_id id) {
  ++counters_.checkpoints_completed;
  const std::string location = chk_location(id);
  auto meta = storage_.metadata.find(location);
  if (meta == storage_.metadata.end()) {
    violate("checkpoint " + std::to_string(id) + " completed before its metadata was durable");
    return;
  }
  auto required = c.required.find(id);
  auto acked = c.acked.find(id);
  if (required == c.required.end() || acked == c.acked.end() || required->second != acked->second) {
    violate("checkpoint " + std::to_string(id) + " completed without every required ack");
    return;
  }
  if (c.store->latest() == nullptr || c.store->latest()->id != id) {
    violate("checkpoint " + std::to_string(id) + " completed but is not the store's latest");
    return;
  }
  if (id <= latest_declared_) {
    violate("checkpoint " + std::to_string(id) + " completed after checkpoint " +
            std::to_string(latest_declared_));
    return;
  }
  latest_declared_ = id;
  c.latest_known = id;
  auto positions = positions_of(meta->second);
  if (!positions) {
    violate("checkpoint " + std::to_string(id) + " completed with a source state file missing");
    return;
  }
  advance_frontier(id, *positions, "completed");
  // The run may end only on a checkpoint taken wholly without faults.
  if (meta->second.trigger_timestamp_us >= faulty_end_us_) completed_in_quiet_ = true;
  // Only this one: an older savepoint may still be pending (checkpoints never subsume those).
  c.required.erase(id);
  c.acked.erase(id);
}

void simulator::impl::check_restore(coordinator_process& c,
                                    const std::optional<completed_checkpoint>& restored) {
  ++counters_.restores;
  const checkpoint_id id = restored ? restored->id : 0;
  note("restore from checkpoint", id);
  if (id != c.latest_known) {
    violate("restored from checkpoint " + std::to_string(id) + ", the latest completed is " +
            std::to_string(c.latest_known));
    return;
  }
  if (id < latest_declared_) {
    violate("restored from checkpoint " + std::to_string(id) + " though checkpoint " +
            std::to_string(latest_declared_) + " had completed");
    return;
  }
  if (!restored) return;
  ++counters_.restores_from_checkpoint;
  if (id > latest_declared_) ++counters_.restores_from_undeclared;
  if (!storage_.metadata.contains(restored->location)) {
    violate("restored from checkpoint " + std::to_string(id) + " whose metadata was discarded");
    return;
  }
  for (const auto& h : restored->all_handles())
    if (!storage_.files.contains(h.path)) {
      violate("restored from checkpoint " + std::to_string(id) + " whose state file " + h.path +
              " was discarded");
      return;
    }
  auto positions = positions_of(*restored);
  assert(positions);
  advance_frontier(id, *positions, "restored");
}

void simulator::impl::check_discard(coordinator_process& c, const discard_location& d,
                                    const char* when) {
  auto fail = [&](const std::string& what) {
    violate(std::string("discard ") + when + " of " + what);
  };
  std::set<std::string> live;
  auto keep = [&](const completed_checkpoint& cp) {
    if (!d.location.empty() && d.location == cp.location)
      fail("the folder of retained checkpoint " + std::to_string(cp.id));
    for (const auto& h : cp.all_handles()) live.insert(h.path);
  };
  for (const auto& cp : c.store->checkpoints()) keep(cp);
  for (const auto& cp : c.store->savepoints()) keep(cp);
  for (const auto& h : d.handles)
    if (live.contains(h.path)) fail("state file " + h.path + " of a retained checkpoint");
}

void simulator::impl::check_end() {
  coordinator_process* c = coordinator_.get();
  if (now_ > faulty_end_us_ + quiet_limit_us) {
    violate("liveness: no checkpoint completed and was confirmed within " +
            std::to_string(quiet_limit_us / ms) + " ms after the faults stopped");
    return;
  }
  if (c == nullptr || !completed_in_quiet_ || c->status.current() != job_status::running) return;
  if (c->latest_known != latest_declared_) return;
  // Every current sink must have heard that the final checkpoint completed.
  for (const auto& sink : c->vertices[sink_vertex]) {
    sim_task* t = hosted(sink->current_attempt());
    if (t == nullptr || t->last_notified() < latest_declared_) return;
  }
  // Unaligned: the records the final checkpoint persisted as in flight are not committed yet;
  // the next checkpoint, which the run does not wait for, commits them.
  std::set<std::pair<std::uint32_t, std::uint64_t>> in_flight;
  for (const auto& cp : c->store->checkpoints()) {
    if (cp.id != frontier_id_) continue;
    for (const auto& h : cp.all_handles())
      if (auto it = storage_.files.find(h.path); it != storage_.files.end())
        for (const sim_record& r : it->second.channel_records) in_flight.insert({r.source, r.seq});
  }
  // Exactly once: every record the final checkpoint's sources had emitted is committed once
  // (or in flight in it), and nothing past it.
  for (std::uint32_t s = 0; s < cfg_.sources; ++s) {
    const auto& counts = commits_[s];
    for (std::uint64_t q = 0; q < std::max<std::uint64_t>(counts.size(), frontier_pos_[s]); ++q) {
      const std::uint8_t n = q < counts.size() ? counts[q] : 0;
      const std::uint8_t expected = q < frontier_pos_[s] && !in_flight.contains({s, q}) ? 1 : 0;
      if (n != expected) {
        std::ostringstream os;
        os << "at the end, record " << s << ":" << q << " is committed " << int(n)
           << " time(s), expected " << int(expected) << " (final checkpoint " << frontier_id_
           << " covers " << frontier_pos_[s] << " records of source " << s << ")";
        violate(os.str());
        return;
      }
    }
  }
  finished_ = true;
}

// ---------------------------------------------------------------------------------------------
// The run

std::string simulator::impl::format_trace() const {
  std::ostringstream os;
  const std::size_t n = trace_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const trace_entry& e = trace_[(trace_next_ + i) % n];
    char time[32];
    std::snprintf(time, sizeof time, "%10.3f", static_cast<double>(e.time_us - start_us) / 1000.0);
    os << "  " << (e.note ? "     " : "") << "#" << e.step << " " << time << " ms  " << e.what;
    if (e.a != 0) os << " " << e.a;
    if (e.attempt) os << " " << *e.attempt;
    os << "\n";
  }
  return os.str();
}

sim_result simulator::impl::run() {
  faulty_end_us_ = now_ + cfg_.faulty_us;
  start_coordinator();
  auto at_random = [&](std::int64_t from_us) {
    return now_ + rng_.between(from_us, cfg_.faulty_us - 1);
  };
  for (int i = 0; i < cfg_.worker_crashes; ++i) {
    const auto w = static_cast<std::uint32_t>(rng_.below(workers_.size()));
    schedule(at_random(5 * ms), "worker crashes", w, std::nullopt, [this, w] { crash_worker(w); });
  }
  for (int i = 0; i < cfg_.coordinator_crashes; ++i)
    schedule(at_random(5 * ms), "coordinator crashes", 0, std::nullopt,
             [this] { crash_coordinator(); });
  for (int i = 0; i < cfg_.task_failures; ++i)
    schedule(at_random(5 * ms), "task fails", 0, std::nullopt, [this] { fail_task(); });
  auto request = [this](checkpoint_trigger_kind kind) {
    if (!coordinator_) return;
    coordinator_->core->request_checkpoint(
        kind, now_, kind == checkpoint_trigger_kind::savepoint ? savepoint_base : std::string());
    run_actions(*coordinator_);
  };
  for (int i = 0; i < cfg_.manual_requests; ++i)
    schedule(at_random(1 * ms), "manual checkpoint requested", 0, std::nullopt,
             [request] { request(checkpoint_trigger_kind::manual); });
  for (int i = 0; i < cfg_.savepoints; ++i)
    schedule(at_random(1 * ms), "savepoint requested", 0, std::nullopt,
             [request] { request(checkpoint_trigger_kind::savepoint); });
  schedule(faulty_end_us_, "faults stop", 0, std::nullopt, [] {});

  while (!finished_) {
    if (queue_.empty()) {
      violate("nothing left to happen");
      break;
    }
    if (step_ >= options_.max_steps) {
      violate("liveness: " + std::to_string(options_.max_steps) + " steps without an end");
      break;
    }
    std::pop_heap(queue_.begin(), queue_.end(), event_after{});
    event e = std::move(queue_.back());
    queue_.pop_back();
    assert(e.time_us >= now_);
    now_ = e.time_us;
    ++step_;
    trace(e.what, e.a, e.attempt, false);
    e.fire();
    if (!finished_) check_invariants();
    if (!finished_ && !faults_active()) check_end();
  }

  sim_result r;
  r.seed = options_.seed;
  r.ok = violation_.empty();
  r.step = step_;
  r.violation = violation_;
  r.config = cfg_.describe();
  counters_.runs = 1;
  counters_.steps = step_;
  r.counters = counters_;
  r.simulated_us = now_ - start_us;
  if (!r.ok) {
    std::ostringstream os;
    os << "simulation seed " << options_.seed << " failed at step " << step_ << " ("
       << static_cast<double>(now_ - start_us) / 1000.0 << " ms simulated): " << violation_
       << "\n  config: " << r.config << "\n  replay: SNAPFLOW_SIM_SEED=" << options_.seed
       << " sim_tests, or sim_runner --seed " << options_.seed << " --verbose\n  last steps:\n"
       << format_trace();
    r.report = os.str();
  }
  return r;
}

// ---------------------------------------------------------------------------------------------

sim_counters& sim_counters::operator+=(const sim_counters& o) {
  runs += o.runs;
  steps += o.steps;
  control_messages += o.control_messages;
  dropped += o.dropped;
  duplicated += o.duplicated;
  delayed += o.delayed;
  stale_deliveries += o.stale_deliveries;
  cross_incarnation_deliveries += o.cross_incarnation_deliveries;
  checkpoints_started += o.checkpoints_started;
  checkpoints_completed += o.checkpoints_completed;
  checkpoints_failed += o.checkpoints_failed;
  savepoints_completed += o.savepoints_completed;
  acks += o.acks;
  declines += o.declines;
  metadata_writes += o.metadata_writes;
  metadata_write_failures += o.metadata_write_failures;
  slow_writes += o.slow_writes;
  counter_persist_failures += o.counter_persist_failures;
  hook_failures += o.hook_failures;
  worker_crashes += o.worker_crashes;
  coordinator_crashes += o.coordinator_crashes;
  writes_landed_in_crash += o.writes_landed_in_crash;
  task_failures += o.task_failures;
  failovers += o.failovers;
  restores += o.restores;
  restores_from_checkpoint += o.restores_from_checkpoint;
  restores_from_undeclared += o.restores_from_undeclared;
  unaligned_snapshots += o.unaligned_snapshots;
  switched_to_unaligned += o.switched_to_unaligned;
  records_emitted += o.records_emitted;
  records_committed += o.records_committed;
  return *this;
}

std::ostream& operator<<(std::ostream& os, const sim_counters& c) {
  return os << "runs " << c.runs << ", steps " << c.steps << "\n  network: " << c.control_messages
            << " control messages, " << c.dropped << " dropped, " << c.duplicated << " duplicated, "
            << c.delayed << " delayed, " << c.stale_deliveries << " stale deliveries, "
            << c.cross_incarnation_deliveries
            << " across coordinator incarnations\n  checkpoints: " << c.checkpoints_started
            << " started, " << c.checkpoints_completed << " completed, " << c.checkpoints_failed
            << " failed, " << c.savepoints_completed << " savepoints; " << c.acks << " acks, "
            << c.declines << " declines\n  storage: " << c.metadata_writes << " metadata writes, "
            << c.metadata_write_failures << " failed, " << c.slow_writes << " slow, "
            << c.writes_landed_in_crash << " landed during a crash; " << c.counter_persist_failures
            << " id counter failures, " << c.hook_failures
            << " hook failures\n  crashes: " << c.worker_crashes << " worker, "
            << c.coordinator_crashes << " coordinator, " << c.task_failures << " task; "
            << c.failovers << " failovers, " << c.restores << " restores ("
            << c.restores_from_checkpoint << " from a checkpoint, " << c.restores_from_undeclared
            << " from one never declared complete)\n  unaligned: " << c.unaligned_snapshots
            << " subtask snapshots, " << c.switched_to_unaligned
            << " after the aligned timeout\n  data: " << c.records_emitted
            << " records emitted, " << c.records_committed << " committed";
}

simulator::simulator(sim_options options) : impl_(std::make_unique<impl>(options)) {}
simulator::~simulator() = default;
sim_result simulator::run() {
  return impl_->run();
}

sim_result run_simulation(const sim_options& options) {
  return simulator(options).run();
}

std::optional<std::uint64_t> seed_from_environment() {
  const char* text = std::getenv("SNAPFLOW_SIM_SEED");
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long long seed = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') return std::nullopt;
  return seed;
}

}  // namespace snapflow::sim
