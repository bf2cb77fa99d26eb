#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "engine/paths/confined_folder.hpp"
#include "engine/paths/scratch_folder.hpp"
#include "engine/runtime/channel_factory.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/snapshot_writer.hpp"
#include "engine/runtime/stream_task.hpp"
#include "engine/runtime/task_executor.hpp"
#include "graph/job_graph.hpp"
#include "graph/operator_registry.hpp"

namespace snapflow {

struct runtime_task_executor_options {
  std::size_t batch_size = 256;
  std::size_t snapshot_threads = 2;
  std::shared_ptr<const operator_factory> operators;  // operator_factory::builtin() when null
  // Where operator roles (source, keyed, ...) come from: a custom worker's registry holds its
  // own kinds beside the built-in ones; operator_registry::builtin() when null. A kind it does
  // not know is a source without inputs, keyed when every input is hash-partitioned (it gets
  // keyed state, which a kind that never touches it does not notice), a transform otherwise.
  std::shared_ptr<const operator_registry> registry;
  // The folders tasks' file parameters (param_spec::is_path) must lie under; relative ones
  // resolve against the first. A deployment naming a path outside fails, saying why. Empty:
  // not checked (in-process use; snapflow-worker always gives its --data-root folders).
  std::vector<std::string> data_roots;
  // Where tasks keep local working files (the rocksdb state backend's instances, one folder per
  // subtask attempt, removed when it ends). Empty: a folder of this executor's own under the
  // system's temporary folder, removed with the executor.
  std::filesystem::path local_state_dir;
  // Each rocksdb instance's block cache (--rocksdb-block-cache-mb).
  std::size_t rocksdb_block_cache_bytes = default_rocksdb_block_cache_bytes;
};

// The worker's task_executor over real stream_tasks (Flink's TaskExecutor): deploy decodes the
// job graph, wires the subtask's input and output channels through the channel_factory (the
// worker's data plane) the way local_cluster wires local ones, restores, and starts the task.
// The other members forward to the task of that attempt. Tasks report through the
// task_executor_listener: states, acks and declines, and source exhaustion for the
// final-checkpoint rule.
//
// Called on the worker's control thread only. Tasks that ended are reaped (joined) on the next
// call, so the control thread never waits for a running task.
class runtime_task_executor final : public task_executor {
 public:
  runtime_task_executor(std::shared_ptr<task_executor_listener> listener,
                        std::shared_ptr<channel_factory> channels,
                        runtime_task_executor_options options = {});
  ~runtime_task_executor() override;  // cancels and joins every task

  void deploy(const task_deployment_descriptor& descriptor) override;
  void cancel(const job_id& job, const execution_attempt_id& attempt) override;
  void trigger_checkpoint(const job_id& job, const execution_attempt_id& attempt,
                          checkpoint_id id, std::int64_t timestamp_us,
                          const checkpoint_options& options) override;
  void notify_checkpoint_complete(const job_id& job, const execution_attempt_id& attempt,
                                  checkpoint_id id) override;
  void notify_checkpoint_aborted(const job_id& job, const execution_attempt_id& attempt,
                                 checkpoint_id id, checkpoint_id latest_completed) override;
  void finish(const job_id& job, const execution_attempt_id& attempt) override;
  void cancel_all() override;
  std::string data_endpoint() const override;
  std::vector<task_io_counters> take_io_counters() override;

  std::size_t running_tasks() const;

 private:
  class reporter;
  using task_key = std::pair<job_id, execution_attempt_id>;

  stream_task* find(const job_id& job, const execution_attempt_id& attempt);
  void reap();
  void fail_deploy(const task_deployment_descriptor& d, const std::string& why);
  // Where subtask `index` of the neighbour `vertex` runs (endpoint, and public key with
  // CURVE), or why no channel with it can be opened.
  result<channel_peer> peer_of(const task_deployment_descriptor& d, const job_vertex& vertex,
                               std::uint32_t index) const;

  std::shared_ptr<task_executor_listener> listener_;
  std::shared_ptr<channel_factory> channels_;
  runtime_task_executor_options options_;
  std::vector<confined_folder> data_roots_;  // options_.data_roots
  std::unique_ptr<scratch_folder> own_local_dir_;  // when options_.local_state_dir was empty
  std::shared_ptr<snapshot_writer> writer_;
  std::map<task_key, std::unique_ptr<stream_task>> tasks_;
  // Final counters of reaped tasks not yet taken (bounded: the oldest go first).
  std::vector<task_io_counters> ended_io_;
};

}  // namespace snapflow
