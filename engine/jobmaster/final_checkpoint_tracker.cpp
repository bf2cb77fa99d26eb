#include "engine/jobmaster/final_checkpoint_tracker.hpp"

#include <algorithm>
#include <utility>

#include "engine/checkpoint/checkpoint_coordinator.hpp"
#include "engine/clock.hpp"

namespace snapflow {

namespace {
// How soon a failed final checkpoint is asked for again: short, since the job's end waits on it,
// and independent of the checkpoint interval (periodic ticks are paused by then).
constexpr std::int64_t retry_delay_us = 10'000;
}  // namespace

std::shared_ptr<final_checkpoint_tracker> final_checkpoint_tracker::create(
    asio::any_io_executor executor, std::shared_ptr<execution_graph> graph,
    std::size_t num_sources, finish_source finish) {
  auto tracker = std::shared_ptr<final_checkpoint_tracker>(new final_checkpoint_tracker(
      std::move(executor), std::move(graph), num_sources, std::move(finish)));
  std::weak_ptr<final_checkpoint_tracker> weak = tracker;
  // Every request that ends may be the last one the ending sources wait for.
  tracker->graph_->get_checkpoint_coordinator()->add_end_listener([weak] {
    if (auto self = weak.lock()) self->maybe_finish_sources();
  });
  return tracker;
}

final_checkpoint_tracker::final_checkpoint_tracker(asio::any_io_executor executor,
                                                   std::shared_ptr<execution_graph> graph,
                                                   std::size_t num_sources, finish_source finish)
    : executor_(std::move(executor)),
      graph_(std::move(graph)),
      num_sources_(num_sources),
      finish_(std::move(finish)) {}

void final_checkpoint_tracker::source_exhausted(const execution_attempt_id& attempt,
                                                checkpoint_id last_barrier) {
  if (final_checkpoint_) return;
  exhausted_sources_[attempt] = last_barrier;
  start_if_all_exhausted();
}

void final_checkpoint_tracker::job_running() {
  completed_before_run_ = graph_->get_checkpoint_coordinator()->core().latest_completed_id();
  start_if_all_exhausted();
}

void final_checkpoint_tracker::reset() {
  ++run_;
  exhausted_sources_.clear();
  final_checkpoint_.reset();
  sources_finished_ = false;
}

void final_checkpoint_tracker::start_if_all_exhausted() {
  if (final_checkpoint_ || graph_->status() != job_status::running ||
      exhausted_sources_.size() < num_sources_)
    return;
  checkpoint_id newest = completed_before_run_;
  for (const auto& [_, id] : exhausted_sources_) newest = std::max(newest, id);
  final_checkpoint_ = newest + 1;
  graph_->get_checkpoint_coordinator()->pause_periodic_triggers();
  maybe_finish_sources();
  if (!sources_finished_) request_final_checkpoint();
}

bool final_checkpoint_tracker::final_checkpoint_completed() const {
  const auto* coordinator = graph_->get_checkpoint_coordinator();
  return final_checkpoint_ && coordinator->core().latest_completed_id() >= *final_checkpoint_;
}

void final_checkpoint_tracker::maybe_finish_sources() {
  // A job failing over aborts what is pending (which ends requests): its sources are about to
  // be cancelled, not finished.
  if (sources_finished_ || graph_->status() != job_status::running ||
      !final_checkpoint_completed())
    return;
  // Ticks are paused, so what is in flight drains; each end calls back here.
  const auto& core = std::as_const(*graph_->get_checkpoint_coordinator()).core();
  if (core.num_pending() > 0 || core.is_triggering() || core.num_queued_requests() > 0) return;
  // A subtask that failed or was canceled ends the checkpoints waiting for it before the job
  // master fails the job over (checkpoint_coordinator::task_ended): the job is still RUNNING
  // then, but about to fail over, not to finish.
  for (const execution_vertex* v : graph_->all_execution_vertices())
    if (v->state() == execution_state::failed || v->state() == execution_state::canceled) return;
  sources_finished_ = true;
  for (const auto& [attempt, _] : exhausted_sources_) finish_(attempt);
}

void final_checkpoint_tracker::request_final_checkpoint() {
  if (graph_->status() != job_status::running) return;
  std::weak_ptr<final_checkpoint_tracker> weak = weak_from_this();
  const std::uint64_t run = run_;
  graph_->get_checkpoint_coordinator()->trigger_checkpoint(
      checkpoint_trigger_kind::manual, {}, [weak, run](const request_finished& r) {
        auto self = weak.lock();
        if (!self || !r.failure || self->run_ != run || self->sources_finished_) return;
        // Another checkpoint after the sources' last records may have completed meanwhile:
        // then the sources end once what is in flight has ended (the end listener).
        if (!self->final_checkpoint_completed()) self->retry_later();
      });
}

void final_checkpoint_tracker::retry_later() {
  auto timer = std::make_shared<coordinator_timer>(executor_);
  timer->expires_at(coordinator_clock::from_us(coordinator_clock::now_us() + retry_delay_us));
  std::weak_ptr<final_checkpoint_tracker> weak = weak_from_this();
  timer->async_wait([weak, timer, run = run_](std::error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->run_ != run || self->sources_finished_) return;
    self->request_final_checkpoint();
  });
}

}  // namespace snapflow
