#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <asio/any_io_executor.hpp>

#include "engine/jobmaster/execution_graph.hpp"

namespace snapflow {

// Ends a bounded job's sources behind a final checkpoint, for the job master and the in-process
// local_cluster alike. An exactly-once sink commits a transaction only on notify-complete, so
// the sources may not finish (and the job may not end) before a checkpoint taken after every
// source's last record has completed:
//   1. each source reports the id of the last barrier it emitted before running out;
//   2. once every source did and the job is RUNNING, the final checkpoint id is one above the
//      newest of those and of what had completed before this run (any checkpoint from that id
//      on covers every record of this run), periodic ticks
//      pause (a checkpoint triggered now would only be aborted as the job ends and show as
//      failed), and a checkpoint is requested at once;
//   3. a failed request is repeated 10 ms later (ticks are paused, nothing else would retry);
//   4. once a checkpoint at or above the final id completed and nothing is pending, triggering
//      or queued (the coordinator calls back after every request ends), every source is told
//      to finish: a checkpoint still pending then could never complete.
// The decision is central rather than each source's own: a lost notify-complete at one source
// must not leave it waiting after another source ended, since no checkpoint can be triggered
// once a source is FINISHED.
//
// Lives on the coordinator's executor, with the graph it reads; built only for a checkpointed
// job. reset() starts over for a new run after a failover.
class final_checkpoint_tracker : public std::enable_shared_from_this<final_checkpoint_tracker> {
 public:
  // Tells one source's current attempt to finish.
  using finish_source = std::function<void(const execution_attempt_id&)>;

  // `num_sources`: the subtasks that report running out (the checkpoint's trigger vertices).
  // Registers itself with the graph's checkpoint coordinator, which must exist.
  static std::shared_ptr<final_checkpoint_tracker> create(asio::any_io_executor executor,
                                                          std::shared_ptr<execution_graph> graph,
                                                          std::size_t num_sources,
                                                          finish_source finish);

  // A source ran out after emitting barrier `last_barrier` (0: none). The caller filters stale
  // attempts; reports after the decision (step 2) are ignored.
  void source_exhausted(const execution_attempt_id& attempt, checkpoint_id last_barrier);
  // The job became RUNNING: sources that ran out before it did are decided on now. What is
  // completed by then (a checkpoint restored from) was taken before this run's records.
  void job_running();
  // A failover starts a new run: forget every report; requests of the old run are ignored.
  void reset();

  // Set once every source ran out (step 2).
  std::optional<checkpoint_id> final_checkpoint() const { return final_checkpoint_; }
  bool sources_finished() const { return sources_finished_; }

 private:
  final_checkpoint_tracker(asio::any_io_executor executor, std::shared_ptr<execution_graph> graph,
                           std::size_t num_sources, finish_source finish);
  void start_if_all_exhausted();
  void request_final_checkpoint();
  void retry_later();
  void maybe_finish_sources();
  bool final_checkpoint_completed() const;

  asio::any_io_executor executor_;
  std::shared_ptr<execution_graph> graph_;
  std::size_t num_sources_;
  finish_source finish_;
  std::uint64_t run_ = 0;  // bumped by reset(): callbacks of an earlier run do nothing
  std::map<execution_attempt_id, checkpoint_id> exhausted_sources_;
  std::optional<checkpoint_id> final_checkpoint_;
  bool sources_finished_ = false;
  // The latest completed checkpoint when this run became RUNNING: the final checkpoint must be
  // newer, even when no source emitted a barrier in this run.
  checkpoint_id completed_before_run_ = 0;
};

}  // namespace snapflow
