#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "common/result.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/task_executor.hpp"
#include "engine/state/state_backend_kind.hpp"
#include "graph/operator_registry.hpp"
#include "transport/curve_keys.hpp"

namespace snapflow {

// What an executor factory gets to build the worker's task_executor with.
struct worker_context {
  std::string worker_id;
  std::uint32_t slots = 1;
  std::string data_bind_address;  // --data-bind
  // --data-root, absolute: where tasks' file parameters may lead (the first one is where
  // relative ones resolve). Never empty: the worker's working folder by default.
  std::vector<std::string> data_roots;
  // Where tasks keep state on local disk (the rocksdb backend's working folders); empty: a
  // temporary folder of the worker's own, removed when it exits.
  std::string local_state_dir;
  // --rocksdb-block-cache-mb, in bytes: each rocksdb instance's block cache.
  std::size_t rocksdb_block_cache_bytes = default_rocksdb_block_cache_bytes;
  // With --curve-secret-key: this worker's key pair, which its data plane must use too (a
  // CURVE server on the data endpoint, CURVE clients to its peers). Without it, none.
  std::optional<transport::curve_key_pair> curve;
  // With CURVE: how long a peer's data connection may wait for this worker's deployment to
  // name its key (--curve-peer-wait-ms; data_plane_options::curve_unvouched_wait_ms).
  int curve_peer_wait_ms = 10'000;
  // Where tasks report to (thread-safe; see worker_endpoint::listener).
  std::shared_ptr<task_executor_listener> listener;
  // The built-in operator kinds plus those worker_extensions::register_operators added.
  std::shared_ptr<const operator_factory> operators;
  // Their shapes (role, parameters): the built-in ones plus worker_extensions::register_kinds.
  // Executors take operator roles from it (a custom keyed kind gets keyed state).
  std::shared_ptr<const operator_registry> registry;
  // The worker's control thread: every task_executor member is called there.
  asio::any_io_executor control_executor;
};

using executor_factory =
    std::function<result<std::shared_ptr<task_executor>>(const worker_context& context)>;

// How a custom worker binary extends the stock one: its own operator kinds, its own executors.
struct worker_extensions {
  std::string program_name = "snapflow-worker";
  std::string description;  // the first line of --help; a default when blank
  // Adds kinds to the operator factory executors build tasks with. Register the same kind
  // names in the operator_registry the coordinator validates job graphs against.
  std::function<void(operator_factory&)> register_operators;
  // Declares the shape of those kinds (above all their role: a keyed kind gets keyed state,
  // snapshotted and restored with each checkpoint). A kind left out here is still run: as a
  // source without inputs, keyed when all its inputs are hash-partitioned, else a transform.
  std::function<void(operator_registry&)> register_kinds;
  // More executors, selected with --executor NAME. "runtime" (the default: stream tasks over
  // the network data plane) and "stub" are built in.
  std::map<std::string, executor_factory> executors;
  // The user programs whose callables register_operators gave this worker, fingerprint ->
  // program name (cmd/program.hpp fills it). Sent at registration, so the coordinator deploys
  // those programs' jobs here; a deployed job naming another program is refused. Empty: the
  // worker runs only jobs that name no program.
  std::map<std::string, std::string> programs;
};

// The whole worker process: options (--help), logging, the control-plane endpoint, the task
// executor, signals. Returns the process exit code: 0 after SIGINT/SIGTERM, 2 for bad options,
// 3 when the coordinator refuses this worker (the reason is printed on stderr), 1 otherwise.
// Link snapflow_worker_lib and call it from main() to build a custom worker.
int worker_main(int argc, char** argv, worker_extensions extensions = {});

}  // namespace snapflow
