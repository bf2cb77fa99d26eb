#include "engine/cluster/local_cluster.hpp"

#include <algorithm>
#include <cassert>
#include <future>
#include <set>
#include <sstream>
#include <tuple>

#include <spdlog/spdlog.h>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "engine/checkpoint/checkpoint_id_counter.hpp"
#include "engine/checkpoint/checkpoint_stats_tracker.hpp"
#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/completed_checkpoint_store.hpp"
#include "engine/jobmaster/state_assignment.hpp"

namespace snapflow {

std::string_view to_string(control_event::kind k) {
  switch (k) {
    case control_event::kind::trigger:
      return "trigger";
    case control_event::kind::notify_complete:
      return "notify_complete";
    case control_event::kind::notify_abort:
      return "notify_abort";
    case control_event::kind::acknowledge:
      return "acknowledge";
    case control_event::kind::decline:
      return "decline";
  }
  return "?";
}

namespace {

std::string kill_cause(const control_event& e) {
  std::ostringstream os;
  os << "killed by a fault hook at " << to_string(e.what) << " of checkpoint " << e.id << " ("
     << e.attempt << ")";
  return os.str();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The coordinator -> task direction (runs on the coordinator thread).

class local_cluster::gateway final : public checkpoint_task_gateway {
 public:
  explicit gateway(local_cluster& cluster) : cluster_(cluster) {}

  void trigger_checkpoint(const execution_attempt_id& attempt, checkpoint_id id,
                          std::int64_t timestamp_us, const checkpoint_options& options) override {
    deliver({control_event::kind::trigger, attempt, id},
            [id, timestamp_us, options](stream_task& t) {
              t.trigger_checkpoint(id, timestamp_us, options);
            });
  }
  void notify_checkpoint_complete(const execution_attempt_id& attempt, checkpoint_id id,
                                  std::int64_t timestamp_us) override {
    cluster_.note_completed(id);
    deliver({control_event::kind::notify_complete, attempt, id},
            [id, timestamp_us](stream_task& t) { t.notify_checkpoint_complete(id, timestamp_us); });
  }
  void notify_checkpoint_aborted(const execution_attempt_id& attempt, checkpoint_id id,
                                 checkpoint_id latest_completed_id) override {
    deliver({control_event::kind::notify_abort, attempt, id},
            [id, latest_completed_id](stream_task& t) {
              t.notify_checkpoint_aborted(id, latest_completed_id);
            });
  }

 private:
  template <typename Send>
  void deliver(const control_event& event, Send send) {
    stream_task* task = cluster_.find_task(event.attempt);
    if (task == nullptr) return;  // an attempt of an earlier deployment
    const fault_decision d = cluster_.decide(event);
    switch (d.what) {
      case fault_decision::action::deliver:
        send(*task);
        break;
      case fault_decision::action::drop:
        break;
      case fault_decision::action::duplicate:
        send(*task);
        send(*task);
        break;
      case fault_decision::action::delay: {
        // The timer lives on the coordinator thread, which stops before tasks are destroyed.
        auto timer = std::make_shared<asio::steady_timer>(cluster_.io_, d.delay);
        timer->async_wait([timer, task, send](const std::error_code& ec) {
          if (!ec) send(*task);
        });
        break;
      }
    }
    if (d.kill_subtask) task->fail(kill_cause(event));
  }

  local_cluster& cluster_;
};

// ---------------------------------------------------------------------------------------------
// The task -> coordinator direction (runs on task and snapshot writer threads).

class local_cluster::responder final : public checkpoint_responder {
 public:
  explicit responder(local_cluster& cluster) : cluster_(cluster) {}

  void set_coordinator(std::shared_ptr<checkpoint_coordinator> coordinator) {
    coordinator_ = std::move(coordinator);
  }

  void acknowledge(checkpoint_ack ack) override {
    const control_event event{control_event::kind::acknowledge, ack.attempt, ack.id};
    deliver(event, [ack = std::move(ack)](checkpoint_coordinator& c) { c.receive_ack(ack); });
  }
  void decline(checkpoint_decline decline) override {
    const control_event event{control_event::kind::decline, decline.attempt, decline.id};
    deliver(event, [decline = std::move(decline)](checkpoint_coordinator& c) {
      c.receive_decline(decline);
    });
  }

 private:
  template <typename Receive>
  void deliver(const control_event& event, Receive receive) {
    auto coordinator = coordinator_;
    if (!coordinator) return;  // a job without checkpointing
    const fault_decision d = cluster_.decide(event);
    auto post = [this, coordinator, receive](std::chrono::milliseconds delay) {
      asio::post(cluster_.io_, [this, coordinator, receive, delay] {
        if (delay.count() == 0) {
          receive(*coordinator);
          return;
        }
        auto timer = std::make_shared<asio::steady_timer>(cluster_.io_, delay);
        timer->async_wait([timer, coordinator, receive](const std::error_code& ec) {
          if (!ec) receive(*coordinator);
        });
      });
    };
    switch (d.what) {
      case fault_decision::action::deliver:
        post(std::chrono::milliseconds(0));
        break;
      case fault_decision::action::drop:
        break;
      case fault_decision::action::duplicate:
        post(std::chrono::milliseconds(0));
        post(std::chrono::milliseconds(0));
        break;
      case fault_decision::action::delay:
        post(d.delay);
        break;
    }
    if (d.kill_subtask) {
      if (stream_task* task = cluster_.find_task(event.attempt)) task->fail(kill_cause(event));
    }
  }

  local_cluster& cluster_;
  // Set before any task starts, never changed after.
  std::shared_ptr<checkpoint_coordinator> coordinator_;
};

// ---------------------------------------------------------------------------------------------
// Task status (task threads) -> the coordinator thread.

class local_cluster::listener final : public task_status_listener {
 public:
  explicit listener(local_cluster& cluster) : cluster_(cluster) {}

  void on_task_state(const execution_attempt_id& attempt, execution_state state,
                     const std::string& message) override {
    asio::post(cluster_.io_, [this, attempt, state, message] {
      cluster_.on_task_state(attempt, state, message);
    });
  }
  void on_source_exhausted(const execution_attempt_id& attempt,
                           checkpoint_id last_barrier) override {
    asio::post(cluster_.io_, [this, attempt, last_barrier] {
      cluster_.on_source_exhausted(attempt, last_barrier);
    });
  }

 private:
  local_cluster& cluster_;
};

// ---------------------------------------------------------------------------------------------

local_cluster::local_cluster(job_graph job, local_cluster_options options)
    : job_(std::move(job)), options_(std::move(options)), work_(io_.get_executor()) {
  assert(options_.channel_capacity_batches >= 1);
  assert(options_.batch_size >= 1);
  assert(options_.snapshot_threads >= 1);
  if (!options_.registry) options_.registry = &operator_registry::builtin();
  if (!options_.operators)
    options_.operators = std::shared_ptr<const operator_factory>(&operator_factory::builtin(),
                                                                 [](const operator_factory*) {});
  if (options_.local_state_dir.empty()) {
    own_local_dir_ = std::make_unique<scratch_folder>("snapflow-local");
    options_.local_state_dir = own_local_dir_->path();
  }
  writer_ = std::make_shared<snapshot_writer>(options_.snapshot_threads);
  gateway_ = std::make_shared<gateway>(*this);
  responder_ = std::make_shared<responder>(*this);
  listener_ = std::make_shared<listener>(*this);
  io_thread_ = std::thread([this] { io_.run(); });
}

local_cluster::~local_cluster() {
  shutdown();
}

void local_cluster::shutdown() {
  bool running = false;
  {
    std::lock_guard lock(mutex_);
    running = tasks_started_ && !is_globally_terminal(status_);
  }
  if (running) {
    cancel();
    wait(std::chrono::seconds(10));
  }
  // Every task is cancelled or done by now; a task blocked in a channel was woken by cancel.
  for (auto& t : tasks_) t->cancel();
  for (auto& t : tasks_) t->join();
  writer_.reset();  // runs the snapshots still queued (their acks go nowhere useful)
  asio::post(io_, [this] {
    if (graph_ && graph_->get_checkpoint_coordinator())
      graph_->get_checkpoint_coordinator()->stop_checkpoint_scheduler();
    io_.stop();
  });
  work_.reset();
  if (io_thread_.joinable()) io_thread_.join();
  io_pool_.join();
}

result<void> local_cluster::start() {
  {
    std::lock_guard lock(mutex_);
    if (started_) return error{"local_cluster: the job was started already"};
    started_ = true;
  }
  std::promise<result<void>> done;
  auto future = done.get_future();
  asio::post(io_, [this, &done] { done.set_value(start_on_coordinator()); });
  result<void> started = future.get();
  if (!started) return started;
  for (auto& t : tasks_) t->start();
  std::lock_guard lock(mutex_);
  tasks_started_ = true;
  return success();
}

result<void> local_cluster::start_on_coordinator() {
  if (auto invalid = validate(job_, *options_.registry)) return error{*invalid};
  auto built = build_execution_graph(job_, io_.get_executor());
  if (!built) return built.err();
  graph_ = std::move(built).value();

  std::optional<completed_checkpoint> restore;
  if (job_.checkpointing) {
    if (options_.state_dir.empty())
      return error{"local_cluster: job '" + job_.name + "' checkpoints but no state_dir is set"};
    const auto& settings = *job_.checkpointing;
    const auto job_dir = options_.state_dir / job_.id;
    auto counter = file_checkpoint_id_counter::open(job_dir);
    if (!counter) return counter.err();
    std::shared_ptr<checkpoint_id_counter> ids = std::move(counter).value();
    auto store = std::make_shared<completed_checkpoint_store>(settings.config.retained);
    if (options_.restore_latest) {
      auto found = checkpoint_storage(job_dir).recover();
      for (const auto& w : found.warnings) spdlog::info("local_cluster restore: {}", w);
      store->recover(std::move(found.checkpoints));
    }
    auto stats = std::make_shared<checkpoint_stats_tracker>(settings.config.stats_history_size,
                                                            settings.config);
    auto enabled = graph_->enable_checkpointing(
        settings.config, settings.to_trigger, settings.to_acknowledge, settings.to_confirm, {}, ids,
        store, settings.config.state_backend, stats,
        checkpoint_runtime{io_pool_.get_executor(), gateway_, options_.state_dir});
    if (!enabled) return enabled.err();
    graph_->set_job_failure_handler(
        [this](const std::string& cause, std::optional<execution_attempt_id>) {
          fail_job("too many checkpoint failures: " + cause);
        });
    responder_->set_coordinator(graph_->checkpoint_coordinator_ptr());
    // Each vertex once, however often the settings list it.
    std::size_t num_sources = 0;
    const std::set<vertex_id> sources(settings.to_trigger.begin(), settings.to_trigger.end());
    for (vertex_id id : sources)
      if (const auto* v = std::as_const(*graph_).find_job_vertex(id))
        num_sources += v->parallelism();
    job_end_ = final_checkpoint_tracker::create(
        io_.get_executor(), graph_, num_sources,
        [this](const execution_attempt_id& attempt) { find_task(attempt)->finish(); });
    if (options_.restore_latest) {
      auto latest = graph_->get_checkpoint_coordinator()->core().restore_latest_checkpoint(
          coordinator_clock::now_us());
      if (!latest) return latest.err();
      restore = std::move(*latest);
      if (restore) {
        if (auto advanced = ids->advance_to(restore->id + 1); !advanced) return advanced.err();
        std::lock_guard lock(mutex_);
        restored_ = restore->id;
      }
    }
  }
  graph_->add_job_status_listener(
      [this](job_status, job_status to, std::int64_t) { set_status(to); });
  return deploy(restore);
}

result<void> local_cluster::deploy(const std::optional<completed_checkpoint>& restore) {
  const operator_registry& registry = *options_.registry;
  // One channel per (edge, producer subtask, consumer subtask) that exchange records.
  std::map<std::tuple<std::size_t, std::uint32_t, std::uint32_t>, std::shared_ptr<local_channel>>
      channel_of;
  for (std::size_t e = 0; e < job_.edges.size(); ++e) {
    const job_edge& edge = job_.edges[e];
    const job_vertex* from = job_.find_vertex(edge.source);
    const job_vertex* to = job_.find_vertex(edge.target);
    assert(from && to);
    for (std::uint32_t j = 0; j < from->parallelism; ++j)
      for (std::uint32_t k = 0; k < to->parallelism; ++k) {
        if (edge.part == partitioning::forward && j != k) continue;
        auto c = std::make_shared<local_channel>(options_.channel_capacity_batches);
        channels_.push_back(c);
        channel_of.emplace(std::make_tuple(e, j, k), std::move(c));
      }
  }

  for (const auto& jv : graph_->job_vertices()) {
    const job_vertex& v = jv->vertex();
    const operator_kind* kind = registry.find(v.kind);
    // validate() let the vertex through: its kind is registered or it declares a custom role.
    assert(kind != nullptr || v.custom_role);
    const operator_role role = kind != nullptr ? kind->role : *v.custom_role;
    // Each subtask gets only the old states it needs (state_assignment.hpp has the contract).
    std::optional<state_assignment> assignment;
    if (restore) assignment.emplace(state_assignment::for_vertex(v, registry, *restore));

    for (std::uint32_t i = 0; i < v.parallelism; ++i) {
      stream_task_config c;
      c.job = job_.id;
      c.attempt = jv->subtask(i).current_attempt();
      c.vertex = v;
      c.role = role;
      std::uint32_t input_gate = 0;
      for (std::size_t e = 0; e < job_.edges.size(); ++e) {
        const job_edge& edge = job_.edges[e];
        if (edge.target == v.id) {
          const job_vertex* from = job_.find_vertex(edge.source);
          for (std::uint32_t j = 0; j < from->parallelism; ++j)
            if (auto it = channel_of.find({e, j, i}); it != channel_of.end()) {
              c.inputs.push_back(it->second);
              c.input_addresses.push_back({input_gate, j});
            }
          ++input_gate;
          c.input_gates.push_back(edge.part);
        }
        if (edge.source == v.id) {
          const job_vertex* to = job_.find_vertex(edge.target);
          output_edge out;
          out.part = edge.part;
          out.target_max_parallelism = to->max_parallelism;
          for (std::uint32_t k = 0; k < to->parallelism; ++k)
            if (auto it = channel_of.find({e, i, k}); it != channel_of.end())
              out.channels.push_back(it->second);
          c.outputs.push_back(std::move(out));
        }
      }
      c.mode =
          job_.checkpointing ? job_.checkpointing->config.mode : checkpointing_mode::exactly_once;
      c.unaligned_checkpoints = job_.checkpointing && job_.checkpointing->config.unaligned;
      c.final_checkpoint = job_.checkpointing.has_value();
      if (job_.checkpointing) {
        c.inline_state_max_bytes =
            static_cast<std::size_t>(job_.checkpointing->config.inline_state_max_bytes);
        auto backend = parse_state_backend(job_.checkpointing->config.state_backend);
        if (!backend) return backend.err();
        c.state_backend = *backend;
        c.incremental_checkpoints = job_.checkpointing->config.incremental;
        c.max_in_flight_bytes =
            static_cast<std::uint64_t>(job_.checkpointing->config.max_in_flight_bytes);
        c.buffer_debloat = job_.checkpointing->config.buffer_debloat;
        c.buffer_debloat_target = job_.checkpointing->config.buffer_debloat_target;
      }
      c.local_state_dir = options_.local_state_dir;
      c.rocksdb_block_cache_bytes = options_.rocksdb_block_cache_bytes;
      if (restore) {
        c.restore_checkpoint = restore->id;
        c.restore_states = assignment->states_for(i);
      }
      c.batch_size = options_.batch_size;
      c.operators = options_.operators;
      c.responder = responder_;
      c.listener = listener_;
      c.writer = writer_;
      auto task = std::make_unique<stream_task>(std::move(c));
      task_by_attempt_.emplace(task->attempt(), task.get());
      tasks_.push_back(std::move(task));
    }
  }
  return success();
}

stream_task* local_cluster::find_task(const execution_attempt_id& attempt) const {
  auto it = task_by_attempt_.find(attempt);
  return it == task_by_attempt_.end() ? nullptr : it->second;
}

fault_decision local_cluster::decide(const control_event& event) const {
  if (!options_.faults) return {};
  return options_.faults(event);
}

void local_cluster::on_task_state(const execution_attempt_id& attempt, execution_state state,
                                  const std::string& message) {
  execution_job_vertex* jv = graph_->find_job_vertex(attempt.subtask.vertex);
  if (jv == nullptr) return;
  execution_vertex& v = jv->subtask(attempt.subtask.index);
  if (v.current_attempt() != attempt) return;  // an earlier deployment
  if (is_terminal(v.state())) return;
  v.set_state(state);
  // As job_master: checkpoints still waiting for this subtask's ack end now.
  if (is_terminal(state))
    if (auto* coordinator = graph_->get_checkpoint_coordinator())
      coordinator->task_ended(attempt, state);
  switch (state) {
    case execution_state::running:
      if (++num_running_ == graph_->num_subtasks()) {
        graph_->transition_to(job_status::created, job_status::running);
        if (job_end_) job_end_->job_running();  // sources that ran out before the job ran
      }
      break;
    case execution_state::failed: {
      std::ostringstream cause;
      cause << "task " << v.task_name() << " " << attempt << " failed: " << message;
      ++num_terminal_;
      fail_job(cause.str());
      break;
    }
    case execution_state::finished:
    case execution_state::canceled:
      ++num_terminal_;
      break;
    default:
      break;
  }
  maybe_end();
}

void local_cluster::on_source_exhausted(const execution_attempt_id& attempt,
                                        checkpoint_id last_barrier) {
  if (find_task(attempt) == nullptr || !job_end_) return;
  job_end_->source_exhausted(attempt, last_barrier);
}

void local_cluster::fail_job(const std::string& cause) {
  const job_status s = graph_->status();
  if (s != job_status::created && s != job_status::running) return;
  {
    std::lock_guard lock(mutex_);
    if (!failure_cause_) failure_cause_ = cause;
  }
  spdlog::info("local_cluster: job {} fails: {}", job_.name, cause);
  graph_->transition_to(job_status::failing);
  cancel_all_tasks();
}

void local_cluster::cancel() {
  asio::post(io_, [this] {
    if (!graph_) return;
    const job_status s = graph_->status();
    if (is_globally_terminal(s) || s == job_status::cancelling) return;
    graph_->transition_to(job_status::cancelling);
    cancel_all_tasks();
    maybe_end();
  });
}

void local_cluster::cancel_all_tasks() {
  for (auto& c : channels_) c->cancel();
  for (auto& t : tasks_) t->cancel();
}

void local_cluster::maybe_end() {
  if (num_terminal_ < graph_->num_subtasks()) return;
  checkpoint_coordinator* coordinator = graph_->get_checkpoint_coordinator();
  job_status end = job_status::finished;
  switch (graph_->status()) {
    case job_status::running: {
      const auto vertices = graph_->all_execution_vertices();
      const bool all_finished = std::all_of(vertices.begin(), vertices.end(), [](auto* v) {
        return v->state() == execution_state::finished;
      });
      if (!all_finished) {
        fail_job("tasks ended without finishing");
        return maybe_end();
      }
      end = job_status::finished;
      break;
    }
    case job_status::failing:
      end = job_status::failed;
      break;
    case job_status::cancelling:
      end = job_status::canceled;
      break;
    default:
      return;
  }
  graph_->transition_to(end);
  if (coordinator) coordinator->shutdown(end);
}

void local_cluster::set_status(job_status status) {
  {
    std::lock_guard lock(mutex_);
    status_ = status;
  }
  changed_.notify_all();
}

void local_cluster::note_completed(checkpoint_id id) {
  {
    std::lock_guard lock(mutex_);
    if (id <= latest_completed_) return;
    latest_completed_ = id;
    ++completed_count_;
  }
  changed_.notify_all();
}

job_status local_cluster::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return is_globally_terminal(status_); });
  return status_;
}

result<job_status> local_cluster::run(std::chrono::milliseconds timeout) {
  if (auto started = start(); !started) return started.err();
  const job_status s = wait(timeout);
  if (is_globally_terminal(s)) return s;
  cancel();
  wait(std::chrono::seconds(10));
  return error{"job '" + job_.name + "' did not end within " + std::to_string(timeout.count()) +
               " ms (it was " + std::string(to_string(s)) + "); cancelled"};
}

void local_cluster::kill_task(subtask_id subtask, std::string cause) {
  for (auto& t : tasks_)
    if (t->attempt().subtask == subtask) t->fail(cause);
}

bool local_cluster::wait_for_completed_checkpoints(std::size_t count,
                                                   std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout,
                    [&] { return completed_count_ >= count || is_globally_terminal(status_); });
  return completed_count_ >= count;
}

job_status local_cluster::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

std::optional<checkpoint_id> local_cluster::restored_checkpoint() const {
  std::lock_guard lock(mutex_);
  return restored_;
}

checkpoint_id local_cluster::latest_completed_checkpoint() const {
  std::lock_guard lock(mutex_);
  return latest_completed_;
}

std::size_t local_cluster::completed_checkpoints() const {
  std::lock_guard lock(mutex_);
  return completed_count_;
}

std::optional<std::string> local_cluster::failure_cause() const {
  std::lock_guard lock(mutex_);
  return failure_cause_;
}

std::uint64_t local_cluster::records_in(subtask_id subtask) const {
  std::uint64_t n = 0;
  for (const auto& t : tasks_)
    if (t->attempt().subtask == subtask) n += t->records_in();
  return n;
}

std::uint64_t local_cluster::in_flight_bytes_bound(subtask_id subtask) const {
  std::uint64_t bound = 0;
  for (const auto& t : tasks_)
    if (t->attempt().subtask == subtask && !t->done()) bound = t->in_flight_bytes_bound();
  return bound;
}

std::uint64_t local_cluster::buffered_input_bytes(subtask_id subtask) const {
  std::uint64_t bytes = 0;
  for (const auto& t : tasks_)
    if (t->attempt().subtask == subtask && !t->done()) bytes += t->buffered_input_bytes();
  return bytes;
}

}  // namespace snapflow
