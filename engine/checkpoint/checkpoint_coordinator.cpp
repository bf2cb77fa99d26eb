#include "engine/checkpoint/checkpoint_coordinator.hpp"

#include <cassert>
#include <chrono>
#include <mutex>
#include <sstream>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/strand.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "engine/checkpoint/state_handle_confinement.hpp"
#include "engine/hop_trace.hpp"

namespace snapflow {

namespace {
// A cost, not logic time: measured on the real clock even under a manual coordinator clock.
std::chrono::microseconds elapsed_since(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               started);
}
}  // namespace

checkpoint_coordinator::checkpoint_coordinator(asio::any_io_executor executor,
                                               asio::any_io_executor io_executor,
                                               checkpoint_coordinator_setup setup,
                                               std::shared_ptr<checkpoint_task_gateway> gateway,
                                               metadata_write_placement::options placement,
                                               std::optional<metadata_write_placement::options>
                                                   location_placement)
    : executor_(std::move(executor)),
      timer_executor_(asio::make_strand(executor_)),
      io_executor_(std::move(io_executor)),
      id_counter_(setup.id_counter),
      hooks_(setup.hooks),
      storage_(std::make_shared<checkpoint_storage>(
          setup.job_dir, static_cast<std::size_t>(std::max(setup.config.retained, 1)))),
      premaker_(std::make_shared<location_premaker>(storage_, location_batch)),
      core_(std::move(setup)),
      gateway_(std::move(gateway)),
      metadata_placement_(placement),
      location_placement_(location_placement.value_or(placement)),
      location_work_(io_executor_),
      periodic_timer_(timer_executor_) {
  assert(gateway_);
}

checkpoint_coordinator::~checkpoint_coordinator() {
  // Normally gone with shutdown(); a coordinator dropped without it (on whichever thread lets
  // it go) still leaves no empty folder behind.
  remove_ahead_now();
  premaker_->close();
}

void checkpoint_coordinator::remove_ahead_now() {
  if (!ahead_) return;
  const std::string dir = std::move(ahead_->dir);
  ahead_.reset();
  if (auto r = checkpoint_storage::discard_location(dir); !r)
    spdlog::warn("removing the unused checkpoint folder {}: {}", dir, r.err().message);
}

std::int64_t checkpoint_coordinator::initial_delay_us() {
  const auto& c = core_.config();
  assert(c.interval);
  std::int64_t lo = c.min_pause.count() * 1000;
  std::int64_t hi = c.interval->count() * 1000;
  if (lo >= hi) return hi;
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
}

void checkpoint_coordinator::start_checkpoint_scheduler() {
  if (core_.is_shutdown() || !core_.config().interval || core_.periodic_scheduling()) return;
  core_.start_periodic_scheduling();
  periodic_paused_ = false;
  ++periodic_generation_;
  next_tick_us_ = coordinator_clock::now_us() + initial_delay_us();
  asio::co_spawn(
      timer_executor_,
      [self = shared_from_this(), generation = periodic_generation_] {
        return self->periodic_trigger_loop(generation);
      },
      asio::detached);
}

void checkpoint_coordinator::pause_periodic_triggers() {
  if (!core_.periodic_scheduling() || periodic_paused_) return;
  periodic_paused_ = true;
  ++periodic_generation_;  // the tick loop ends at its next wake-up
  periodic_timer_.cancel();
}

void checkpoint_coordinator::stop_checkpoint_scheduler() {
  if (!core_.periodic_scheduling()) return;
  periodic_paused_ = false;
  ++periodic_generation_;
  periodic_timer_.cancel();
  core_.stop_periodic_scheduling(coordinator_clock::now_us());
  run_actions();
  // A folder prepared ahead stays: its id is still the next one, which a restarted scheduler
  // takes. Removing it now could race a later preparation of the same folder.
}

asio::awaitable<void> checkpoint_coordinator::periodic_trigger_loop(std::uint64_t generation) {
  for (;;) {
    if (generation != periodic_generation_ || !core_.periodic_scheduling()) co_return;
    periodic_timer_.expires_at(coordinator_clock::from_us(next_tick_us_));
    std::error_code ec;
    co_await periodic_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (generation != periodic_generation_ || !core_.periodic_scheduling()) co_return;
    const std::int64_t now = coordinator_clock::now_us();
    // Cancelled by a reschedule (min pause, new interval): wait for the new deadline.
    if (ec || now < next_tick_us_) continue;
    next_tick_us_ = now + core_.config().interval->count() * 1000;
    ++periodic_ticks_;
    core_.on_tick(now);
    run_actions();
  }
}

asio::awaitable<void> checkpoint_coordinator::ack_collector(checkpoint_id id,
                                                             std::shared_ptr<ack_collection> c) {
  using namespace asio::experimental::awaitable_operators;
  const auto woken =
      co_await (c->all_acknowledged.async_wait(asio::experimental::as_tuple(asio::use_awaitable)) ||
                c->deadline.async_wait(asio::experimental::as_tuple(asio::use_awaitable)));
  if (auto it = collections_.find(id); it != collections_.end() && it->second == c)
    collections_.erase(it);
  if (c->finalize) {
    // Every ack is in: the write that makes the checkpoint durable, then its completion.
    run_actions(coordinator_action{std::move(*c->finalize)});
    co_return;
  }
  const bool expired = woken.index() == 1 && !std::get<0>(std::get<1>(woken));
  if (c->woken || !expired) co_return;  // aborted, or the coordinator shut down
  core_.on_timeout(id, coordinator_clock::now_us());
  run_actions();
}

void checkpoint_coordinator::wake_collector(checkpoint_id id) {
  auto it = collections_.find(id);
  if (it == collections_.end() || it->second->woken) return;
  it->second->woken = true;
  it->second->all_acknowledged.cancel();
}

std::uint64_t checkpoint_coordinator::trigger_checkpoint(checkpoint_trigger_kind kind,
                                                         std::string target_dir,
                                                         request_callback done) {
  // The request id is known before any action runs, so the callback is in place in time.
  std::uint64_t id =
      core_.request_checkpoint(kind, coordinator_clock::now_us(), std::move(target_dir));
  if (done) callbacks_.emplace(id, std::move(done));
  run_actions();
  return id;
}

ack_outcome checkpoint_coordinator::receive_ack(checkpoint_ack ack) {
  if (ack.job == core_.job()) {
    // Only an acknowledgement that names files needs its checkpoint's folder looked up.
    if (auto confined = names_files(ack.state)
                            ? confine_state_handles(ack.state, handle_folder(ack.id),
                                                    shared_folder(ack.id))
                            : success();
        !confined) {
      refuse_state_handles(ack, confined.err().message);
      return ack_outcome::refused_state_handle;
    }
    // Written into _metadata as sent: a range a restore could not read is refused now.
    if (const auto& scope = ack.state.keyed; scope && !scope->is_valid()) {
      refuse_state_handles(ack, "its keyed state names key groups " +
                                    std::to_string(scope->first_key_group) + ".." +
                                    std::to_string(scope->last_key_group) +
                                    ", not a range inside max parallelism " +
                                    std::to_string(scope->max_parallelism));
      return ack_outcome::refused_state_handle;
    }
  }
  ack_outcome outcome = core_.on_ack(std::move(ack), coordinator_clock::now_us());
  if (core_.has_actions()) run_actions();
  return outcome;
}

std::string checkpoint_coordinator::handle_folder(checkpoint_id id) const {
  // A checkpoint no longer pending (aborted, a late ack): where its folder was, so the late
  // state file it names is discarded there; a savepoint's folder is gone with its abort.
  if (const pending_checkpoint* p = core_.find_pending(id)) return p->location();
  return core_.checkpoint_location(id);
}

std::filesystem::path checkpoint_coordinator::shared_folder(checkpoint_id id) const {
  const pending_checkpoint* p = core_.find_pending(id);
  if (p != nullptr && p->is_savepoint()) return {};
  return storage_->job_dir() / checkpoint_storage::shared_folder_name;
}

void checkpoint_coordinator::refuse_state_handles(const checkpoint_ack& ack,
                                                  const std::string& why) {
  ++refused_state_handles_;
  // Once per subtask attempt: a hostile or broken worker repeats itself every checkpoint.
  if (refusal_logged_.size() >= max_refusals_logged) refusal_logged_.clear();
  if (refusal_logged_.insert(ack.attempt).second) {
    std::ostringstream attempt;
    attempt << ack.attempt;
    spdlog::warn("job {}: checkpoint {}: refused the acknowledgement of {}: {}", core_.job(),
                 ack.id, attempt.str(), why);
  }
  // Nothing it names is kept, read or deleted; the checkpoint fails as declined, with why.
  core_.on_decline(checkpoint_decline{ack.job, ack.attempt, ack.id,
                                      checkpoint_failure_reason::checkpoint_declined,
                                      "refused its state: " + why},
                   coordinator_clock::now_us());
  run_actions();
}

void checkpoint_coordinator::receive_decline(const checkpoint_decline& decline) {
  core_.on_decline(decline, coordinator_clock::now_us());
  run_actions();
}

void checkpoint_coordinator::task_ended(const execution_attempt_id& subtask,
                                        execution_state final_state) {
  core_.on_task_ended(subtask, final_state, coordinator_clock::now_us());
  if (core_.has_actions()) run_actions();
}

void checkpoint_coordinator::abort_pending_checkpoints(checkpoint_failure_reason reason,
                                                       const std::string& message) {
  core_.abort_pending_checkpoints(reason, message, coordinator_clock::now_us());
  run_actions();
}

void checkpoint_coordinator::set_interval(std::chrono::milliseconds interval) {
  assert(interval >= checkpoint_config::min_interval);
  core_.set_interval(interval);
  if (core_.periodic_scheduling()) {
    next_tick_us_ = std::min(next_tick_us_, coordinator_clock::now_us() + interval.count() * 1000);
    periodic_timer_.cancel();
  }
}

void checkpoint_coordinator::shutdown(job_status status) {
  const bool was_shut_down = core_.is_shutdown();
  ++periodic_generation_;
  periodic_timer_.cancel();
  // Read before the core forgets them: the folders whose metadata only the log made durable.
  std::vector<std::filesystem::path> logged;
  std::set<checkpoint_id> keep;
  std::optional<std::vector<completed_checkpoint>> shared_kept;
  if (status != job_status::suspended)
    shared_kept.emplace(core_.store().checkpoints().begin(), core_.store().checkpoints().end());
  for (const auto& c : core_.store().checkpoints()) {
    keep.insert(c.id);
    if (std::filesystem::path(c.location).parent_path() == storage_->job_dir())
      logged.emplace_back(c.location);
  }
  core_.shutdown(status, coordinator_clock::now_us());
  run_actions();
  // Now, not on the pool: the guessed id was never handed out, so a job started next on the
  // same folder may take it, and a late removal would race that job's preparation of it. An
  // empty folder with an empty file: two system calls.
  remove_ahead_now();
  premaker_->close();  // the same for the folders made ahead of their ids
  prepared_.clear();  // their files close; the discards of those checkpoints remove them
  // Now too, and for the same reason: a job started next on this folder appends to a new log.
  // A couple of fsyncs (one per retained checkpoint), once per job. The discards racing on
  // the pool are fine: a folder gone is skipped.
  if (auto sealed = storage_->seal(logged); !sealed)
    spdlog::warn("job {}: keeping the checkpoint metadata log: {}", core_.job(),
                 sealed.err().message);
  // Folders of this coordinator's checkpoints that no discard will remove any more; the
  // retained ones stay (those the store discards at this end go with their discards).
  if (first_triggered_ > 0 && !was_shut_down)
    sweep_after_shutdown(std::move(keep), std::move(shared_kept));
  for (auto& [_, c] : collections_) {
    c->woken = true;
    c->finalize.reset();
    c->all_acknowledged.cancel();
    c->deadline.cancel();
  }
  collections_.clear();
}

void checkpoint_coordinator::run_actions(std::optional<coordinator_action> first) {
  // Performing an action may feed an event back into the core (an id that is cheap to
  // allocate), which queues more actions: drain until quiet, without recursion.
  if (running_actions_) return;
  running_actions_ = true;
  gateway_->hold();
  // However the run ends (an action's callback may throw), it ends whole: the gateway sends
  // what it holds, the pool work found so far is posted, not kept (its items hold the
  // coordinator, which would then never be freed), and the next run is not refused.
  try {
    if (first) perform(*first);
    while (core_.has_actions()) {
      auto actions = core_.take_actions();
      for (auto& action : actions) perform(action);
    }
  } catch (...) {
    end_run();
    throw;
  }
  end_run();
}

void checkpoint_coordinator::end_run() {
  running_actions_ = false;
  // The triggers or notifications just made go out now, together where the gateway can.
  gateway_->flush();
  // Then the pool's housekeeping: waking a pool thread costs this thread tens of microseconds
  // on a small machine (the woken thread often takes its CPU), which the frames above must not
  // wait for. Nothing in the frames depends on it: a folder is created while the tasks work,
  // and the metadata write that needs it waits for it (location_work_).
  auto work = std::move(after_flush_);
  after_flush_.clear();
  for (auto& post : work) post();
  // The gap between two periodic checkpoints: the next one's folder now, off its path.
  if (!ahead_ && last_triggered_ > 0 && ahead_failed_ != last_triggered_ + 1 &&
      core_.periodic_scheduling() && !periodic_paused_ && !core_.is_shutdown() &&
      core_.num_pending() == 0 &&
      location_placement_.recent_writes_fast())
    prepare_ahead();
}

void checkpoint_coordinator::prepare_ahead() {
  assert(!ahead_);
  const checkpoint_id id = last_triggered_ + 1;
  std::string dir = core_.checkpoint_location(id);
  const auto started = std::chrono::steady_clock::now();
  auto prepared = premaker_->prepare(id);
  if (!prepared) {
    // Tried once per id. What was made before the failure stays: this id is still the next
    // one's, and a removal on the pool could race its trigger's own preparation, which tries
    // again and reports what fails then.
    ahead_failed_ = id;
    spdlog::debug("preparing the folder of checkpoint {} ahead: {}", id, prepared.err().message);
    return;
  }
  location_placement_.record(elapsed_since(started));
  ahead_.emplace(ahead_location{id, std::move(dir), std::move(prepared).value()});
}

void checkpoint_coordinator::discard_ahead() {
  if (!ahead_) return;
  std::string dir = std::move(ahead_->dir);
  ahead_.reset();  // closes its file
  post_after_flush([this, dir = std::move(dir)] {
    asio::post(io_executor_, [dir] {
      if (auto r = checkpoint_storage::discard_location(dir); !r)
        spdlog::warn("removing the unused checkpoint folder {}: {}", dir, r.err().message);
    });
  });
}

void checkpoint_coordinator::maybe_sweep_orphans() {
  const std::int64_t now = coordinator_clock::now_us();
  if (first_triggered_ == 0 ||
      (sweeps_ > 0 && now - last_sweep_us_ < orphan_sweep_interval_us))
    return;
  last_sweep_us_ = now;
  ++sweeps_;
  // What must stay, as this thread sees it now. A checkpoint triggered after this has a higher
  // id than `to`; one that ends after this removes its own folder or is retained.
  std::set<checkpoint_id> keep;
  for (const auto& c : core_.store().checkpoints()) keep.insert(c.id);
  for (checkpoint_id id : core_.pending_ids()) keep.insert(id);
  if (ahead_) keep.insert(ahead_->id);
  for (const auto& dir : preparing_)
    if (auto id = checkpoint_storage::checkpoint_folder_id(
            std::filesystem::path(dir).filename().string()))
      keep.insert(*id);
  post_after_flush([this, storage = storage_, from = first_triggered_, to = last_triggered_,
                    keep = std::move(keep)]() mutable {
    asio::post(io_executor_, [storage, from, to, keep = std::move(keep)] {
      const auto swept = storage->sweep_orphans(from, to, keep);
      for (checkpoint_id id : swept.removed)
        spdlog::info("removed the orphaned folder of checkpoint {} (its discard missed it)", id);
      for (const auto& failure : swept.failures)
        spdlog::warn("sweeping orphaned checkpoint folders: {}", failure);
    });
  });
}

void checkpoint_coordinator::sweep_after_shutdown(
    std::set<checkpoint_id> keep, std::optional<std::vector<completed_checkpoint>> shared_kept) {
  // Holds the storage, never the coordinator: a job that ended is freed at once. The shared
  // files a late acknowledgement named (after its checkpoint was forgotten) go too.
  auto sweep = [storage = storage_, from = first_triggered_, to = last_triggered_,
                keep = std::move(keep), shared_kept = std::move(shared_kept)] {
    const auto swept = storage->sweep_orphans(from, to, keep);
    for (checkpoint_id id : swept.removed)
      spdlog::info("removed the orphaned folder of checkpoint {} after the job ended", id);
    for (const auto& failure : swept.failures)
      spdlog::warn("sweeping orphaned checkpoint folders: {}", failure);
    if (!shared_kept) return;
    const auto shared =
        checkpoint_storage::remove_unreferenced_shared_files(storage->job_dir(), *shared_kept);
    for (const auto& file : shared.removed)
      spdlog::info("removed {}, a shared state file no checkpoint uses, after the job ended",
                   file.string());
    for (const auto& failure : shared.failures)
      spdlog::warn("sweeping the shared state folder: {}", failure);
  };
  asio::post(io_executor_, sweep);
  auto timer = std::make_shared<coordinator_timer>(executor_);
  timer->expires_at(coordinator_clock::from_us(coordinator_clock::now_us() + final_sweep_delay_us));
  timer->async_wait([timer, io = io_executor_, sweep](std::error_code ec) {
    if (!ec) asio::post(io, sweep);
  });
}

void checkpoint_coordinator::post_after_flush(std::function<void()> post) {
  if (running_actions_)
    after_flush_.push_back(std::move(post));
  else
    post();
}

void checkpoint_coordinator::location_prepared(checkpoint_id id, const std::string& dir,
                                               std::optional<prepared_metadata> file) {
  preparing_.erase(dir);
  forget_ended_preparations();
  if (file && core_.find_pending(id) != nullptr) prepared_.emplace(id, std::move(*file));
}

void checkpoint_coordinator::forget_ended_preparations() {
  // Only pending checkpoints are kept, so aborted ones cannot pile up (nor their open files).
  std::erase_if(prepared_,
                [&](const auto& entry) { return core_.find_pending(entry.first) == nullptr; });
}

void checkpoint_coordinator::prepare_location(checkpoint_id id, const std::string& dir,
                                              bool savepoint) {
  auto create = [id, dir, premaker = savepoint ? nullptr : premaker_] {
    const auto started = std::chrono::steady_clock::now();
    auto prepared = premaker ? premaker->prepare(id) : checkpoint_storage::prepare_location(dir);
    std::optional<prepared_metadata> file;
    if (prepared)
      file = std::move(prepared).value();
    else  // the metadata write tries again and fails the checkpoint
      spdlog::warn("creating the folder of checkpoint {}: {}", id, prepared.err().message);
    return std::pair{std::move(file), elapsed_since(started)};
  };
  // Savepoints may go to another disk: always the pool, as their metadata.
  if (location_placement_.recent_writes_fast() && !savepoint) {
    post_after_flush([this, create, id, dir] {
      auto [file, took] = create();
      location_placement_.record(took);
      location_placement_.count_inline_write();
      location_prepared(id, dir, std::move(file));
    });
  } else {
    post_location_work([self = shared_from_this(), create, id, dir] {
      auto [file, took] = create();
      asio::post(self->executor_, [self, id, dir, file = std::move(file), took]() mutable {
        self->location_placement_.record(took);
        self->location_prepared(id, dir, std::move(file));
      });
    });
  }
}

void checkpoint_coordinator::post_location_work(std::function<void()> work) {
  post_after_flush(
      [this, work = std::move(work)]() mutable { location_work_.post(std::move(work)); });
}

void checkpoint_coordinator::write_checkpoint_metadata(write_metadata& a) {
  auto self = shared_from_this();
  // Only once the folder is known to be durable: the creation may still be running
  // on the pool, and a write that found the folder there would not wait for the
  // parent's fsync. (Entries of checkpoints that ended otherwise are purged when the
  // next creation ends.)
  auto entry = prepared_.extract(a.checkpoint.id);
  const bool prepared = !entry.empty();
  hop_trace::record("c.all_acked", a.checkpoint.id);
  // Inline only into the log's open segment: making a segment writes up to 4 MiB.
  const bool inline_write =
      prepared && metadata_placement_.write_inline(a.checkpoint) &&
      (!entry.mapped().logged() ||
       storage_->log_has_room(2 * estimated_metadata_bytes(a.checkpoint)));
  if (inline_write) {
    const auto started = std::chrono::steady_clock::now();
    auto written = storage_->write_metadata(a.checkpoint, std::move(entry.mapped()));
    hop_trace::record("c.durable", a.checkpoint.id);
    metadata_placement_.record(elapsed_since(started));
    metadata_placement_.count_inline_write();
    // Fed back at once, as a cheap checkpoint id is: run_actions() drains what the
    // completion queues (the notifications go out with this flush).
    core_.on_metadata_written(a.checkpoint.id, std::move(written),
                              coordinator_clock::now_us());
    return;
  }
  // Holds the coordinator until the write's result is in: an aborted checkpoint's
  // folder is discarded only once its write has ended (the core's rule). Shared only
  // so the work fits a std::function (post_location_work).
  std::shared_ptr<prepared_metadata> file;
  if (prepared) file = std::make_shared<prepared_metadata>(std::move(entry.mapped()));
  auto write = [self, checkpoint = std::move(a.checkpoint), file] {
    const auto started = std::chrono::steady_clock::now();
    auto written = file ? self->storage_->write_metadata(checkpoint, std::move(*file))
                        : self->storage_->write_metadata(checkpoint);
    const auto took = elapsed_since(started);
    asio::post(self->executor_, [self, id = checkpoint.id, written, took]() mutable {
      self->metadata_placement_.record(took);
      self->core_.on_metadata_written(id, std::move(written),
                                      coordinator_clock::now_us());
      self->run_actions();
    });
  };
  if (prepared)
    asio::post(io_executor_, std::move(write));
  else
    post_location_work(std::move(write));
}

namespace {

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;
}  // namespace

void checkpoint_coordinator::perform(coordinator_action& action) {
  auto self = shared_from_this();
  std::visit(
      overloaded{
          [&](allocate_checkpoint_id& a) {
            if (id_counter_->next_is_cheap()) {
              core_.on_checkpoint_id(a.request_id, id_counter_->get_and_increment(),
                                     coordinator_clock::now_us());
              return;
            }
            asio::post(io_executor_, [self, request_id = a.request_id] {
              auto id = self->id_counter_->get_and_increment();
              asio::post(self->executor_, [self, request_id, id = std::move(id)]() mutable {
                self->core_.on_checkpoint_id(request_id, std::move(id),
                                             coordinator_clock::now_us());
                self->run_actions();
              });
            });
          },
          [&](snapshot_master_hooks& a) {
            struct collector {
              std::mutex mutex;
              std::size_t remaining;
              std::map<std::string, std::string> states;
              std::optional<error> failure;
            };
            auto hooks = hooks_->hooks();
            auto shared = std::make_shared<collector>();
            shared->remaining = hooks.size();
            for (auto& hook : hooks) {
              asio::post(io_executor_, [self, hook, shared, id = a.id, ts = a.timestamp_us] {
                hook->snapshot(id, ts, [self, hook, shared, id](result<std::string> state) {
                  std::unique_lock lock(shared->mutex);
                  if (state)
                    shared->states.emplace(hook->name(), std::move(*state));
                  else if (!shared->failure)
                    shared->failure = error{hook->name() + ": " + state.err().message};
                  if (--shared->remaining != 0) return;
                  lock.unlock();
                  asio::post(self->executor_, [self, shared, id] {
                    auto now = coordinator_clock::now_us();
                    if (shared->failure)
                      self->core_.on_master_hooks_done(id, *shared->failure, now);
                    else
                      self->core_.on_master_hooks_done(id, std::move(shared->states), now);
                    self->run_actions();
                  });
                });
              });
            }
          },
          [&](arm_timeout& a) {
            auto c = std::make_shared<ack_collection>(timer_executor_);
            c->deadline.expires_at(coordinator_clock::from_us(a.deadline_us));
            c->all_acknowledged.expires_at(coordinator_clock::time_point::max());
            collections_[a.id] = c;
            asio::co_spawn(
                timer_executor_, [self, id = a.id, c] { return self->ack_collector(id, c); },
                asio::detached);
          },
          // Every ack is in (a write_metadata follows in this run) or the checkpoint ended.
          [&](cancel_timeout& a) { wake_collector(a.id); },
          [&](send_trigger& a) {
            hop_trace::record("c.trigger", a.id);
            last_triggered_ = std::max(last_triggered_, a.id);
            if (first_triggered_ == 0) first_triggered_ = a.id;
            if (a.id != last_prepared_ && ahead_ && ahead_->id == a.id &&
                ahead_->dir == a.options.target_location) {
              // Prepared while the job waited for this tick: nothing to create now.
              last_prepared_ = a.id;
              forget_ended_preparations();
              prepared_.emplace(a.id, std::move(ahead_->file));
              ahead_.reset();
              ++ahead_used_;
            } else if (a.id != last_prepared_ && !a.options.target_location.empty()) {
              discard_ahead();  // a guess this trigger did not take
              // Once per checkpoint, with its first trigger: its folder, while the tasks work.
              // Marked as being created now (a discard in this same run must queue behind
              // it), but the rest waits until the triggers are out: building and posting the
              // creation held the first frame back (hop trace, p4 d3 10 ms: first trigger to
              // first frame 18 -> 16 us at the median).
              last_prepared_ = a.id;
              preparing_.insert(a.options.target_location);
              post_after_flush([this, id = a.id, dir = a.options.target_location,
                                savepoint = a.options.kind == checkpoint_trigger_kind::savepoint] {
                prepare_location(id, dir, savepoint);
              });
            }
            gateway_->trigger_checkpoint(a.attempt, a.id, a.timestamp_us, a.options);
          },
          [&](write_metadata& a) {
            // The checkpoint's collector finalises it, woken by the cancel_timeout before this.
            if (auto it = collections_.find(a.checkpoint.id);
                it != collections_.end() && it->second->woken && !it->second->finalize) {
              it->second->finalize = std::move(a);
              return;
            }
            write_checkpoint_metadata(a);
          },
          [&](discard_state& a) {
            post_after_flush([this, handles = std::move(a.handles)]() mutable {
              asio::post(io_executor_,
                         [job_dir = storage_->job_dir(), handles = std::move(handles)] {
                           discard_inside(job_dir, handles, {});
                         });
            });
          },
          [&](discard_location& a) {
            // Read before `a` moves into the lambda below.
            const bool behind_creation = preparing_.contains(a.location);
            auto discard = [job_dir = storage_->job_dir(), a = std::move(a)] {
              discard_inside(job_dir, a.handles, a.location);
            };
            // Behind the folder's creation when that may still be running.
            if (behind_creation)
              post_location_work(std::move(discard));
            else
              post_after_flush([this, discard = std::move(discard)]() mutable {
                asio::post(io_executor_, std::move(discard));
              });
          },
          [&](notify_complete& a) {
            gateway_->notify_checkpoint_complete(a.attempt, a.id, a.timestamp_us);
          },
          [&](notify_abort& a) {
            gateway_->notify_checkpoint_aborted(a.attempt, a.id, a.latest_completed_id);
          },
          [&](reschedule_periodic& a) {
            if (!core_.periodic_scheduling()) return;
            next_tick_us_ = coordinator_clock::now_us() + a.delay_us;
            periodic_timer_.cancel();
          },
          [&](request_finished& a) {
            // A checkpoint that got an id and failed says why, once (its request ends once);
            // a request refused before that, e.g. inside the minimum pause, is routine and
            // goes to its caller only.
            if (a.failure && a.id)
              spdlog::warn("job {}: {} {} failed ({}){}{}", core_.job(),
                           a.kind == checkpoint_trigger_kind::savepoint ? "savepoint"
                                                                        : "checkpoint",
                           *a.id, to_string(*a.failure), a.message.empty() ? "" : ": ",
                           a.message);
            if (!a.failure && a.id && a.kind != checkpoint_trigger_kind::savepoint) {
              maybe_sweep_orphans();
              for (auto& listener : completion_listeners_) listener(*a.id);
            }
            if (auto it = callbacks_.find(a.request_id); it != callbacks_.end()) {
              auto callback = std::move(it->second);
              callbacks_.erase(it);
              callback(a);
            }
            for (auto& listener : end_listeners_) listener();
          },
      },
      action);
}

}  // namespace snapflow
