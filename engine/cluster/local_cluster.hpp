#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/thread_pool.hpp>

#include "engine/jobmaster/execution_graph.hpp"
#include "engine/jobmaster/final_checkpoint_tracker.hpp"
#include "engine/paths/scratch_folder.hpp"
#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/snapshot_writer.hpp"
#include "engine/runtime/stream_task.hpp"
#include "graph/job_graph.hpp"
#include "graph/operator_registry.hpp"

namespace snapflow {

// A control-plane message between the coordinator and a subtask, as fault hooks see it.
struct control_event {
  enum class kind : std::uint8_t { trigger, notify_complete, notify_abort, acknowledge, decline };
  kind what = kind::trigger;
  execution_attempt_id attempt;
  checkpoint_id id = 0;
};

std::string_view to_string(control_event::kind k);

// What a fault hook does to one control message.
struct fault_decision {
  enum class action : std::uint8_t { deliver, drop, duplicate, delay };
  action what = action::deliver;
  std::chrono::milliseconds delay{0};  // for delay
  // After handling the message, crash the subtask it is for (trigger, notify) or from (ack,
  // decline), as if its process died.
  bool kill_subtask = false;
};

// Called for every control message, on the thread that sends it (the coordinator thread for
// triggers and notifications, task and snapshot-writer threads for acks and declines): must be
// thread-safe and quick.
using fault_hook = std::function<fault_decision(const control_event&)>;

struct local_cluster_options {
  // Checkpoints go to <state_dir>/<job id>/chk-<id>, with the id counter next to them. Needed
  // when the job checkpoints.
  std::filesystem::path state_dir;
  // Resume from the latest completed checkpoint found in <state_dir>/<job id> (fresh start when
  // there is none).
  bool restore_latest = false;
  std::size_t channel_capacity_batches = 4;
  std::size_t batch_size = 128;
  std::size_t snapshot_threads = 2;
  std::shared_ptr<const operator_factory> operators;  // operator_factory::builtin() when null
  const operator_registry* registry = nullptr;        // operator_registry::builtin() when null
  fault_hook faults;
  // Where tasks keep local working files (the rocksdb state backend's instances, one folder per
  // subtask attempt, removed when it ends). Empty: a folder of this cluster's own under the
  // system's temporary folder, removed with the cluster.
  std::filesystem::path local_state_dir;
  // Each rocksdb instance's block cache.
  std::size_t rocksdb_block_cache_bytes = default_rocksdb_block_cache_bytes;
};

// Runs a whole job in one process (Flink's MiniCluster): the real execution graph and checkpoint
// coordinator on a coordinator thread, one stream_task thread per subtask wired through
// local_channels, the coordinator's disk work on an I/O thread and snapshots on a writer pool.
//
// Why a layer of its own (engine/cluster, target snapflow_cluster): it composes the job
// master's pieces (execution graph, final checkpoint tracker, state assignment) with the task
// runtime (what a worker process does, times every worker) and drives them the way a test needs
// (fault hooks, kill). Sitting above both keeps engine/runtime free of the job master, as the
// worker binary needs it, and keeps engine/jobmaster free of running tasks.
//
// Job status: CREATED -> RUNNING once every task runs -> FINISHED once every task finished; a
// failed task makes it FAILING, every task is cancelled, then FAILED (no restart here: a new
// local_cluster with restore_latest resumes from the latest completed checkpoint, which a
// failed job keeps). The final checkpoint: when every source emitted its last record, the
// sources are told to end once a checkpoint taken after that completed, and one is requested
// at once, so the exactly-once sink has committed everything before the job is FINISHED.
class local_cluster {
 public:
  local_cluster(job_graph job, local_cluster_options options);
  ~local_cluster();
  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  // Builds the execution graph, restores if asked, deploys and starts every task.
  result<void> start();
  // Blocks until the job reached a globally terminal status or `timeout` passed; returns the
  // status then.
  job_status wait(std::chrono::milliseconds timeout);
  // start() and wait(); a job still running at the timeout is cancelled and reported as an
  // error.
  result<job_status> run(std::chrono::milliseconds timeout);
  void cancel();

  // Crashes one subtask (current attempt) as if its process died.
  void kill_task(subtask_id subtask, std::string cause = "killed by test");
  // Blocks until at least `count` checkpoints completed in this run, or the job ended, or the
  // timeout passed; true in the first case.
  bool wait_for_completed_checkpoints(std::size_t count, std::chrono::milliseconds timeout);

  job_status status() const;
  const job_graph& job() const { return job_; }
  std::optional<checkpoint_id> restored_checkpoint() const;
  checkpoint_id latest_completed_checkpoint() const;
  std::size_t completed_checkpoints() const;
  std::optional<std::string> failure_cause() const;
  // Per subtask, records taken from its inputs (sinks: records written).
  std::uint64_t records_in(subtask_id subtask) const;
  // Per subtask (its running attempt): the byte bound of each of its input channels
  // (stream_task::in_flight_bytes_bound), and the bytes of records queued on them.
  std::uint64_t in_flight_bytes_bound(subtask_id subtask) const;
  std::uint64_t buffered_input_bytes(subtask_id subtask) const;

 private:
  class gateway;
  class responder;
  class listener;

  result<void> start_on_coordinator();
  result<void> deploy(const std::optional<completed_checkpoint>& restore);
  void on_task_state(const execution_attempt_id& attempt, execution_state state,
                     const std::string& message);
  void on_source_exhausted(const execution_attempt_id& attempt, checkpoint_id last_barrier);
  void fail_job(const std::string& cause);
  void cancel_all_tasks();
  void maybe_end();
  void set_status(job_status status);
  stream_task* find_task(const execution_attempt_id& attempt) const;
  fault_decision decide(const control_event& event) const;
  void note_completed(checkpoint_id id);
  void shutdown();

  job_graph job_;
  local_cluster_options options_;

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::thread_pool io_pool_{1};
  std::thread io_thread_;
  std::unique_ptr<scratch_folder> own_local_dir_;  // when options_.local_state_dir was empty
  std::shared_ptr<snapshot_writer> writer_;

  // Coordinator thread only, after start.
  std::shared_ptr<execution_graph> graph_;
  std::size_t num_running_ = 0;
  std::size_t num_terminal_ = 0;
  // Ends the sources behind a final checkpoint; with checkpointing only.
  std::shared_ptr<final_checkpoint_tracker> job_end_;

  // Fixed once deployed; read from any thread.
  std::vector<std::shared_ptr<local_channel>> channels_;
  std::vector<std::unique_ptr<stream_task>> tasks_;
  std::map<execution_attempt_id, stream_task*> task_by_attempt_;
  std::shared_ptr<gateway> gateway_;
  std::shared_ptr<responder> responder_;
  std::shared_ptr<listener> listener_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  job_status status_ = job_status::created;
  std::optional<checkpoint_id> restored_;
  checkpoint_id latest_completed_ = 0;
  std::size_t completed_count_ = 0;
  std::optional<std::string> failure_cause_;
  bool started_ = false;
  bool tasks_started_ = false;
};

}  // namespace snapflow
