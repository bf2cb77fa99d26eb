#include "engine/checkpoint/checkpoint_coordinator_core.hpp"

#include <algorithm>
#include <cassert>
#include <sstream>

#include "engine/checkpoint/checkpoint_storage.hpp"

namespace snapflow {

std::string_view to_string(ack_outcome outcome) {
  switch (outcome) {
    case ack_outcome::ignored_wrong_job:
      return "ignored_wrong_job";
    case ack_outcome::accepted:
      return "accepted";
    case ack_outcome::completed:
      return "completed";
    case ack_outcome::duplicate:
      return "duplicate";
    case ack_outcome::unknown_attempt:
      return "unknown_attempt";
    case ack_outcome::late_discarded:
      return "late_discarded";
    case ack_outcome::late_ignored:
      return "late_ignored";
    case ack_outcome::refused_state_handle:
      return "refused_state_handle";
  }
  return "?";
}

checkpoint_coordinator_core::checkpoint_coordinator_core(checkpoint_coordinator_setup setup)
    : job_(std::move(setup.job)),
      config_(std::move(setup.config)),
      tasks_to_trigger_(std::move(setup.tasks_to_trigger)),
      tasks_to_acknowledge_(std::move(setup.tasks_to_acknowledge)),
      tasks_to_confirm_(std::move(setup.tasks_to_confirm)),
      job_dir_(std::move(setup.job_dir)),
      hooks_(std::move(setup.hooks)),
      id_counter_(std::move(setup.id_counter)),
      store_(std::move(setup.store)),
      stats_(std::move(setup.stats)),
      failure_manager_(std::move(setup.failure_manager)),
      decider_(config_.max_concurrent, config_.min_pause.count() * 1000) {
  assert(!config_.validate());
  assert(!tasks_to_trigger_.empty());
  assert(!tasks_to_acknowledge_.empty());
  assert(hooks_ && id_counter_ && store_ && stats_ && failure_manager_);
  // A store recovered from disk (a restarted coordinator): its checkpoints' shared files.
  shared_.recover(store_->checkpoints());
}

coordinator_load checkpoint_coordinator_core::load(std::int64_t now_us) const {
  coordinator_load l;
  l.triggering = triggering_.has_value();
  l.pending = static_cast<int>(pending_.size());
  l.last_completion_us = last_completion_us_;
  l.now_us = now_us;
  return l;
}

std::vector<coordinator_action> checkpoint_coordinator_core::take_actions() {
  std::vector<coordinator_action> out;
  out.swap(actions_);
  return out;
}

const pending_checkpoint* checkpoint_coordinator_core::find_pending(checkpoint_id id) const {
  auto it = pending_.find(id);
  return it == pending_.end() ? nullptr : &it->second;
}

std::vector<checkpoint_id> checkpoint_coordinator_core::pending_ids() const {
  std::vector<checkpoint_id> ids;
  for (const auto& [id, _] : pending_) ids.push_back(id);
  return ids;
}

checkpoint_id checkpoint_coordinator_core::latest_completed_id() const {
  const completed_checkpoint* latest = store_->latest();
  return latest ? latest->id : 0;
}

// ---------------------------------------------------------------------------------------------
// Requests

std::uint64_t checkpoint_coordinator_core::request_checkpoint(checkpoint_trigger_kind kind,
                                                              std::int64_t now_us,
                                                              std::string target_dir) {
  checkpoint_request request;
  request.request_id = next_request_id_++;
  request.kind = kind;
  request.submitted_us = now_us;
  request.target_dir = std::move(target_dir);
  if (shutdown_) {
    fail_request(request, checkpoint_failure_reason::checkpoint_coordinator_shutdown,
                 "the checkpoint coordinator is shut down", now_us);
    return request.request_id;
  }
  if (kind == checkpoint_trigger_kind::periodic && !periodic_scheduling_) {
    fail_request(request, checkpoint_failure_reason::periodic_scheduler_shutdown,
                 "periodic checkpoints are stopped (the job is not running)", now_us);
    return request.request_id;
  }
  apply(decider_.submit(request, load(now_us)), now_us);
  return request.request_id;
}

void checkpoint_coordinator_core::apply(checkpoint_request_decider::decision decision,
                                        std::int64_t now_us) {
  for (auto& [request, reason] : decision.failed) {
    std::string message = reason == checkpoint_failure_reason::too_many_checkpoint_requests
                              ? "the request queue is full"
                              : "inside the minimum pause after the last completed checkpoint";
    fail_request(request, reason, std::move(message), now_us);
  }
  if (decision.reschedule_periodic_in_us)
    actions_.push_back(reschedule_periodic{*decision.reschedule_periodic_in_us});
  if (decision.execute) start_trigger(*decision.execute, now_us);
}

bool checkpoint_coordinator_core::all_trigger_tasks_running(std::string* not_running) const {
  for (const execution_vertex* v : tasks_to_trigger_) {
    if (!v->is_running()) {
      if (not_running)
        *not_running = v->task_name() + " (" + std::to_string(v->id().index + 1) + "/" +
                       std::to_string(v->parallelism()) + ") is " +
                       std::string(to_string(v->state())) + ", not RUNNING";
      return false;
    }
  }
  return true;
}

std::optional<checkpoint_failure_reason> checkpoint_coordinator_core::trigger_refusal(
    const checkpoint_request& request, std::string* message) const {
  // A periodic request queued while the job ran must not start once it stopped running.
  if (request.kind == checkpoint_trigger_kind::periodic && !periodic_scheduling_) {
    *message = "periodic checkpoints are stopped (the job is not running)";
    return checkpoint_failure_reason::periodic_scheduler_shutdown;
  }
  std::string not_running;
  if (!all_trigger_tasks_running(&not_running)) {
    *message = "not triggering: " + not_running;
    return checkpoint_failure_reason::not_all_required_tasks_running;
  }
  // A subtask that must acknowledge but has ended (FINISHED, FAILED, CANCELED) would never
  // ack: the checkpoint could only expire. (A bounded job's final checkpoint is taken before
  // any subtask may finish: final_checkpoint_tracker.)
  for (const execution_vertex* v : tasks_to_acknowledge_)
    if (is_terminal(v->state())) {
      *message = "not triggering: " + v->task_name() + " (" + std::to_string(v->id().index + 1) +
                 "/" + std::to_string(v->parallelism()) + ") has ended as " +
                 std::string(to_string(v->state()));
      return checkpoint_failure_reason::not_all_required_tasks_running;
    }
  return std::nullopt;
}

void checkpoint_coordinator_core::start_trigger(const checkpoint_request& request,
                                                std::int64_t now_us) {
  assert(!triggering_);
  std::string message;
  if (auto refused = trigger_refusal(request, &message)) {
    fail_request(request, *refused, std::move(message), now_us);
    apply(decider_.next(load(now_us)), now_us);
    return;
  }
  if (request.kind == checkpoint_trigger_kind::savepoint && request.target_dir.empty() &&
      config_.savepoint_dir.empty()) {
    fail_request(request, checkpoint_failure_reason::trigger_checkpoint_failure,
                 "no savepoint folder given and no default savepoint_dir configured", now_us);
    apply(decider_.next(load(now_us)), now_us);
    return;
  }
  triggering_ = triggering_request{request, std::nullopt};
  actions_.push_back(allocate_checkpoint_id{request.request_id});
}

void checkpoint_coordinator_core::fail_request(const checkpoint_request& request,
                                               checkpoint_failure_reason reason,
                                               std::string message, std::int64_t now_us) {
  const bool savepoint = request.kind == checkpoint_trigger_kind::savepoint;
  stats_->report_failed_without_checkpoint(now_us, reason, savepoint);
  // A failed savepoint never counts toward the tolerable checkpoint failures (as in Flink).
  if (counts_toward_tolerable(reason) && !savepoint)
    failure_manager_->handle_checkpoint_failure(std::nullopt, reason, message);
  actions_.push_back(request_finished{request.request_id, request.kind, std::nullopt, reason,
                                      std::move(message), {}});
}

std::string checkpoint_coordinator_core::location_for(const checkpoint_request& request,
                                                      checkpoint_id id) const {
  if (request.kind == checkpoint_trigger_kind::savepoint) {
    std::filesystem::path base =
        request.target_dir.empty() ? std::filesystem::path(config_.savepoint_dir)
                                   : std::filesystem::path(request.target_dir);
    return checkpoint_storage::savepoint_dir(base, job_, id).string();
  }
  return checkpoint_location(id);
}

std::string checkpoint_coordinator_core::checkpoint_location(checkpoint_id id) const {
  return checkpoint_storage::checkpoint_dir(job_dir_, id).string();
}

void checkpoint_coordinator_core::on_checkpoint_id(std::uint64_t request_id,
                                                   result<checkpoint_id> id,
                                                   std::int64_t now_us) {
  if (!triggering_ || triggering_->request.request_id != request_id || triggering_->id) return;
  checkpoint_request request = triggering_->request;
  if (!id) {
    triggering_.reset();
    fail_request(request, checkpoint_failure_reason::io_exception,
                 "could not allocate a checkpoint id: " + id.err().message, now_us);
    apply(decider_.next(load(now_us)), now_us);
    return;
  }
  // Reserving ids may take a disk write, and the job may have failed over meanwhile (Flink
  // checks again here too: preCheckGlobalState). A checkpoint created now would wait for acks
  // from attempts that are gone while its triggers go to the new ones: it could only expire,
  // holding a max-concurrent slot until then and counting as a failure. The id stays unused.
  std::string message;
  if (auto refused = trigger_refusal(request, &message)) {
    triggering_.reset();
    fail_request(request, *refused, std::move(message), now_us);
    apply(decider_.next(load(now_us)), now_us);
    return;
  }
  const checkpoint_id cid = *id;
  assert(cid > 0);
  assert(pending_.empty() || pending_.rbegin()->first < cid);
  triggering_->id = cid;
  // Timestamps never go back, even if the clock does.
  const std::int64_t timestamp_us = std::max(now_us, last_trigger_timestamp_us_);
  last_trigger_timestamp_us_ = timestamp_us;

  std::vector<execution_attempt_id> to_ack;
  to_ack.reserve(tasks_to_acknowledge_.size());
  for (const execution_vertex* v : tasks_to_acknowledge_) to_ack.push_back(v->current_attempt());
  auto [it, inserted] = pending_.try_emplace(cid, job_, cid, request.kind, timestamp_us,
                                             request.request_id, to_ack,
                                             location_for(request, cid));
  assert(inserted);
  (void)inserted;
  stats_->report_pending(cid, request.kind, timestamp_us, to_ack.size());
  // The timeout covers the master hooks too: a hook that never answers expires the checkpoint.
  actions_.push_back(arm_timeout{cid, timestamp_us + checkpoint_timeout_us()});
  if (hooks_->size() > 0) {
    actions_.push_back(snapshot_master_hooks{cid, timestamp_us});
    return;
  }
  it->second.mark_master_states_done();
  send_triggers(it->second);
  finish_trigger(now_us);
}

void checkpoint_coordinator_core::on_master_hooks_done(
    checkpoint_id id, result<std::map<std::string, std::string>> states, std::int64_t now_us) {
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second.disposed() || it->second.master_states_done()) {
    // The checkpoint expired (or was aborted) while the hooks ran: a late result triggers
    // nothing.
    return;
  }
  if (!states) {
    abort(id, checkpoint_failure_reason::trigger_checkpoint_failure,
          "master hook failed: " + states.err().message, now_us);
    return;
  }
  it->second.set_master_states(std::move(*states));
  it->second.mark_master_states_done();
  send_triggers(it->second);
  finish_trigger(now_us);
}

void checkpoint_coordinator_core::send_triggers(pending_checkpoint& pending) {
  checkpoint_options options;
  options.kind = pending.kind();
  options.exactly_once = config_.mode == checkpointing_mode::exactly_once;
  // Savepoints are always aligned (Flink's too): they carry no channel state, so a job can
  // restore from one at any parallelism and with any edge changed.
  options.unaligned = config_.unaligned && pending.kind() != checkpoint_trigger_kind::savepoint;
  options.aligned_timeout_ms = config_.aligned_checkpoint_timeout.count();
  options.target_location = pending.location();
  for (const execution_vertex* v : tasks_to_trigger_)
    actions_.push_back(
        send_trigger{v->current_attempt(), pending.id(), pending.trigger_timestamp_us(), options});
}

void checkpoint_coordinator_core::finish_trigger(std::int64_t now_us) {
  triggering_.reset();
  if (!shutdown_) apply(decider_.next(load(now_us)), now_us);
}

// ---------------------------------------------------------------------------------------------
// Acks and declines

ack_outcome checkpoint_coordinator_core::on_ack(checkpoint_ack ack, std::int64_t now_us) {
  if (ack.job != job_) return ack_outcome::ignored_wrong_job;
  subtask_checkpoint_stats sub;
  sub.subtask = ack.attempt.subtask;
  sub.ack_timestamp_us = now_us;
  sub.state_size = ack.state.state_size;
  sub.checkpointed_size = checkpointed_size(ack.state);
  sub.sync_duration_us = ack.metrics.sync_duration_us;
  sub.async_duration_us = ack.metrics.async_duration_us;
  sub.alignment_duration_us = ack.metrics.alignment_duration_us;
  sub.bytes_processed_during_alignment = ack.metrics.bytes_processed_during_alignment;
  sub.records_held_during_alignment = ack.metrics.records_held_during_alignment;
  sub.records_after_barrier = ack.metrics.records_after_barrier;
  sub.unaligned = ack.metrics.unaligned;
  sub.persisted_data_bytes = ack.metrics.persisted_data_bytes;
  const auto start_delay = [&](std::int64_t trigger_us) -> std::int64_t {
    const std::int64_t received_us = ack.metrics.barrier_received_timestamp_us;
    return received_us > 0 ? std::max<std::int64_t>(0, received_us - trigger_us) : 0;
  };

  auto it = pending_.find(ack.id);
  if (it == pending_.end()) {
    if (was_aborted(ack.id)) {
      // The checkpoint failed: its files are garbage. Its statistics stay as they were when
      // it failed (Flink's rule): an ack after the abort changes no count, size or duration.
      discard_unused(std::move(ack.state.handles));
      return ack_outcome::late_discarded;
    }
    // Completed (its state may be live: never delete it) or never known here.
    return ack_outcome::late_ignored;
  }
  pending_checkpoint& pending = it->second;
  sub.end_to_end_duration_us = now_us - pending.trigger_timestamp_us();
  sub.start_delay_us = start_delay(pending.trigger_timestamp_us());
  // acknowledge() moves the state only on success; otherwise it is still ours to discard.
  switch (pending.acknowledge(ack.attempt, std::move(ack.state))) {
    case ack_result::success:
      stats_->report_ack(ack.id, sub);
      if (pending.fully_acknowledged() && pending.master_states_done()) {
        finalize(pending, now_us);
        return ack_outcome::completed;
      }
      return ack_outcome::accepted;
    case ack_result::duplicate:
      return ack_outcome::duplicate;
    case ack_result::unknown:
    case ack_result::discarded:
      discard_unused(std::move(ack.state.handles));
      return ack_outcome::unknown_attempt;
  }
  return ack_outcome::late_ignored;
}

void checkpoint_coordinator_core::on_decline(const checkpoint_decline& decline,
                                             std::int64_t now_us) {
  if (decline.job != job_) return;
  auto it = pending_.find(decline.id);
  if (it == pending_.end() || it->second.disposed() || it->second.finalizing()) return;
  if (!it->second.is_waiting_for(decline.attempt) &&
      !it->second.is_acknowledged(decline.attempt))
    return;  // a stale attempt or a subtask this checkpoint does not involve
  // The worker's reason is the one recorded and counted (a name the wire did not know arrives
  // as checkpoint_declined: wire_conversions).
  const checkpoint_failure_reason reason = decline.reason;
  abort(decline.id, reason, "declined by " + [&] {
          std::ostringstream os;
          os << decline.attempt;
          return os.str();
        }() + ": " + decline.message,
        now_us, decline.attempt);
}

void checkpoint_coordinator_core::on_task_ended(const execution_attempt_id& subtask,
                                                execution_state final_state,
                                                std::int64_t now_us) {
  const bool finished = final_state == execution_state::finished;
  if (!finished && final_state != execution_state::failed &&
      final_state != execution_state::canceled)
    return;  // not an end
  // A pending checkpoint still waiting for this subtask can never complete: end it now rather
  // than at its timeout. One that has its ack (or is finalizing) is not affected.
  std::vector<checkpoint_id> waiting;
  for (const auto& [id, pending] : pending_)
    if (!pending.disposed() && !pending.finalizing() && pending.is_waiting_for(subtask))
      waiting.push_back(id);
  if (waiting.empty()) return;
  std::ostringstream message;
  message << subtask << " ended as " << to_string(final_state) << " before acknowledging";
  const checkpoint_failure_reason reason =
      finished ? checkpoint_failure_reason::checkpoint_declined_task_closing
               : checkpoint_failure_reason::task_failure;
  for (checkpoint_id id : waiting)
    if (pending_.contains(id))  // an abort may start a queued request, never end another
      abort(id, reason, message.str(), now_us, subtask);
}

void checkpoint_coordinator_core::on_timeout(checkpoint_id id, std::int64_t now_us) {
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second.finalizing()) return;
  abort(id, checkpoint_failure_reason::checkpoint_expired,
        "expired before completing (" + std::to_string(it->second.num_acknowledged()) + "/" +
            std::to_string(it->second.num_subtasks()) + " acknowledged)",
        now_us);
}

// ---------------------------------------------------------------------------------------------
// Completion

void checkpoint_coordinator_core::finalize(pending_checkpoint& pending, std::int64_t now_us) {
  assert(pending.fully_acknowledged());
  assert(!pending.finalizing());
  pending.mark_finalizing();
  actions_.push_back(cancel_timeout{pending.id()});
  actions_.push_back(write_metadata{pending.to_completed(now_us)});
}

void checkpoint_coordinator_core::on_metadata_written(checkpoint_id id, result<void> written,
                                                      std::int64_t now_us) {
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    // Aborted while the write was in flight (shutdown, failover): only now that the write has
    // ended can its folder be deleted without the write re-creating it.
    if (auto late = discard_after_write_.extract(id)) actions_.push_back(std::move(late.mapped()));
    return;
  }
  pending_checkpoint& pending = it->second;
  assert(pending.finalizing());
  if (!written) {
    abort(id, checkpoint_failure_reason::finalize_checkpoint_failure,
          "could not write the checkpoint metadata: " + written.err().message, now_us, {},
          /*write_in_flight=*/false);
    return;
  }
  completed_checkpoint completed = pending.to_completed(now_us);
  const bool savepoint = completed.is_savepoint();
  if (!savepoint && store_->latest() && store_->latest()->id >= id) {
    // A newer checkpoint became durable first (concurrent checkpoints): this one is already
    // subsumed.
    abort(id, checkpoint_failure_reason::checkpoint_subsumed,
          "a newer checkpoint completed while this one was being finalized", now_us, {},
          /*write_in_flight=*/false);
    return;
  }
  if (auto kept = keep_completed(completed); !kept) {
    abort(id, checkpoint_failure_reason::finalize_checkpoint_failure, kept.err().message, now_us,
          {}, /*write_in_flight=*/false);
    return;
  }
  const std::uint64_t request_id = pending.request_id();
  const checkpoint_trigger_kind kind = pending.kind();
  pending_.erase(it);
  release_shared_after_pending();

  last_completion_us_ = now_us;
  failure_manager_->handle_checkpoint_success(id);
  stats_->report_completed(id, now_us, completed.location);

  if (!savepoint) {
    // Older pending checkpoints can never be the latest any more.
    std::vector<checkpoint_id> older;
    for (const auto& [pid, p] : pending_)
      if (pid < id && !p.is_savepoint()) older.push_back(pid);
    for (checkpoint_id pid : older)
      abort(pid, checkpoint_failure_reason::checkpoint_subsumed,
            "subsumed by checkpoint " + std::to_string(id), now_us);
    // A savepoint commits nothing: only checkpoints notify completion.
    for (const execution_vertex* v : tasks_to_confirm_)
      actions_.push_back(notify_complete{v->current_attempt(), id, completed.trigger_timestamp_us});
  }
  actions_.push_back(request_finished{request_id, kind, id, std::nullopt, {}, completed.location});
  if (!shutdown_ && !triggering_) apply(decider_.next(load(now_us)), now_us);
}

result<void> checkpoint_coordinator_core::keep_completed(const completed_checkpoint& completed) {
  // A file it reuses may have been released by a checkpoint that completed meanwhile.
  if (auto why = shared_.check_reused(completed)) return error{"cannot complete: " + *why};
  auto added = store_->add(completed);
  if (!added) return error{"could not add the checkpoint to the store: " + added.err().message};
  shared_.register_checkpoint(completed);
  for (auto& subsumed : *added)
    actions_.push_back(discard_location{subsumed.location, exclusive_handles(subsumed)});
  if (!added->empty() && !store_->checkpoints().empty()) {
    // A pending checkpoint may reuse what this completion releases (its task had not heard of
    // it yet): held until those end.
    checkpoint_id newest_pending = 0;
    for (const auto& [pid, p] : pending_)
      if (pid != completed.id) newest_pending = std::max(newest_pending, pid);
    auto released = shared_.release_older_than(store_->checkpoints().front().id, newest_pending);
    if (!released.empty()) actions_.push_back(discard_state{std::move(released)});
  }
  return success();
}

void checkpoint_coordinator_core::release_shared_after_pending() {
  checkpoint_id oldest_pending = 0;
  if (!pending_.empty()) oldest_pending = pending_.begin()->first;
  auto released = shared_.release_after_pending(oldest_pending);
  if (!released.empty()) actions_.push_back(discard_state{std::move(released)});
}

void checkpoint_coordinator_core::discard_unused(std::vector<state_handle> handles) {
  handles = shared_.discardable(std::move(handles));
  if (!handles.empty()) actions_.push_back(discard_state{std::move(handles)});
}

// ---------------------------------------------------------------------------------------------
// Abort

void checkpoint_coordinator_core::abort(checkpoint_id id, checkpoint_failure_reason reason,
                                        const std::string& message, std::int64_t now_us,
                                        std::optional<execution_attempt_id> failing_task,
                                        bool write_in_flight) {
  auto it = pending_.find(id);
  assert(it != pending_.end());
  pending_checkpoint& pending = it->second;
  const bool was_finalizing = pending.finalizing();
  const std::uint64_t request_id = pending.request_id();
  const checkpoint_trigger_kind kind = pending.kind();
  std::string location = pending.location();
  std::vector<state_handle> handles = shared_.discardable(pending.dispose());
  pending_.erase(it);
  remember_aborted(id);
  release_shared_after_pending();

  if (!was_finalizing) actions_.push_back(cancel_timeout{id});
  if (was_finalizing && write_in_flight)
    discard_after_write_.emplace(id, discard_location{std::move(location), std::move(handles)});
  else if (was_finalizing)
    actions_.push_back(discard_location{std::move(location), std::move(handles)});
  else {
    if (!handles.empty()) actions_.push_back(discard_state{std::move(handles)});
    // The folder the subtasks wrote into (chk-<id>) is garbage too; left behind it would only
    // be skipped with a warning by every later recovery.
    if (!location.empty()) actions_.push_back(discard_location{std::move(location), {}});
  }

  stats_->report_failed(id, now_us, reason, message);
  // A failed savepoint never counts toward the tolerable checkpoint failures (as in Flink).
  if (counts_toward_tolerable(reason) && kind != checkpoint_trigger_kind::savepoint)
    failure_manager_->handle_checkpoint_failure(id, reason, message, failing_task);

  const checkpoint_id latest = latest_completed_id();
  for (const execution_vertex* v : tasks_to_confirm_)
    actions_.push_back(notify_abort{v->current_attempt(), id, latest});
  actions_.push_back(request_finished{request_id, kind, id, reason, message, {}});

  // A checkpoint that died while its master hooks ran was the one being triggered.
  if (triggering_ && triggering_->id == id) triggering_.reset();
  if (!shutdown_ && !triggering_ && !holding_queue_) apply(decider_.next(load(now_us)), now_us);
}

void checkpoint_coordinator_core::remember_aborted(checkpoint_id id) {
  recently_aborted_.push_back(id);
  if (recently_aborted_.size() > recently_aborted_limit) recently_aborted_.pop_front();
}

bool checkpoint_coordinator_core::was_aborted(checkpoint_id id) const {
  return std::find(recently_aborted_.begin(), recently_aborted_.end(), id) !=
         recently_aborted_.end();
}

void checkpoint_coordinator_core::abort_pending_checkpoints(checkpoint_failure_reason reason,
                                                            const std::string& message,
                                                            std::int64_t now_us) {
  // Queued requests stay queued until the next tick, request or completion. Started from in
  // here (a failover: the job master cancels the tasks only after this call) one would trigger
  // tasks about to be cancelled, and its checkpoint would outlive this loop.
  holding_queue_ = true;
  for (checkpoint_id id : pending_ids()) abort(id, reason, message, now_us);
  holding_queue_ = false;
}

void checkpoint_coordinator_core::stop_periodic_scheduling(std::int64_t now_us) {
  periodic_scheduling_ = false;
  abort_pending_checkpoints(checkpoint_failure_reason::checkpoint_coordinator_suspend,
                            "the job left RUNNING", now_us);
}

void checkpoint_coordinator_core::shutdown(job_status status, std::int64_t now_us) {
  if (shutdown_) return;
  shutdown_ = true;
  periodic_scheduling_ = false;
  if (triggering_ && !triggering_->id) {
    checkpoint_request request = triggering_->request;
    triggering_.reset();
    fail_request(request, checkpoint_failure_reason::checkpoint_coordinator_shutdown,
                 "the checkpoint coordinator shut down", now_us);
  }
  abort_pending_checkpoints(checkpoint_failure_reason::checkpoint_coordinator_shutdown,
                            "the checkpoint coordinator shut down", now_us);
  for (const auto& request : decider_.drain())
    fail_request(request, checkpoint_failure_reason::checkpoint_coordinator_shutdown,
                 "the checkpoint coordinator shut down", now_us);
  auto deleted = store_->shutdown(status, config_.retention);
  for (auto& c : deleted) actions_.push_back(discard_location{c.location, exclusive_handles(c)});
  // The store deletes all its checkpoints or keeps them all; their shared files go with them.
  if (!deleted.empty())
    if (auto released = shared_.release_all(); !released.empty())
      actions_.push_back(discard_state{std::move(released)});
}

result<std::optional<completed_checkpoint>>
checkpoint_coordinator_core::restore_latest_checkpoint(std::int64_t now_us) {
  const completed_checkpoint* latest = store_->latest();
  if (latest == nullptr) return std::optional<completed_checkpoint>();
  if (auto restored = hooks_->restore(latest->id, latest->master_states, true); !restored)
    return error{"restoring master hooks from checkpoint " + std::to_string(latest->id) + ": " +
                 restored.err().message};
  stats_->report_restored(latest->id, now_us, latest->location, latest->is_savepoint());
  return std::optional<completed_checkpoint>(*latest);
}

}  // namespace snapflow
