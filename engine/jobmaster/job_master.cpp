#include "engine/jobmaster/job_master.hpp"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include "engine/jobmaster/state_assignment.hpp"
#include "graph/job_graph_codec.hpp"

namespace snapflow {

namespace {

// Workers judge data batches and control messages stale by attempt number, and a restarted
// coordinator builds a fresh execution graph: if its attempts started at 0 again, workers that
// saw higher numbers before the restart would drop the new attempts' data as stale and lose it.
// So each start of a job takes the next range of attempt numbers, durably, before deploying.
result<std::uint32_t> reserve_attempt_numbers(const std::filesystem::path& job_dir) {
  const auto file = job_dir / "attempt_floor";
  std::uint64_t floor = 0;
  std::error_code ec;
  if (std::filesystem::exists(file, ec)) {
    auto text = checkpoint_storage::read_file(file, 32);
    if (!text) return error{"cannot read " + file.string() + ": " + text.err().message};
    const auto& t = *text;
    const auto parsed = std::from_chars(t.data(), t.data() + t.size(), floor);
    if (parsed.ec != std::errc() || parsed.ptr != t.data() + t.size())
      return error{file.string() + " is corrupt: expected a number, found '" + t + "'"};
  }
  const std::uint64_t next = floor + job_master::attempts_per_start;
  if (next > std::numeric_limits<std::uint32_t>::max())
    return error{"the job was started too many times: its attempt numbers are used up"};
  std::filesystem::create_directories(job_dir, ec);
  if (ec) return error{"cannot create " + job_dir.string() + ": " + ec.message()};
  if (auto written = checkpoint_storage::write_file_durably(file, std::to_string(next)); !written)
    return error{"cannot write " + file.string() + ": " + written.err().message};
  return static_cast<std::uint32_t>(floor);
}

// The data endpoints (or, alike, the public keys) one subtask needs: its own and those of the
// subtasks it exchanges records with (every subtask of a neighbour vertex across a hash,
// rebalance or broadcast edge, the one with its own index across a forward edge). Handing every
// subtask the endpoint of every other made deployment quadratic in the job's size: at 10,000
// subtasks, 10^8 map entries copied and encoded, some 400 KB per deploy_task, and the coordinator
// thread busy for over 30 s.
std::map<subtask_id, std::string> endpoints_for(const job_graph& job, const subtask_id& subtask,
                                                const std::map<subtask_id, std::string>& all) {
  std::map<subtask_id, std::string> out;
  auto add = [&](vertex_id vertex, std::uint32_t index) {
    if (auto it = all.find(subtask_id{vertex, index}); it != all.end()) out.insert(*it);
  };
  add(subtask.vertex, subtask.index);
  for (const job_edge& edge : job.edges) {
    if (edge.source != subtask.vertex && edge.target != subtask.vertex) continue;
    const vertex_id other = edge.source == subtask.vertex ? edge.target : edge.source;
    if (edge.part == partitioning::forward) {
      add(other, subtask.index);
      continue;
    }
    for (auto it = all.lower_bound(subtask_id{other, 0});
         it != all.end() && it->first.vertex == other; ++it)
      out.insert(*it);
  }
  return out;
}

}  // namespace

result<job_master::durable_state> job_master::load_durable_state(
    const std::filesystem::path& state_dir, const job_graph& graph,
    const std::optional<completed_checkpoint>& restore_from) {
  durable_state state;
  const auto job_dir = state_dir / graph.id;
  auto first_attempt = reserve_attempt_numbers(job_dir);
  if (!first_attempt) return first_attempt.err();
  state.first_attempt = *first_attempt;
  if (!graph.checkpointing) return state;
  auto counter = file_checkpoint_id_counter::open(job_dir);
  if (!counter) return counter.err();
  auto recovered = checkpoint_storage(job_dir).recover();
  for (const auto& warning : recovered.warnings)
    spdlog::warn("job {}: skipping checkpoint: {}", graph.id, warning);
  for (checkpoint_id id : recovered.repaired)
    spdlog::info("job {}: checkpoint {}'s metadata file was lost with the machine; written "
                 "back from the metadata log",
                 graph.id, id);
  // Folders a crash left made ahead of their ids: rmdir removes a folder only while it is
  // empty, and a later id may make it again.
  for (const auto& folder : recovered.empty_folders) (void)::rmdir(folder.c_str());
  // Checkpoints that never completed (in progress at the crash, or a folder a late state file
  // made again after its abort): nothing in them can be restored, and no run after this one
  // would remove them.
  for (const auto& folder : recovered.incomplete_folders) {
    if (restore_from && std::filesystem::path(restore_from->location) == folder) continue;
    if (auto removed = checkpoint_storage::discard_location(folder); removed)
      spdlog::info("job {}: removed {}, a checkpoint that never completed", graph.id,
                   folder.string());
    else
      spdlog::warn("job {}: {}", graph.id, removed.err().message);
  }
  // Completed checkpoints beyond what the job retains (a crash between a completion and the
  // discard it subsumed): the store would drop them without removing their folders.
  {
    const auto retained = static_cast<std::size_t>(std::max(graph.checkpointing->config.retained, 1));
    std::vector<completed_checkpoint> kept;
    std::size_t periodic_seen = 0;
    for (auto it = recovered.checkpoints.rbegin(); it != recovered.checkpoints.rend(); ++it) {
      // recover() reads the job's own folder only: every one found is the job's.
      const bool restoring = restore_from && restore_from->location == it->location;
      if (it->is_savepoint() || restoring || ++periodic_seen <= retained) {
        kept.push_back(std::move(*it));
        continue;
      }
      if (auto removed = checkpoint_storage::discard_location(it->location); removed)
        spdlog::info("job {}: removed checkpoint {}, beyond the {} the job retains", graph.id,
                     it->id, retained);
      else
        spdlog::warn("job {}: {}", graph.id, removed.err().message);
    }
    std::reverse(kept.begin(), kept.end());
    recovered.checkpoints = std::move(kept);
  }
  // Shared files no kept checkpoint names (written for a checkpoint that never completed, or
  // whose release a crash interrupted): nothing will ever name them again.
  const auto shared =
      checkpoint_storage::remove_unreferenced_shared_files(job_dir, recovered.checkpoints);
  for (const auto& file : shared.removed)
    spdlog::info("job {}: removed {}, a shared state file no checkpoint uses", graph.id,
                 file.string());
  for (const auto& failure : shared.failures) spdlog::warn("job {}: {}", graph.id, failure);
  if (!recovered.checkpoints.empty()) {
    // The counter never goes back behind what is on disk, even if its own file was lost.
    if (auto advanced = (*counter)->advance_to(recovered.checkpoints.back().id + 1); !advanced)
      return advanced.err();
  }
  if (restore_from) {
    // Ids continue past the savepoint's, so a restored job never reuses one.
    if (auto advanced = (*counter)->advance_to(restore_from->id + 1); !advanced)
      return advanced.err();
  }
  state.id_counter = std::shared_ptr<checkpoint_id_counter>(std::move(*counter));
  state.checkpoints = std::move(recovered.checkpoints);
  return state;
}

result<std::shared_ptr<job_master>> job_master::create(
    asio::any_io_executor executor, job_graph graph, std::shared_ptr<worker_registry> workers,
    std::shared_ptr<task_deployment_gateway> deployer,
    std::shared_ptr<checkpoint_task_gateway> checkpoint_gateway, options opts,
    std::optional<durable_state> state) {
  if (auto invalid = opts.restart.validate()) return error{*invalid};
  if (graph.restart)
    if (auto invalid = graph.restart->validate()) return error{"job " + graph.id + ": " + *invalid};
  if (!state) {
    auto loaded = load_durable_state(opts.state_dir, graph, opts.restore_from);
    if (!loaded) return loaded.err();
    state = std::move(*loaded);
  }
  auto built = build_execution_graph(graph, executor, state->first_attempt);
  if (!built) return built.err();
  std::shared_ptr<execution_graph> eg = std::move(*built);
  if (graph.checkpointing) {
    const auto& s = *graph.checkpointing;
    if (!state->id_counter) return error{"job " + graph.id + ": no checkpoint id counter"};
    auto store = std::make_shared<completed_checkpoint_store>(s.config.retained);
    store->recover(std::move(state->checkpoints));
    auto enabled = eg->enable_checkpointing(
        s.config, s.to_trigger, s.to_acknowledge, s.to_confirm, {}, std::move(state->id_counter),
        std::move(store), s.config.state_backend,
        std::make_shared<checkpoint_stats_tracker>(s.config.stats_history_size, s.config),
        checkpoint_runtime{opts.io_executor, std::move(checkpoint_gateway), opts.state_dir});
    if (!enabled) return enabled.err();
  }
  auto master = std::shared_ptr<job_master>(new job_master(
      std::move(executor), std::move(eg), std::move(workers), std::move(deployer), std::move(opts)));
  std::weak_ptr<job_master> weak = master;
  if (master->graph_->get_checkpoint_coordinator() != nullptr) {
    // Each vertex once, however often the settings list it.
    std::size_t num_sources = 0;
    const std::set<vertex_id> sources(graph.checkpointing->to_trigger.begin(),
                                      graph.checkpointing->to_trigger.end());
    for (vertex_id id : sources)
      if (const auto* v = std::as_const(*master->graph_).find_job_vertex(id))
        num_sources += v->parallelism();
    master->job_end_ = final_checkpoint_tracker::create(
        master->executor_, master->graph_, num_sources,
        [weak](const execution_attempt_id& attempt) {
          auto self = weak.lock();
          if (!self) return;
          auto it = self->placement_.find(attempt.subtask);
          if (it != self->placement_.end() && !it->second.empty())
            self->deployer_->finish(it->second, self->id(), attempt);
        });
  }
  master->graph_->add_job_status_listener([weak](job_status, job_status to, std::int64_t) {
    if (!is_globally_terminal(to)) return;
    if (auto self = weak.lock(); self && self->end_time_ms_ == 0)
      self->end_time_ms_ = coordinator_clock::now_us() / 1000;
  });
  master->graph_->set_job_failure_handler(
      [weak](const std::string& cause, std::optional<execution_attempt_id>) {
        if (auto self = weak.lock()) self->fail("too many failed checkpoints: " + cause);
      });
  return master;
}

job_master::job_master(asio::any_io_executor executor, std::shared_ptr<execution_graph> graph,
                       std::shared_ptr<worker_registry> workers,
                       std::shared_ptr<task_deployment_gateway> deployer, options opts)
    : executor_(std::move(executor)),
      graph_(std::move(graph)),
      workers_(std::move(workers)),
      deployer_(std::move(deployer)),
      options_(std::move(opts)),
      // The job's own strategy, when it set one, wins over the coordinator's default.
      restart_strategy_(graph_->job().restart ? *graph_->job().restart : options_.restart),
      job_graph_bytes_(encode_job_graph(graph_->job())),
      restarts_(std::max(options_.restarts, 0)),
      start_time_ms_(options_.start_time_ms > 0 ? options_.start_time_ms
                                                : coordinator_clock::now_us() / 1000) {
  for (const auto& v : graph_->job_vertices())
    slots_needed_ = std::max(slots_needed_, v->parallelism());
}

void job_master::on_source_exhausted(const execution_attempt_id& attempt,
                                     checkpoint_id last_barrier) {
  if (find_current(attempt) == nullptr || !job_end_) return;
  const job_status status = graph_->status();
  // A short source may run out before every task of the job runs (the job is still CREATED or
  // RESTARTING): keep its report, decided on once the job is RUNNING. Dropping it would leave
  // the job waiting for that source forever.
  if (status != job_status::running && status != job_status::created &&
      status != job_status::restarting)
    return;
  job_end_->source_exhausted(attempt, last_barrier);
}

void job_master::start() {
  if (graph_->status() != job_status::created) return;
  try_schedule();
}

void job_master::try_schedule() {
  const job_status s = graph_->status();
  if (s != job_status::created && s != job_status::restarting) return;
  if (!slot_workers_.empty()) return;  // already placed
  const std::string fingerprint =
      graph_->job().program ? graph_->job().program->fingerprint : std::string();
  auto slots = workers_->allocate(slots_needed_, fingerprint);
  if (!slots) {
    const std::string reason = fingerprint.empty() ? std::string() : program_refusal();
    if (!waiting_for_slots_) {
      spdlog::info("job {}: waiting for slots ({} needed, {} free)", id(), slots_needed_,
                   workers_->total_free_slots());
      start_slot_wait();
    }
    if (!reason.empty() && reason != waiting_reason_)
      spdlog::warn("job {}: {}", id(), reason);
    waiting_reason_ = reason;
    waiting_for_slots_ = true;
    return;
  }
  waiting_for_slots_ = false;
  waiting_reason_.clear();
  if (slot_wait_timer_) slot_wait_timer_->cancel();
  slot_wait_timer_.reset();
  deploy_all(*slots);
}

std::string job_master::program_refusal() const {
  const job_program& program = *graph_->job().program;
  std::string text = "job needs " + std::to_string(slots_needed_) +
                     " slots on workers carrying its program '" + program.name +
                     "' (fingerprint " + program.fingerprint + "), " +
                     std::to_string(workers_->free_slots_for(program.fingerprint)) +
                     " free there; nothing is deployed to other workers (";
  if (workers_->workers().empty()) text += "no worker is registered";
  bool first = true;
  for (const auto& [id, w] : workers_->workers()) {
    text += first ? "" : "; ";
    first = false;
    text += "worker '" + id + "' ";
    if (w.programs.empty()) {
      text += "carries no program";
      continue;
    }
    text += "carries ";
    bool first_program = true;
    for (const auto& [fingerprint, name] : w.programs) {
      text += (first_program ? "" : ", ") + ("'" + name + "' (fingerprint " + fingerprint + ")");
      first_program = false;
    }
  }
  return text + "); start workers from the program that submitted the job";
}

void job_master::start_slot_wait() {
  slot_wait_timer_ = std::make_shared<coordinator_timer>(executor_);
  const auto timeout_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options_.slot_wait_timeout).count();
  slot_wait_timer_->expires_at(coordinator_clock::from_us(coordinator_clock::now_us() + timeout_us));
  std::weak_ptr<job_master> weak = weak_from_this();
  slot_wait_timer_->async_wait([weak, timer = slot_wait_timer_](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock(); self && self->slot_wait_timer_ == timer) self->slot_wait_expired();
  });
}

void job_master::slot_wait_expired() {
  const job_status s = graph_->status();
  if (!waiting_for_slots_ || (s != job_status::created && s != job_status::restarting)) return;
  waiting_for_slots_ = false;
  slot_wait_timer_.reset();
  const auto waited_s =
      std::chrono::duration_cast<std::chrono::seconds>(options_.slot_wait_timeout).count();
  if (!waiting_reason_.empty())
    failure_cause_ = waiting_reason_ + " (waited " + std::to_string(waited_s) + " s)";
  else
    failure_cause_ = "needs " + std::to_string(slots_needed_) + " slots, " +
                     std::to_string(workers_->total_free_slots()) + " available (waited " +
                     std::to_string(waited_s) +
                     " s; start workers with more --slots, or lower the job's parallelism)";
  waiting_reason_.clear();
  spdlog::error("job {}: FAILED: {}", id(), *failure_cause_);
  end(job_status::failed);
}

void job_master::deploy_all(const std::vector<worker_id>& slots) {
  slot_workers_ = slots;
  placement_.clear();
  std::map<subtask_id, std::string> endpoints;
  std::map<subtask_id, std::string> public_keys;  // only with CURVE
  for (const auto& v : graph_->job_vertices())
    for (const auto& s : v->subtasks()) {
      const worker_id& w = slot_workers_[s->id().index];
      placement_[s->id()] = w;
      const worker_info* info = workers_->find(w);
      endpoints[s->id()] = info ? info->data_endpoint : std::string();
      if (info && !info->public_key.empty()) public_keys[s->id()] = info->public_key;
    }

  // Resume from the latest completed checkpoint, if any.
  std::optional<completed_checkpoint> restore;
  if (auto* coordinator = graph_->get_checkpoint_coordinator()) {
    auto latest = coordinator->core().restore_latest_checkpoint(coordinator_clock::now_us());
    if (!latest) {
      spdlog::error("job {}: cannot restore: {}", id(), latest.err().message);
      release_slots();
      end(job_status::failed);
      failure_cause_ = latest.err().message;
      return;
    }
    restore = std::move(*latest);
  }
  if (!restore && !options_.origin.unreadable.empty()) {
    // A NO_CLAIM job resumed before its first checkpoint whose snapshot is gone: starting
    // empty would silently lose the state it was submitted with.
    failure_cause_ = "cannot restore from " + options_.origin.path + ": " +
                     options_.origin.unreadable;
    spdlog::error("job {}: {}", id(), *failure_cause_);
    release_slots();
    end(job_status::failed);
    return;
  }
  if (!restore && options_.restore_from) {
    restore = options_.restore_from;
    if (auto* coordinator = graph_->get_checkpoint_coordinator())
      coordinator->core().stats().report_restored(restore->id, coordinator_clock::now_us(),
                                                  restore->location, restore->is_savepoint());
  }
  restored_from_ = restore ? std::optional<checkpoint_id>(restore->id) : std::nullopt;

  const std::string checkpoint_dir = (options_.state_dir / id()).string();
  for (const auto& v : graph_->job_vertices()) {
    // Each subtask gets only the old states it needs (state_assignment.hpp has the contract).
    std::optional<state_assignment> assignment;
    if (restore)
      assignment.emplace(
          state_assignment::for_vertex(v->vertex(), operator_registry::builtin(), *restore));
    for (const auto& s : v->subtasks()) {
      task_deployment_descriptor d;
      d.job = id();
      d.attempt = s->current_attempt();
      d.job_graph_bytes = job_graph_bytes_;
      d.subtask_endpoints = endpoints_for(graph_->job(), s->id(), endpoints);
      // The same neighbours' keys: the coordinator vouches for who may connect to whom.
      if (!public_keys.empty())
        d.subtask_public_keys = endpoints_for(graph_->job(), s->id(), public_keys);
      if (restore) {
        d.restore_checkpoint_id = restore->id;
        d.restore_states = assignment->states_for(s->id().index);
      }
      d.checkpoint_dir = checkpoint_dir;
      s->set_state(execution_state::deploying);
      deployer_->deploy(placement_[s->id()], d);
    }
  }
}

execution_vertex* job_master::find_current(const execution_attempt_id& attempt) {
  execution_job_vertex* v = graph_->find_job_vertex(attempt.subtask.vertex);
  if (v == nullptr || attempt.subtask.index >= v->parallelism()) return nullptr;
  execution_vertex& s = v->subtask(attempt.subtask.index);
  return s.current_attempt() == attempt ? &s : nullptr;
}

std::optional<worker_id> job_master::worker_of(const execution_attempt_id& attempt) const {
  const execution_job_vertex* v = std::as_const(*graph_).find_job_vertex(attempt.subtask.vertex);
  if (v == nullptr || attempt.subtask.index >= v->parallelism() ||
      v->subtask(attempt.subtask.index).current_attempt() != attempt)
    return std::nullopt;
  auto it = placement_.find(attempt.subtask);
  if (it == placement_.end()) return std::nullopt;
  return it->second;
}

void job_master::on_task_state(const execution_attempt_id& attempt, execution_state state,
                               const std::string& message) {
  execution_vertex* s = find_current(attempt);
  if (s == nullptr) return;  // a stale attempt: ignore
  if (state == execution_state::failed && cause_is_symptom_ &&
      graph_->status() != job_status::running && graph_->status() != job_status::created) {
    replace_symptom(*s, message);
    return;
  }
  if (is_terminal(graph_->status())) return;
  if (is_terminal(s->state())) return;
  s->set_state(state);
  // Checkpoints still waiting for this subtask's ack end now, not at their timeout (and
  // before a failure below fails the job over, so they carry the task's reason).
  if (is_terminal(state))
    if (auto* coordinator = graph_->get_checkpoint_coordinator())
      coordinator->task_ended(attempt, state);
  const job_status status = graph_->status();
  switch (state) {
    case execution_state::running: {
      if (status != job_status::created && status != job_status::restarting) return;
      auto all = graph_->all_execution_vertices();
      bool all_running = std::all_of(all.begin(), all.end(), [](const execution_vertex* v) {
        return v->state() == execution_state::running || v->state() == execution_state::finished;
      });
      if (all_running) {
        graph_->transition_to(job_status::running);
        if (job_end_) job_end_->job_running();  // sources that ran out before the job ran
      }
      return;
    }
    case execution_state::finished: {
      auto all = graph_->all_execution_vertices();
      bool all_finished = std::all_of(all.begin(), all.end(), [](const execution_vertex* v) {
        return v->state() == execution_state::finished;
      });
      if (all_finished && status == job_status::running) end(job_status::finished);
      return;
    }
    case execution_state::failed:
      fail(failed_task_cause(*s, message));
      return;
    case execution_state::canceled:
      if (status == job_status::running || status == job_status::created ||
          status == job_status::restarting)
        fail("task " + s->task_name() + " was canceled unexpectedly", /*symptom=*/true);
      return;
    default:
      return;
  }
}

std::string job_master::failed_task_cause(const execution_vertex& s, const std::string& message) {
  std::ostringstream os;
  os << "task " << s.task_name() << " (" << s.current_attempt() << ") failed: " << message;
  return os.str();
}

void job_master::replace_symptom(execution_vertex& s, const std::string& message) {
  cause_is_symptom_ = false;
  if (!is_terminal(s.state())) s.set_state(execution_state::failed);
  failure_cause_ = failed_task_cause(s, message);
  spdlog::warn("job {}: the failure's cause: {}", id(), *failure_cause_);
  if (cause_listener_) cause_listener_();
}

void job_master::on_worker_lost(const worker_id& worker) {
  bool hosted = std::find(slot_workers_.begin(), slot_workers_.end(), worker) != slot_workers_.end();
  if (!hosted) return;
  // The slots died with the worker: nothing to release there.
  for (auto& w : slot_workers_)
    if (w == worker) w.clear();
  fail("worker " + worker + " was lost");
}

void job_master::on_slots_available() {
  if (waiting_for_slots_) try_schedule();
}

void job_master::cancel_running_tasks() {
  for (auto* v : graph_->all_execution_vertices()) {
    if (is_terminal(v->state()) || v->state() == execution_state::created) continue;
    auto it = placement_.find(v->id());
    if (it != placement_.end() && !it->second.empty() && workers_->find(it->second))
      deployer_->cancel(it->second, id(), v->current_attempt());
    v->set_state(execution_state::canceled);
  }
}

void job_master::release_slots() {
  for (const auto& w : slot_workers_)
    if (!w.empty()) workers_->release(w, 1);
  slot_workers_.clear();
  placement_.clear();
}

void job_master::fail(const std::string& cause, bool symptom) {
  const job_status status = graph_->status();
  if (is_terminal(status) || status == job_status::failing || status == job_status::cancelling)
    return;
  spdlog::warn("job {}: failing: {}", id(), cause);
  failure_cause_ = cause;
  cause_is_symptom_ = symptom;
  if (restart_timer_) restart_timer_->cancel();
  // Leaving RUNNING stops the periodic trigger and aborts pending checkpoints (listener).
  graph_->transition_to(job_status::failing);
  if (auto* coordinator = graph_->get_checkpoint_coordinator())
    coordinator->abort_pending_checkpoints(checkpoint_failure_reason::job_failover, cause);
  cancel_running_tasks();
  release_slots();
  auto delay_us = restart_strategy_.on_failure(coordinator_clock::now_us());
  if (!delay_us) {
    spdlog::error("job {}: restart strategy exhausted; the job FAILED: {}", id(), cause);
    end(job_status::failed);
    return;
  }
  graph_->transition_to(job_status::restarting);
  restart_timer_ = std::make_shared<coordinator_timer>(executor_);
  restart_timer_->expires_at(coordinator_clock::from_us(coordinator_clock::now_us() + *delay_us));
  std::weak_ptr<job_master> weak = weak_from_this();
  restart_timer_->async_wait([weak, timer = restart_timer_](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock(); self && self->restart_timer_ == timer) self->restart();
  });
}

void job_master::restart() {
  if (graph_->status() != job_status::restarting) return;
  ++restarts_;
  cause_is_symptom_ = false;  // the new attempt's failures are its own
  if (restart_listener_) restart_listener_(restarts_);
  if (job_end_) job_end_->reset();
  // A fresh start deserves a fresh streak of tolerable checkpoint failures.
  if (auto* failures = graph_->failure_manager()) failures->reset();
  for (auto* v : graph_->all_execution_vertices()) v->reset_for_new_attempt();
  try_schedule();
}

void job_master::cancel() {
  const job_status status = graph_->status();
  if (is_terminal(status)) return;
  if (restart_timer_) restart_timer_->cancel();
  if (slot_wait_timer_) slot_wait_timer_->cancel();
  slot_wait_timer_.reset();
  waiting_for_slots_ = false;
  if (status == job_status::failing) graph_->transition_to(job_status::restarting);
  graph_->transition_to(job_status::cancelling);
  cancel_running_tasks();
  release_slots();
  end(job_status::canceled);
}

void job_master::end(job_status terminal) {
  assert(is_globally_terminal(terminal));
  if (terminal == job_status::finished) release_slots();
  if (graph_->status() == job_status::running && terminal == job_status::failed)
    graph_->transition_to(job_status::failing);
  graph_->transition_to(terminal);
  if (auto* coordinator = graph_->get_checkpoint_coordinator()) coordinator->shutdown(terminal);
}

}  // namespace snapflow
