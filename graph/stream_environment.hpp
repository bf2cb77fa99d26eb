#pragma once

#include <chrono>
#include <map>
#include <string>

#include "graph/stream_graph.hpp"

namespace snapflow {

class stream_environment;
class keyed_stream;

using operator_params = std::map<std::string, std::string>;

// A handle on one declared operator's output. Cheap to copy; the environment owns the graph.
class data_stream {
 public:
  data_stream map(std::string kind, operator_params params = {});
  data_stream map(map_function fn, std::string name = "map");
  // Event time and watermarks from here on (docs/event-time.md).
  data_stream assign_timestamps(timestamp_assigner assigner,
                                std::string name = "timestamps_and_watermarks");
  data_stream filter(std::string kind, operator_params params = {});
  data_stream filter(filter_function fn, std::string name = "filter");
  data_stream flat_map(std::string kind, operator_params params = {});
  data_stream flat_map(flat_map_function fn, std::string name = "flat_map");
  // A non-keyed process function with operator list state (user_stateful_process).
  data_stream process(stateful_process_function fn, std::string name = "process");
  // Hash-partitions by record.key into key groups; key_by(fn) first rewrites the key.
  keyed_stream key_by();
  keyed_stream key_by(key_function fn, std::string name = "key_by");
  // The next operator reads this stream round robin / fully replicated / one-to-one.
  data_stream rebalance() const;
  data_stream broadcast() const;
  data_stream forward() const;
  data_stream add_sink(std::string kind, operator_params params = {});

  // Settings of the operator this handle points at.
  data_stream& uid(std::string uid);
  data_stream& name(std::string name);
  data_stream& set_parallelism(std::uint32_t parallelism);
  data_stream& set_max_parallelism(std::uint32_t max_parallelism);
  // Declares that this operator's kind is one only the workers know (registered by a custom
  // worker binary, see docs/job-file.md "Custom operator kinds"), and its role. The job's shape
  // is then checked by that role and its parameters are left to the worker; a built-in kind
  // given a role other than its own is refused when the job graph is built.
  data_stream& custom_role(operator_role role);

  vertex_id id() const { return id_; }

 private:
  friend class stream_environment;
  friend class keyed_stream;
  data_stream(stream_environment* env, vertex_id id, std::optional<partitioning> next)
      : env_(env), id_(id), next_part_(next) {}
  data_stream then(std::string kind, std::string name, operator_params params,
                   std::shared_ptr<const user_function> fn, std::optional<partitioning> part);

  stream_environment* env_;
  vertex_id id_;
  std::optional<partitioning> next_part_;  // partitioning of the edge to the next operator
};

// A stream partitioned by key: what keyed operators (and their state) consume.
class keyed_stream {
 public:
  data_stream process(std::string kind, operator_params params = {});
  data_stream process(process_function fn, std::string name = "process");
  // With keyed timers (docs/event-time.md).
  data_stream process(timed_process_function fn, std::string name = "process");
  data_stream sum() { return process("keyed_sum"); }
  data_stream count() { return process("keyed_count"); }

 private:
  friend class data_stream;
  explicit keyed_stream(data_stream input) : input_(input) {}
  data_stream input_;
};

// The user's entry point, Flink's StreamExecutionEnvironment: declare sources, operators and
// sinks, configure parallelism and checkpointing, then build the job graph that is submitted.
// Every setter validates at once and throws invalid_config naming the setting and its range.
class stream_environment {
 public:
  stream_environment& set_job_name(std::string name);
  // Whether key selectors run in the operator that feeds them where they can (the default; as
  // Flink's operator chaining) or each in a task of its own (graph/key_selector_fusion.hpp).
  stream_environment& set_key_selector_fusion(bool on);
  stream_environment& set_parallelism(std::uint32_t parallelism);
  stream_environment& set_max_parallelism(std::uint32_t max_parallelism);

  data_stream add_source(std::string kind, operator_params params = {});

  stream_environment& enable_checkpointing(
      std::chrono::milliseconds interval, checkpointing_mode mode = checkpointing_mode::exactly_once);
  stream_environment& set_checkpoint_timeout(std::chrono::milliseconds timeout);
  stream_environment& set_min_pause_between_checkpoints(std::chrono::milliseconds pause);
  stream_environment& set_max_concurrent_checkpoints(std::int32_t max_concurrent);
  stream_environment& set_tolerable_checkpoint_failures(std::int32_t tolerable);
  stream_environment& set_retained_checkpoints(std::int32_t retained);
  stream_environment& set_externalized_retention(externalized_retention retention);
  // Unaligned checkpoints (exactly-once only): a barrier overtakes the records buffered in the
  // channels, which are persisted with the checkpoint (docs/unaligned-checkpoints.md).
  stream_environment& enable_unaligned_checkpoints(bool enabled = true);
  // With unaligned checkpoints: start aligned and go unaligned once alignment took `timeout`
  // (0, the default: unaligned from the first barrier).
  stream_environment& set_aligned_checkpoint_timeout(std::chrono::milliseconds timeout);
  // The most bytes of records one channel holds for its consumer (0, the default: bounded by
  // batch counts only; docs/unaligned-checkpoints.md, "Bounded in-flight data").
  stream_environment& set_max_in_flight_bytes(std::int64_t bytes);
  // Buffer debloating: each subtask bounds its input channels to `target`'s worth of the
  // throughput it consumes, at most max_in_flight_bytes (which it needs).
  stream_environment& enable_buffer_debloat(
      std::chrono::milliseconds target = std::chrono::milliseconds(1000));
  stream_environment& set_checkpoint_dir(std::string dir);
  stream_environment& set_savepoint_dir(std::string dir);
  stream_environment& set_checkpoint_stats_history_size(std::int32_t size);
  stream_environment& set_state_backend(std::string name);
  // Incremental checkpoints with the rocksdb backend (ignored with hashmap).
  stream_environment& enable_incremental_checkpoints(bool enabled = true);
  // States that encode to at most `bytes` travel in the acknowledgement, not a file (0: never).
  stream_environment& set_inline_state_max_bytes(std::int32_t bytes);

  // The job's own restart strategy, used by the job master instead of the coordinator's
  // default. Throws invalid_config naming the setting when it is out of range.
  stream_environment& set_restart_strategy(const restart_strategy_config& restart);
  const std::optional<restart_strategy_config>& get_restart_strategy() const {
    return graph_.restart;
  }

  // The checkpoint configuration as it stands (defaults if checkpointing was never enabled).
  const checkpoint_config& get_checkpoint_config() const { return config_; }
  bool checkpointing_enabled() const { return graph_.checkpointing.has_value(); }

  const stream_graph& graph() const { return graph_; }
  stream_graph& graph() { return graph_; }
  job_graph build_job_graph(const operator_registry& registry = operator_registry::builtin()) const;

 private:
  friend class data_stream;
  // Applies `change` to a copy of the config, validates, and only then commits it.
  template <typename Change>
  stream_environment& update_config(Change change);

  stream_graph graph_;
  checkpoint_config config_;
};

}  // namespace snapflow
