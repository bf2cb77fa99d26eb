#include "cmd/worker_main.hpp"

#include <unistd.h>

#include <array>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "cmd/cpu_affinity.hpp"
#include "cmd/process_logging.hpp"
#include "cmd/program_guard_executor.hpp"
#include "cmd/thread_scheduling.hpp"
#include "engine/runtime/runtime_task_executor.hpp"
#include "engine/runtime/state_file.hpp"
#include "transport/curve_keys.hpp"
#include "transport/endpoint_scope.hpp"
#include "transport/data/network_data_plane.hpp"
#include "transport/stub_task_executor.hpp"
#include "transport/worker_endpoint.hpp"

namespace snapflow {

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr int exit_refused = 3;

std::string default_worker_id() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0 || host[0] == '\0')
    return "worker-" + std::to_string(::getpid());
  return std::string(host.data()) + "-" + std::to_string(::getpid());
}

// This worker's own folder under --local-state-dir, emptied: what an earlier process with the
// same id left (one killed with kill -9 removes nothing) is of no use to anyone, and two
// workers sharing the folder keep apart.
result<std::string> own_local_state_dir(const std::string& root, const std::string& worker_id) {
  std::error_code ec;
  const auto dir = std::filesystem::absolute(root, ec) / ("worker-" + file_safe_uid(worker_id));
  if (ec) return error{"--local-state-dir '" + root + "' cannot be made absolute"};
  if (std::filesystem::remove_all(dir, ec) > 0 && !ec)
    spdlog::info("removed the local state an earlier worker {} left in {}", worker_id,
                 dir.string());
  if (ec) return error{"cannot clear " + dir.string() + ": " + ec.message()};
  if (!std::filesystem::create_directories(dir, ec) && ec)
    return error{"cannot create " + dir.string() + ": " + ec.message()};
  return dir.string();
}

// `plane`: set to the data plane when the executor has one (its figures are logged at exit).
result<std::shared_ptr<task_executor>> make_executor(
    const std::string& name, const worker_context& context, const worker_extensions& extensions,
    std::shared_ptr<data::network_data_plane>& plane_out) {
  if (auto it = extensions.executors.find(name); it != extensions.executors.end())
    return it->second(context);
  if (name == "stub")
    return std::shared_ptr<task_executor>(
        std::make_shared<transport::stub_task_executor>(context.listener,
                                                        context.data_bind_address));
  if (name == "runtime") {
    // Real stream tasks, with their data channels over this worker's data plane.
    data::data_plane_options plane_options;
    plane_options.curve = context.curve;  // CURVE on the control plane means CURVE here too
    plane_options.curve_unvouched_wait_ms = context.curve_peer_wait_ms;
    auto plane = data::network_data_plane::create(context.data_bind_address, plane_options);
    if (!plane) return plane.err();
    plane_out = *plane;
    runtime_task_executor_options options;
    options.operators = context.operators;
    options.registry = context.registry;
    options.data_roots = context.data_roots;
    options.local_state_dir = context.local_state_dir;
    options.rocksdb_block_cache_bytes = context.rocksdb_block_cache_bytes;
    return std::shared_ptr<task_executor>(
        std::make_shared<runtime_task_executor>(context.listener, *plane, options));
  }
  return error{"unknown executor '" + name + "'"};
}

}  // namespace

int worker_main(int argc, char** argv, worker_extensions extensions) {
  const std::string description =
      extensions.description.empty()
          ? "runs the subtasks a snapflow coordinator deploys on it"
          : extensions.description;
  CLI::App app{extensions.program_name + ": " + description, extensions.program_name};
  transport::worker_endpoint_options o;
  std::string id;
  std::string data_bind = "tcp://127.0.0.1:*";
  std::string log_level;
  std::string executor_name = "runtime";
  std::int64_t interval_ms = o.heartbeat_interval.count();
  std::int64_t timeout_ms = o.heartbeat_timeout.count();
  std::string curve_secret;
  std::optional<std::string> cpus;  // set, even empty, when --cpus was given
  std::string scheduling = "batch";
  std::string curve_coordinator_key;

  std::string executor_names = "stub, runtime";
  for (const auto& [name, _] : extensions.executors) executor_names += ", " + name;

  app.add_option("--coordinator", o.coordinator_address,
                 "control endpoint of the coordinator (its 'control=' in the listening line)")
      ->capture_default_str();
  app.add_option("--id,--worker-id", id,
                 "worker id, unique in the cluster; a restarted worker keeps its id "
                 "(default: HOSTNAME-PID)");
  app.add_option("--slots", o.slots, "subtasks this worker runs at once")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--data-bind", data_bind,
                 "where this worker's data channels accept connections, reported to the "
                 "coordinator (the stub executor opens none; the runtime executor binds it; "
                 "with --curve-secret-key they require CURVE too)")
      ->capture_default_str();
  app.add_option("--executor", executor_name, "task executor: " + executor_names)
      ->capture_default_str();
  app.add_option("--log-level", log_level,
                 log_level_names() + " (default: SPDLOG_LEVEL, else info)");
  app.add_option("--heartbeat-interval-ms", interval_ms,
                 "heartbeat and registration retry interval until the coordinator names its own")
      ->check(CLI::Range(1, 3'600'000))
      ->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", timeout_ms,
                 "silence after which the coordinator is given up, until it names its own")
      ->check(CLI::Range(2, 36'000'000))
      ->capture_default_str();
  app.add_option("--max-frame-bytes", o.max_frame_bytes,
                 "largest control message accepted (ZMQ_MAXMSGSIZE)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30))
      ->capture_default_str();
  auto* secret = app.add_option("--curve-secret-key", curve_secret,
                                "require CURVE on every socket: this worker's secret key "
                                "file (PREFIX.secret from keygen). Its data endpoint then "
                                "serves CURVE with this key and lets in only the peers the "
                                "coordinator names in its deployments; its data channels "
                                "connect with CURVE and refuse plaintext peers")
                     ->check(CLI::ExistingFile);
  auto* server = app.add_option("--curve-coordinator-key", curve_coordinator_key,
                                "the coordinator's CURVE public key file (PREFIX.public)")
                     ->check(CLI::ExistingFile);
  secret->needs(server);
  server->needs(secret);
  int curve_peer_wait_ms = worker_context{}.curve_peer_wait_ms;
  app.add_option("--curve-peer-wait-ms", curve_peer_wait_ms,
                 "with CURVE: how long a peer's data connection may wait at the handshake for "
                 "this worker's deployment to name the peer's key before it is refused (peers "
                 "are deployed in no fixed order)")
      ->check(CLI::Range(0, 600'000))
      ->capture_default_str();
  app.add_option("--cpus", cpus,
                 "run this worker's threads on these CPUs only, a list like 0-3,6 (default: "
                 "any); workers on CPUs of their own hand work between their threads without "
                 "cross-CPU wake-ups");
  auto* scheduling_option =
      app.add_option("--scheduling", scheduling,
                     "scheduling policy of this worker's threads: batch (SCHED_BATCH: a woken "
                     "thread does not preempt the running one, so the hand-offs of a "
                     "checkpoint run in fewer slices) or normal (SCHED_OTHER)")
          ->check(scheduling_policy_check, "batch or normal")
          ->capture_default_str();
  std::vector<std::string> data_roots;
  app.add_option("--data-root", data_roots,
                 "a folder jobs' file paths (file sources and sinks) may lead into; repeat for "
                 "more; relative paths resolve against the first. A task naming a path "
                 "outside is refused (default: the working folder)");
  std::string local_state_dir;
  app.add_option("--local-state-dir", local_state_dir,
                 "where tasks keep keyed state on local disk (the rocksdb state backend's "
                 "working folders, one per subtask attempt, removed when it ends), in a folder "
                 "named after the worker's id, emptied at start; default: a temporary folder "
                 "of this worker's own, removed when it exits");
  std::size_t rocksdb_block_cache_mb = default_rocksdb_block_cache_bytes >> 20;
  app.add_option("--rocksdb-block-cache-mb", rocksdb_block_cache_mb,
                 "the block cache of each rocksdb state backend instance (one per keyed "
                 "subtask), in MiB: what a keyed operator's reads of state larger than this "
                 "cost disk reads (default " +
                     std::to_string(default_rocksdb_block_cache_bytes >> 20) + ")")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "allow a --data-bind beyond loopback without CURVE: anyone who reaches it can "
               "feed records into this worker's tasks");
  // Tests only: claim another protocol version to see it refused. Hidden from --help.
  app.add_option("--protocol-version", o.protocol_version, "")->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  if (timeout_ms <= interval_ms) {
    std::cerr << extensions.program_name
              << ": --heartbeat-timeout-ms must be longer than --heartbeat-interval-ms\n";
    return exit_usage;
  }
  if (auto logging = setup_process_logging("worker", log_level); !logging) {
    std::cerr << extensions.program_name << ": " << logging.err().message << "\n";
    return exit_usage;
  }
  // Before any thread starts (ZeroMQ's, the data plane's, the tasks'): they inherit it.
  if (cpus) {
    const auto placed = apply_cpus_option(*cpus);
    if (!placed) {
      std::cerr << extensions.program_name << ": --cpus: " << placed.err().message << "\n";
      return exit_usage;
    }
    spdlog::info("running on CPU {}", format_cpu_list(*placed));
  }
  // Also before any thread starts. The default asks for nothing a process may be refused, yet
  // a sandbox might: then the worker runs on as it would have, with a warning.
  const scheduling_policy policy = parse_scheduling_policy(scheduling).value();
  if (auto applied = apply_scheduling_policy(policy); !applied) {
    if (scheduling_option->count() > 0) {
      std::cerr << extensions.program_name << ": --scheduling: " << applied.err().message
                << "\n";
      return exit_usage;
    }
    spdlog::warn("{}; running with the policy inherited", applied.err().message);
  } else {
    spdlog::info("scheduling policy {}", to_string(policy));
  }
  if (curve_secret.empty() && transport::is_plaintext_risk(data_bind)) {
    if (!insecure) {
      std::cerr << extensions.program_name << ": --data-bind " << data_bind
                << " is reachable beyond this machine and CURVE is off: anyone reaching it "
                   "could feed records into this worker's tasks. Give --curve-secret-key and "
                   "--curve-coordinator-key, bind to loopback, or pass --insecure\n";
      return exit_usage;
    }
    spdlog::warn("--insecure: the data endpoint {} is open beyond loopback without CURVE; "
                 "anyone who reaches it can feed records into this worker's tasks",
                 data_bind);
  }
  if (data_roots.empty()) data_roots.push_back(".");
  for (auto& root : data_roots) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(root, ec);
    if (ec || root.empty()) {
      std::cerr << extensions.program_name << ": --data-root '" << root
                << "' cannot be made absolute\n";
      return exit_usage;
    }
    // As given, made absolute: jobs name their files by the same spelling.
    root = absolute.lexically_normal().string();
    if (root.size() > 1 && root.back() == '/') root.pop_back();
  }
  o.data_roots = data_roots;
  for (const auto& [fingerprint, name] : extensions.programs)
    o.programs.push_back(wire::worker_program{fingerprint, name});
  o.worker_id = id.empty() ? default_worker_id() : id;
  o.heartbeat_interval = std::chrono::milliseconds(interval_ms);
  o.heartbeat_timeout = std::chrono::milliseconds(timeout_ms);
  if (!curve_secret.empty()) {
    if (!transport::curve_available()) {
      std::cerr << extensions.program_name
                << ": CURVE was requested but this libzmq was built without it\n";
      return exit_usage;
    }
    auto keys = transport::read_secret_key_file(curve_secret);
    auto server_key = transport::read_key_file(curve_coordinator_key);
    if (!keys || !server_key) {
      std::cerr << extensions.program_name << ": "
                << (!keys ? keys.err().message : server_key.err().message) << "\n";
      return exit_usage;
    }
    o.curve = transport::curve_client_config{*keys, *server_key};
  }

  // The ZeroMQ context outlives the io_context: sockets still owned by pending coroutines are
  // closed when the io_context goes, and only then may the context terminate.
  zmq::context_t zmq_context(1);
  asio::io_context io{1};  // the worker's control thread: this one, alone
  auto endpoint = std::make_shared<transport::worker_endpoint>(io.get_executor(), zmq_context, o);

  auto operators = std::make_shared<operator_factory>(operator_factory::builtin());
  if (extensions.register_operators) extensions.register_operators(*operators);
  auto registry = std::make_shared<operator_registry>(operator_registry::builtin());
  if (extensions.register_kinds) extensions.register_kinds(*registry);
  worker_context context;
  context.worker_id = o.worker_id;
  context.slots = o.slots;
  context.data_bind_address = data_bind;
  context.data_roots = data_roots;
  if (!local_state_dir.empty()) {
    auto own = own_local_state_dir(local_state_dir, o.worker_id);
    if (!own) {
      std::cerr << extensions.program_name << ": " << own.err().message << "\n";
      return exit_usage;
    }
    context.local_state_dir = *own;
  }
  context.rocksdb_block_cache_bytes = rocksdb_block_cache_mb << 20;
  if (o.curve) context.curve = o.curve->keys;
  context.curve_peer_wait_ms = curve_peer_wait_ms;
  context.listener = endpoint->listener();
  context.operators = std::move(operators);
  context.registry = std::move(registry);
  context.control_executor = io.get_executor();
  std::shared_ptr<data::network_data_plane> plane;
  auto executor = make_executor(executor_name, context, extensions, plane);
  if (!executor) {
    std::cerr << extensions.program_name << ": " << executor.err().message << "\n";
    return exit_usage;
  }
  std::shared_ptr<task_executor> tasks = *executor;
  if (!extensions.programs.empty())
    tasks = std::make_shared<program_guard_executor>(tasks, context.listener, extensions.programs);
  endpoint->set_executor(tasks);

  int exit_code = exit_ok;
  auto shutdown = [&] {
    tasks->cancel_all();
    endpoint->stop();
    io.stop();
  };
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const std::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: stopping every task and exiting", signal);
    shutdown();
  });
  const auto started = endpoint->start([&](const std::string& why) {
    std::cerr << extensions.program_name << ": " << why << "\n";
    exit_code = exit_refused;
    shutdown();
  });
  if (started) {
    std::cerr << extensions.program_name << ": cannot connect to " << o.coordinator_address
              << ": " << started.message() << "\n";
    return exit_usage;
  }
  std::string root_list;
  for (const auto& root : data_roots) root_list += (root_list.empty() ? "" : ", ") + root;
  spdlog::info("worker {} started: coordinator {}, {} slots, executor {}, data endpoint {}, "
               "data roots {}{}",
               o.worker_id, o.coordinator_address, o.slots, executor_name, tasks->data_endpoint(),
               root_list,
               o.curve ? ", CURVE (control and data)" : "");
  try {
    io.run();
  } catch (const std::exception& e) {
    spdlog::critical("worker stopped: {}", e.what());
    exit_code = exit_failure;
  }
  // Let the coroutines see their sockets closed and end while the io_context still runs.
  endpoint->stop();
  io.restart();
  io.poll();
  if (plane) {
    // What backpressure held the input buffers to (tests compare it with their bound).
    const data::data_plane_counters c = plane->counters();
    spdlog::info(
        "data plane: buffered_bytes_high_water={} buffered_bytes={} frames_received={} "
        "credits_sent={} bad_frames={} overflow_batches={} handshakes_refused={} keys_denied={} "
        "wrong_key_frames={}",
        plane->buffered_bytes_high_water(), plane->buffered_bytes(), c.frames_received,
        c.credits_sent, c.bad_frames, c.overflow_batches, c.handshakes_refused, c.keys_denied,
        c.wrong_key_frames);
  }
  spdlog::info("worker {} stopped", o.worker_id);
  flush_process_logging();
  return exit_code;
}

}  // namespace snapflow
