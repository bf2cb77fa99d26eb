// snapflow-coordinator: plans jobs, deploys their subtasks onto workers and runs their
// checkpoint coordinators; serves the REST API and the web page. Wiring only: the logic lives in
// engine/ (dispatcher, job masters) and transport/ (coordinator_endpoint, rest_server).
#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/signal_set.hpp>
#include <asio/thread_pool.hpp>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "cmd/cpu_affinity.hpp"
#include "cmd/process_logging.hpp"
#include "cmd/thread_scheduling.hpp"
#include "engine/jobmaster/dispatcher.hpp"
#include "transport/coordinator_endpoint.hpp"
#include "transport/curve_keys.hpp"
#include "transport/endpoint_scope.hpp"
#include "transport/dispatcher_event_handler.hpp"
#include "transport/rest/listen_socket.hpp"
#include "transport/rest/rest_server.hpp"
#include "transport/zap_handler.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr const char* program = "snapflow-coordinator";

// Disk work of the job side (job files, checkpoint metadata, discards): a few threads, so one
// slow fsync does not hold up the next checkpoint's.
constexpr std::size_t io_threads = 2;

int keygen(const std::string& prefix) {
  auto keys = snapflow::transport::generate_curve_key_pair();
  if (!keys) {
    std::cerr << program << " keygen: " << keys.err().message << "\n";
    return exit_failure;
  }
  if (prefix.empty()) {
    std::cout << "public " << keys->public_key << "\nsecret " << keys->secret_key << "\n";
    return exit_ok;
  }
  if (auto written = snapflow::transport::write_key_pair(prefix, *keys); !written) {
    std::cerr << program << " keygen: " << written.err().message << "\n";
    return exit_failure;
  }
  std::cout << "wrote " << prefix << ".public and " << prefix << ".secret\n";
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace snapflow;
  CLI::App app{std::string(program) +
                   ": runs snapflow jobs on registered workers, with durable checkpoints",
               program};
  transport::coordinator_endpoint_options o;
  std::string state_dir = "snapflow-state";
  std::string rest_host = "127.0.0.1";
  int rest_port = 8081;
  std::string log_level;
  std::int64_t interval_ms = o.heartbeat_interval.count();
  std::int64_t timeout_ms = o.heartbeat_timeout.count();
  std::int64_t slot_wait_ms = 300'000;
  std::int64_t connection_timeout_ms = o.connection_timeout.count();
  std::string curve_secret;
  std::string curve_allowlist;
  std::string key_prefix;
  std::optional<std::string> cpus;  // set, even empty, when --cpus was given
  std::string io_thread_scheduling = "batch";
  std::string rest_token_file;
  std::string rest_tls_cert;
  std::string rest_tls_key;
  bool insecure_rest = false;
  std::string savepoint_root;  // default: <state-dir>/savepoints
  bool allow_savepoint_anywhere = false;

  app.add_option("--bind", o.bind_address,
                 "control endpoint the workers connect to (tcp://HOST:* picks a free port); "
                 "beyond loopback it needs CURVE (--curve-secret-key) or --insecure")
      ->capture_default_str();
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "allow a --bind beyond loopback without CURVE: anyone who reaches it can "
               "register workers and speak for them");
  app.add_option("--state-dir", state_dir, "jobs and checkpoints are kept here")
      ->capture_default_str();
  app.add_option("--rest-host", rest_host, "REST API and web page address")->capture_default_str();
  app.add_option("--rest-port", rest_port, "REST API and web page port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--rest-token-file", rest_token_file,
                 "file holding the bearer token that REST calls which change anything (POST, "
                 "PATCH, PUT, DELETE) must send; GETs stay open");
  auto* tls_cert = app.add_option("--rest-tls-cert", rest_tls_cert,
                                  "serve REST over HTTPS with this PEM certificate chain");
  auto* tls_key = app.add_option("--rest-tls-key", rest_tls_key,
                                 "the PEM private key of --rest-tls-cert");
  tls_cert->needs(tls_key);
  tls_key->needs(tls_cert);
  app.add_flag("--insecure-rest", insecure_rest,
               "allow REST on a non-loopback address without --rest-token-file (anyone who "
               "reaches the port can submit and cancel jobs)");
  app.add_option("--savepoint-root", savepoint_root,
                 "REST and CLI savepoint targets, jobs' savepoint_dir and savepoints to "
                 "restore from lie under this folder (default: <state-dir>/savepoints)");
  app.add_flag("--allow-savepoint-anywhere", allow_savepoint_anywhere,
               "also accept absolute savepoint targets and restore sources anywhere");
  app.add_option("--log-level", log_level,
                 log_level_names() + " (default: SPDLOG_LEVEL, else info)");
  app.add_option("--heartbeat-interval-ms", interval_ms, "how often workers heartbeat")
      ->check(CLI::Range(1, 3'600'000))
      ->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", timeout_ms,
                 "silence after which a worker is declared lost")
      ->check(CLI::Range(2, 36'000'000))
      ->capture_default_str();
  app.add_option("--connection-timeout-ms", connection_timeout_ms,
                 "a worker whose control connection answers no ZMTP ping for this long is "
                 "lost (a closed connection is lost at once); 0: no pings")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option("--slot-wait-timeout-ms", slot_wait_ms,
                 "how long a job waits for enough free slots before it fails")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{86'400'000}))
      ->capture_default_str();
  app.add_option("--max-frame-bytes", o.max_frame_bytes,
                 "largest control message accepted; a peer sending a larger one is "
                 "disconnected (ZMQ_MAXMSGSIZE)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30))
      ->capture_default_str();
  auto* secret = app.add_option("--curve-secret-key", curve_secret,
                                "require CURVE: the coordinator's secret key file "
                                "(PREFIX.secret from keygen)")
                     ->check(CLI::ExistingFile);
  auto* allow = app.add_option("--curve-allowlist", curve_allowlist,
                               "the worker public keys let in: one Z85 key per line, "
                               "optionally followed by the only worker id it may register")
                    ->check(CLI::ExistingFile);
  secret->needs(allow);
  allow->needs(secret);
  app.add_option("--cpus", cpus,
                 "run the coordinator's threads on these CPUs only, a list like 0-3,6 "
                 "(default: any)");
  app.add_option("--io-thread-scheduling", io_thread_scheduling,
                 "scheduling policy of the coordinator's ZeroMQ threads: batch (SCHED_BATCH: "
                 "woken by a send, it waits for the coordinator thread instead of taking its "
                 "CPU in the middle of a trigger's fan-out) or normal")
      ->check(scheduling_policy_check, "batch or normal")
      ->capture_default_str();
  auto* keygen_command = app.add_subcommand(
      "keygen", "generate a CURVE key pair (Z85) and exit; prints it without --out");
  keygen_command->add_option("--out", key_prefix, "write PREFIX.public and PREFIX.secret");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  if (keygen_command->parsed()) return keygen(key_prefix);
  if (timeout_ms <= interval_ms) {
    std::cerr << program
              << ": --heartbeat-timeout-ms must be longer than --heartbeat-interval-ms\n";
    return exit_usage;
  }
  if (auto logging = setup_process_logging("coordinator", log_level); !logging) {
    std::cerr << program << ": " << logging.err().message << "\n";
    return exit_usage;
  }
  rest::rest_server_options rest_options;
  if (!rest_token_file.empty()) {
    auto token = rest::bearer_token::read_file(rest_token_file);
    if (!token) {
      std::cerr << program << ": --rest-token-file: " << token.err().message << "\n";
      return exit_usage;
    }
    rest_options.token = std::move(token).value();
  }
  if (!rest_tls_cert.empty()) {
    auto tls = rest::tls_context::load(rest_tls_cert, rest_tls_key);
    if (!tls) {
      std::cerr << program << ": " << tls.err().message << "\n";
      return exit_usage;
    }
    rest_options.tls = std::move(tls).value();
  }
  if (!rest::is_loopback_host(rest_host) && !rest_options.token) {
    if (!insecure_rest) {
      std::cerr << program << ": --rest-host " << rest_host
                << " is reachable from other machines: give --rest-token-file so that only "
                   "token holders can change jobs, or --insecure-rest to serve it open\n";
      return exit_usage;
    }
    spdlog::warn("REST on {} without a token (--insecure-rest): anyone who reaches it can "
                 "submit, cancel and savepoint jobs",
                 rest_host);
  }
  // Before any thread starts (ZeroMQ's, the I/O pool, REST): they inherit it.
  if (cpus) {
    const auto placed = apply_cpus_option(*cpus);
    if (!placed) {
      std::cerr << program << ": --cpus: " << placed.err().message << "\n";
      return exit_usage;
    }
    spdlog::info("running on CPU {}", format_cpu_list(*placed));
  }
  const scheduling_policy io_policy = parse_scheduling_policy(io_thread_scheduling).value();
  // On one CPU (--cpus, or a CPU set inherited from the parent) ZeroMQ's I/O thread shares the
  // coordinator thread's, and under SCHED_BATCH waits for it: the coordinator gives the CPU up
  // right after a trigger's frames are handed over (coordinator_endpoint_options).
  if (const auto allowed = allowed_cpus();
      allowed && allowed->size() == 1 && io_policy == scheduling_policy::batch) {
    o.yield_after_send = true;
    spdlog::info("one CPU: the coordinator thread yields to the ZeroMQ I/O thread after sends");
  }
  o.heartbeat_interval = std::chrono::milliseconds(interval_ms);
  o.connection_timeout = std::chrono::milliseconds(connection_timeout_ms);
  o.heartbeat_timeout = std::chrono::milliseconds(timeout_ms);
  if (!curve_secret.empty()) {
    if (!transport::curve_available()) {
      std::cerr << program << ": CURVE was requested but this libzmq was built without it\n";
      return exit_usage;
    }
    auto keys = transport::read_secret_key_file(curve_secret);
    auto allowed = transport::read_allowlist(curve_allowlist);
    if (!keys || !allowed) {
      std::cerr << program << ": " << (!keys ? keys.err().message : allowed.err().message)
                << "\n";
      return exit_usage;
    }
    if (allowed->empty())
      spdlog::warn("the CURVE allowlist {} is empty: no worker can connect", curve_allowlist);
    o.curve = transport::curve_server_config{*keys, *allowed};
  }
  if (!o.curve && transport::is_plaintext_risk(o.bind_address)) {
    if (!insecure) {
      std::cerr << program << ": --bind " << o.bind_address
                << " is reachable beyond this machine and CURVE is off: anyone reaching it "
                   "could register workers and speak for them. Give --curve-secret-key and "
                   "--curve-allowlist, bind to loopback, or pass --insecure\n";
      return exit_usage;
    }
    spdlog::warn("--insecure: the control endpoint {} is open beyond loopback without CURVE; "
                 "anyone who reaches it can register workers and speak for them",
                 o.bind_address);
  }
  std::error_code fs_error;
  std::filesystem::create_directories(state_dir, fs_error);
  if (fs_error) {
    std::cerr << program << ": cannot create the state folder " << state_dir << ": "
              << fs_error.message() << "\n";
    return exit_failure;
  }
  // Created now: the symlink checks of savepoint targets resolve what exists under it.
  const std::filesystem::path savepoint_folder =
      savepoint_root.empty() ? std::filesystem::path(state_dir) / "savepoints"
                             : std::filesystem::path(savepoint_root);
  std::filesystem::create_directories(savepoint_folder, fs_error);
  if (fs_error) {
    std::cerr << program << ": cannot create the savepoint root " << savepoint_folder.string()
              << ": " << fs_error.message() << "\n";
    return exit_failure;
  }

  // Destroyed in reverse: the ZeroMQ context (and the ZAP handler's socket in it) outlives the
  // io_context whose coroutines own the sockets.
  zmq::context_t zmq_context(1);
  // Taken by ZeroMQ's threads (the I/O thread, and the reaper that closes sockets) when they
  // start, with the first socket. Under SCHED_BATCH a frame the coordinator thread hands over
  // wakes the I/O thread without preempting the coordinator thread, so a trigger's frames to
  // every worker are handed over together; under the default policy it often took the CPU at
  // the first frame, and the others waited behind it and the first worker's own work
  // (docs/benchmarks.md, "CPU placement and scheduling policy": the second frame over 100 us
  // late in 4-9% of checkpoints, then almost never). Needs no privilege.
  zmq_context.set(zmq::ctxopt::thread_sched_policy, linux_policy(io_policy));
  std::unique_ptr<transport::zap_handler> zap;
  if (o.curve) {
    zap = std::make_unique<transport::zap_handler>(zmq_context, o.curve->allowed_clients);
    if (auto e = zap->start()) {
      std::cerr << program << ": cannot start the CURVE authentication handler: " << e.message()
                << "\n";
      return exit_failure;
    }
  }
  // The coordinator thread: this one, alone (hint 1); the REST and disk threads only post to it.
  asio::io_context io{1};
  asio::thread_pool disk(io_threads);

  auto endpoint = std::make_shared<transport::coordinator_endpoint>(io.get_executor(),
                                                                     zmq_context, o);
  auto workers = std::make_shared<worker_registry>();
  dispatcher::options d{state_dir, disk.get_executor(), {}};
  d.slot_wait_timeout = std::chrono::milliseconds(slot_wait_ms);
  // Weak: the endpoint already holds the dispatcher (through its handler).
  d.checkpoint_gateway_for = [weak = std::weak_ptr(endpoint)](const job_id& job) {
    auto e = weak.lock();
    return e ? e->checkpoint_gateway(job) : std::shared_ptr<checkpoint_task_gateway>();
  };
  auto jobs = std::make_shared<dispatcher>(io.get_executor(), workers, endpoint, nullptr, d);
  // Record counters from heartbeats, shown by the REST API (and so the CLI's records/s).
  auto task_io = std::make_shared<task_io_metrics>();
  endpoint->set_handler(std::make_shared<transport::dispatcher_event_handler>(jobs, task_io));
  auto api = std::make_shared<rest::coordinator_rest_api>(jobs, task_io);
  api->set_savepoint_targets(
      {confined_folder(savepoint_folder), allow_savepoint_anywhere, confined_folder(state_dir)});
  // Weak: the API holds the dispatcher, whose job masters hold the endpoint.
  endpoint->set_counters_observer(
      [weak = std::weak_ptr(api)](const transport::coordinator_endpoint_counters& c) {
        if (auto a = weak.lock())
          a->set_transport_counters({c.frames_received, c.bad_frames, c.refused_messages,
                                     c.workers});
      });
  // The endpoint holds the dispatcher through its handler and the dispatcher holds the
  // endpoint as its deployer: the handler goes once the endpoint has stopped.
  auto release_handler = [&] {
    endpoint->stop();
    endpoint->set_handler(nullptr);
  };

  // Jobs that were running when the previous coordinator stopped start again; they wait for
  // slots until workers register.
  for (const auto& id : jobs->recover()) spdlog::info("job {} resumed", id);

  if (auto e = endpoint->start()) {
    std::cerr << program << ": cannot bind " << o.bind_address << ": " << e.message() << "\n";
    release_handler();
    return exit_failure;
  }
  rest::rest_server rest(io.get_executor(), api, rest_options);
  const auto rest_started = rest.start(rest_host, rest_port);
  const int bound_port = rest_started ? *rest_started : -1;
  if (!rest_started) {
    std::cerr << program << ": cannot serve REST on " << rest_host << ":" << rest_port << ": "
              << rest_started.err().message << "\n";
    release_handler();
    io.restart();
    io.poll();
    return exit_failure;
  }
  // The one line on stdout, for scripts, tests and `snapflow local`.
  std::cout << program << " listening control=" << endpoint->endpoint() << " rest=" << rest_host
            << ":" << bound_port << std::endl;
  spdlog::info("coordinator started: control {}, REST {}://{}:{}/{}, state in {}, heartbeat {} "
               "ms / timeout {} ms{}",
               endpoint->endpoint(), rest_options.tls ? "https" : "http", rest_host, bound_port,
               rest_options.token ? " (token required to change jobs)" : "", state_dir,
               interval_ms, timeout_ms, o.curve ? ", CURVE required" : "");

  // Stopping the HTTP server waits for requests in flight, which wait for this thread: so it
  // stops on a thread of its own while this one keeps serving, then ends the loop.
  std::thread rest_stopper;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const std::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: shutting down", signal);
    endpoint->stop();
    rest_stopper = std::thread([&] {
      rest.stop();
      asio::post(io, [&] { io.stop(); });
    });
  });
  int exit_code = exit_ok;
  try {
    io.run();
  } catch (const std::exception& e) {
    spdlog::critical("coordinator stopped: {}", e.what());
    exit_code = exit_failure;
    endpoint->stop();
  }
  if (rest_stopper.joinable()) rest_stopper.join();
  rest.stop();
  disk.join();
  // Coroutines see their socket closed and end while the io_context still runs; then nothing
  // holds the endpoint -> dispatcher -> job masters -> endpoint cycle together.
  io.restart();
  io.poll();
  release_handler();
  if (zap) zap->stop();
  spdlog::info("coordinator stopped");
  flush_process_logging();
  return exit_code;
}
