// Control-plane round trip: a checkpoint trigger from the coordinator endpoint to N
// snapflow-worker processes (`--executor stub`, which acknowledges at once) and their
// acknowledgements back, against a raw ZeroMQ ROUTER/DEALER ping-pong of frames of the same
// sizes over the same kind of sockets between the same number of processes, in the same run.
// One round = a frame out to every worker and one back from each; the table shows per-round
// medians and the ratio (target: within 1.2x of raw ZeroMQ).
//
// A third run splits the difference: the same ping-pong through async_socket alone (the Asio
// adapter, no messages decoded, no endpoint logic), so the table shows how much of the gap is
// the event-loop integration and how much is the endpoints' own work.
//
// The worker processes of the raw and adapter runs are this binary in a worker mode; each run
// starts fresh processes, and the runs alternate so drifts in the machine's load hit all alike.
//
//   control_plane_bench [rounds-per-size] [repetitions] [raw|adapter|endpoint|all] [1,4,16]
//                       [batch|normal]
//     (defaults: 1000 rounds per size, 9 repetitions, all, 1,4,16, batch)
// The last one is the scheduling policy of every process of the bench (cmd/thread_scheduling.hpp):
// this one and the raw and adapter workers it starts take it from here, the snapflow-worker
// processes from their --scheduling. The default is snapflow-worker's own default, so both
// sides of each ratio run under the same policy.
//   control_plane_bench --raw-worker|--adapter-worker ENDPOINT WORKER-ID   (internal)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <signal.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "cmd/thread_scheduling.hpp"
#include "transport/async_socket.hpp"
#include "transport/coordinator_endpoint.hpp"
#include "transport/envelope.hpp"
#include "transport/wire_conversions.hpp"
#include "transport/worker_endpoint.hpp"
#include "tests/cluster/child_process.hpp"

namespace {

using namespace snapflow;
using namespace snapflow::transport;
using clock_type = std::chrono::steady_clock;
using snapflow::testing::child_process;

const job_id bench_job = "0123456789abcdef0123456789abcdef";
constexpr int warmup_rounds = 200;

execution_attempt_id attempt_of(int i) { return {{0, static_cast<std::uint32_t>(i)}, 0}; }
std::string worker_name(int i) {
  std::string name = "w";  // appended: GCC 12 -Wrestrict misfires on "w" + std::string at -O3
  name += std::to_string(i);
  return name;
}

double micros(clock_type::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// The frames a trigger and an acknowledgement are on the wire, for the raw run.
std::string trigger_frame() {
  return wire::encode(to_wire(bench_job, attempt_of(0), 12345, 1'700'000'000'000'000,
                              checkpoint_options{}));
}
std::string ack_frame() {
  checkpoint_ack ack;
  ack.job = bench_job;
  ack.attempt = attempt_of(0);
  ack.id = 12345;
  return wire::encode(to_wire(ack));
}

using process_list = std::vector<std::unique_ptr<child_process>>;

// ---- worker processes ----------------------------------------------------------------------

// The worker side of the raw and adapter runs is this binary again, in a worker mode, so every
// row crosses the same process boundary. The endpoint run uses the real snapflow-worker.
std::string self_path() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    std::fprintf(stderr, "cannot find this program's path: %s\n", error.message().c_str());
    std::exit(1);
  }
  return path.string();
}


process_list start_workers(int workers, const std::function<std::vector<std::string>(int)>& argv) {
  process_list out;
  for (int i = 0; i < workers; ++i) out.push_back(std::make_unique<child_process>(argv(i)));
  return out;
}

// Every worker must end by itself once told to stop; one that does not is a bug in the bench.
void reap(process_list& processes) {
  for (auto& p : processes) {
    const auto code = p->wait_exit(std::chrono::seconds(10));
    if (!code || *code != 0) {
      std::fprintf(stderr, "a worker process %s: %s\n",
                   code ? ("exited with " + std::to_string(*code)).c_str() : "did not exit",
                   p->stderr_text().c_str());
      std::exit(1);
    }
  }
}

// Of every process of the bench (see the usage above).
snapflow::scheduling_policy bench_policy = snapflow::scheduling_policy::batch;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "control_plane_bench: %s\n", what);
  std::exit(1);
}

// CPU time of this process and the worker processes over the measured rounds: the round trip
// is mostly waiting, so the ratio of medians alone hides how much work each side does.
struct run_stats {
  std::vector<double> samples;  // microseconds per measured round, every repetition
  std::vector<double> rep_p50;  // the median of each repetition on its own
  double cpu_seconds = 0;       // over every round, warm-up included
  double coordinator_cpu_seconds = 0;  // the part this process (the coordinator side) used
  long rounds = 0;
  double cpu_us_per_round() const { return per_round(cpu_seconds); }
  double coordinator_cpu_us_per_round() const { return per_round(coordinator_cpu_seconds); }
  double workers_cpu_us_per_round() const {
    return per_round(cpu_seconds - coordinator_cpu_seconds);
  }

 private:
  double per_round(double seconds) const {
    return rounds > 0 ? seconds * 1e6 / static_cast<double>(rounds) : 0;
  }
};

class cpu_window {
 public:
  explicit cpu_window(const std::vector<std::unique_ptr<child_process>>& processes)
      : processes_(processes) {}
  void begin() {
    start_ = total();
    start_self_ = snapflow::testing::self_cpu_seconds();
  }
  void end(run_stats& stats, long rounds) {
    stats.cpu_seconds += total() - start_;
    stats.coordinator_cpu_seconds += snapflow::testing::self_cpu_seconds() - start_self_;
    stats.rounds += rounds;
  }

 private:
  double total() const {
    double sum = snapflow::testing::self_cpu_seconds();
    for (const auto& p : processes_) sum += p->cpu_seconds();
    return sum;
  }
  double start_self_ = 0;
  const std::vector<std::unique_ptr<child_process>>& processes_;
  double start_ = 0;
};

// ---- raw ZeroMQ ---------------------------------------------------------------------------

// A raw worker process: answers every frame with an ack frame until "stop".
int raw_worker_main(const std::string& endpoint, const std::string& id) {
  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, id);
  dealer.connect(endpoint);
  const std::string reply = ack_frame();
  (void)dealer.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  for (;;) {
    zmq::message_t m;
    if (!dealer.recv(m)) return 1;
    if (m.to_string_view() == "stop") return 0;
    (void)dealer.send(zmq::buffer(reply), zmq::send_flags::none);
  }
}

// Receives one two-part ROUTER message, or fails the run when nothing comes for a long time
// (a worker process that died must not hang the bench).
void raw_receive(zmq::socket_t& router, zmq::message_t& id, zmq::message_t& payload) {
  zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::seconds(20)) == 0) fail("no answer from a raw worker");
  (void)router.recv(id);
  (void)router.recv(payload);
}

void raw_round_trips(int workers, int rounds, run_stats& stats) {
  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::router_mandatory, true);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  process_list processes = start_workers(workers, [&](int i) {
    return std::vector<std::string>{self_path(), "--raw-worker", endpoint, worker_name(i)};
  });
  std::vector<std::string> ids;
  for (int i = 0; i < workers; ++i) {
    zmq::message_t id, hello;
    raw_receive(router, id, hello);
    ids.push_back(id.to_string());
  }
  const std::string trigger = trigger_frame();
  cpu_window cpu(processes);
  cpu.begin();
  for (int r = 0; r < warmup_rounds + rounds; ++r) {
    const auto start = clock_type::now();
    for (const auto& id : ids) {
      (void)router.send(zmq::buffer(id), zmq::send_flags::sndmore);
      (void)router.send(zmq::buffer(trigger), zmq::send_flags::none);
    }
    for (int i = 0; i < workers; ++i) {
      zmq::message_t id, payload;
      raw_receive(router, id, payload);
    }
    if (r >= warmup_rounds) stats.samples.push_back(micros(clock_type::now() - start));
  }
  cpu.end(stats, warmup_rounds + rounds);
  for (const auto& id : ids) {
    (void)router.send(zmq::buffer(id), zmq::send_flags::sndmore);
    (void)router.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  }
  reap(processes);
}

// ---- async_socket alone ------------------------------------------------------------------

// The send of a frame ZeroMQ would not take at once (a DEALER not connected yet). The payload
// is the coroutine's own copy: the caller's may be gone before it runs.
asio::awaitable<void> send_later(async_socket& s, std::string payload) {
  (void)co_await s.send(std::move(payload));
}

// An adapter worker: answers every frame with an ack frame until "stop", reading as the
// endpoints do (async_socket::receive_each) and answering at once (try_send) unless ZeroMQ
// would make the answer wait.
int adapter_worker_main(const std::string& endpoint, const std::string& id) {
  zmq::context_t context(1);
  asio::io_context io{1};
  socket_options o;
  o.routing_id = id;
  async_socket dealer(io.get_executor(), context, zmq::socket_type::dealer, o);
  if (dealer.connect(endpoint)) return 1;
  int exit_code = 1;
  const std::string reply = ack_frame();
  auto answer = [&](const std::string& payload) {
    if (dealer.try_send(payload) == std::errc::resource_unavailable_try_again)
      asio::co_spawn(io, send_later(dealer, payload), asio::detached);  // not connected yet
  };
  asio::post(io, [&] {
    answer("hello");
    dealer.receive_each(
        [&](received_frame& in) {
          if (in.error) return;
          if (in.payload == "stop") {
            exit_code = 0;
            dealer.close();
            return;
          }
          answer(reply);
        },
        [](std::error_code) {});
  });
  io.run();
  return exit_code;
}

// The adapter run's coordinator: rounds of a trigger to every worker and an ack from each,
// driven by the frames as they are read (async_socket::receive_each, as the coordinator
// endpoint reads).
class adapter_coordinator {
 public:
  adapter_coordinator(async_socket& router, int workers, int rounds, run_stats& stats,
                      cpu_window& cpu)
      : router_(router), workers_(workers), rounds_(rounds), stats_(stats), cpu_(cpu) {}

  void start() {
    router_.receive_each([this](received_frame& in) { on_frame(in); }, [](std::error_code) {});
  }

 private:
  void on_frame(const received_frame& in) {
    if (in.error) fail("the adapter coordinator received a bad frame");
    if (static_cast<int>(ids_.size()) < workers_) {  // hello
      ids_.push_back(in.routing_id);
      if (static_cast<int>(ids_.size()) == workers_) {
        cpu_.begin();
        start_round();
      }
      return;
    }
    if (++acks_ < workers_) return;
    if (round_ >= warmup_rounds) stats_.samples.push_back(micros(clock_type::now() - start_));
    if (++round_ < warmup_rounds + rounds_) return start_round();
    cpu_.end(stats_, warmup_rounds + rounds_);
    for (const auto& id : ids_) send(id, "stop");
    router_.close();
  }

  void start_round() {
    acks_ = 0;
    start_ = clock_type::now();
    for (const auto& id : ids_) send(id, trigger_);
  }

  // 16 frames never fill a peer's queue of 1000 in a ping-pong: a refusal is a fault here.
  void send(const std::string& id, const std::string& payload) {
    if (router_.try_send(id, payload)) fail("the adapter coordinator could not send at once");
  }

  async_socket& router_;
  const int workers_;
  const int rounds_;
  run_stats& stats_;
  cpu_window& cpu_;
  const std::string trigger_ = trigger_frame();
  std::vector<std::string> ids_;
  int round_ = 0;
  int acks_ = 0;
  clock_type::time_point start_;
};

void adapter_round_trips(int workers, int rounds, run_stats& stats) {
  zmq::context_t context(1);
  asio::io_context io{1};
  async_socket router(io.get_executor(), context, zmq::socket_type::router);
  if (router.bind("tcp://127.0.0.1:*")) fail("cannot bind");
  const std::string endpoint = router.last_endpoint();
  process_list processes = start_workers(workers, [&](int i) {
    return std::vector<std::string>{self_path(), "--adapter-worker", endpoint, worker_name(i)};
  });
  cpu_window cpu(processes);
  adapter_coordinator coordinator(router, workers, rounds, stats, cpu);
  asio::post(io, [&] { coordinator.start(); });
  // Bounded: a worker process that died would otherwise leave the coordinator waiting.
  io.run_for(std::chrono::minutes(5));
  if (!io.stopped()) fail("the adapter run did not finish");
  reap(processes);
}

// ---- the endpoints --------------------------------------------------------------------------

// The job side of the benchmark: every attempt i runs on worker w<i>; a round ends when every
// worker acknowledged.
class bench_jobs final : public worker_event_handler {
 public:
  worker_registry registry;
  std::size_t registered = 0;
  std::size_t running = 0;
  std::size_t acks = 0;
  std::function<void()> on_change;

  worker_registry& workers() override { return registry; }
  void worker_registered(const worker_id&, bool) override {
    ++registered;
    on_change();
  }
  void worker_lost(const worker_id& w) override { std::fprintf(stderr, "lost %s\n", w.c_str()); }
  void task_state_changed(const job_id&, const execution_attempt_id&, execution_state s,
                          const std::string&) override {
    if (s == execution_state::running) ++running;
    on_change();
  }
  std::optional<worker_id> owner_of(const job_id&,
                                    const execution_attempt_id& a) const override {
    // A lookup, as a job master's is: the names are made once, not per message.
    if (a.subtask.index < names.size()) return names[a.subtask.index];
    return std::nullopt;
  }
  std::vector<worker_id> names;  // attempt i runs on names[i]
  void acknowledge_checkpoint(checkpoint_ack) override {
    ++acks;
    on_change();
  }
  void decline_checkpoint(const checkpoint_decline&) override {}
  void source_exhausted(const job_id&, const execution_attempt_id&, checkpoint_id) override {}
};

void endpoint_round_trips(int workers, int rounds, run_stats& stats) {
  zmq::context_t context(1);
  asio::io_context io{1};
  auto guard = asio::make_work_guard(io);
  auto jobs = std::make_shared<bench_jobs>();
  for (int i = 0; i < workers; ++i) jobs->names.push_back(worker_name(i));
  coordinator_endpoint_options o;
  o.bind_address = "tcp://127.0.0.1:*";
  auto coordinator = std::make_shared<coordinator_endpoint>(io.get_executor(), context, o);
  coordinator->set_handler(jobs);
  if (auto e = coordinator->start()) {
    std::fprintf(stderr, "cannot bind: %s\n", e.message().c_str());
    std::exit(1);
  }

  // The rounds run on the coordinator thread, driven by the job side's callbacks; this thread
  // waits for the result.
  std::promise<void> done;
  auto gateway = coordinator->checkpoint_gateway(bench_job);
  int round = 0;
  checkpoint_id id = 0;
  clock_type::time_point start;
  const std::size_t n = static_cast<std::size_t>(workers);
  std::function<void()> next_round = [&] {
    jobs->acks = 0;
    start = clock_type::now();
    ++id;
    for (int i = 0; i < workers; ++i)
      gateway->trigger_checkpoint(attempt_of(i), id, 1'700'000'000'000'000, {});
  };
  bool deployed = false;
  // Set before the first round can start: the worker processes must exist to be measured.
  std::unique_ptr<cpu_window> cpu;
  jobs->on_change = [&] {
    if (!deployed && jobs->registered == n) {
      deployed = true;
      for (int i = 0; i < workers; ++i) {
        task_deployment_descriptor d;
        d.job = bench_job;
        d.attempt = attempt_of(i);
        d.job_graph_bytes = "g";
        coordinator->deploy(worker_name(i), d);
      }
    }
    if (jobs->running == n && id == 0) {
      cpu->begin();
      next_round();
    }
    if (id > 0 && jobs->acks == n) {
      const auto elapsed = clock_type::now() - start;
      if (++round > warmup_rounds) stats.samples.push_back(micros(elapsed));
      if (round == warmup_rounds + rounds) {
        cpu->end(stats, round);
        done.set_value();
        return;
      }
      next_round();  // at once, as the raw loop does: no extra hop that raw ZeroMQ does not pay
    }
  };
  // The real worker binary with the stub executor, which acknowledges every trigger at once.
  process_list processes = start_workers(workers, [&](int i) {
    return std::vector<std::string>{SNAPFLOW_WORKER_BIN, "--coordinator", coordinator->endpoint(),
                                    "--id", worker_name(i), "--executor", "stub",
                                    "--log-level", "warn", "--scheduling",
                                    std::string(to_string(bench_policy))};
  });
  cpu = std::make_unique<cpu_window>(processes);
  // From here on the job side is only touched on the coordinator thread.
  std::thread coordinator_thread([&] { io.run(); });

  const bool finished =
      done.get_future().wait_for(std::chrono::minutes(5)) == std::future_status::ready;

  std::promise<void> stopped;
  asio::post(io, [&] {
    coordinator->stop();
    stopped.set_value();
  });
  stopped.get_future().wait();
  guard.reset();
  io.stop();
  coordinator_thread.join();
  coordinator->set_handler(nullptr);
  for (auto& p : processes) p->send_signal(SIGTERM);
  for (auto& p : processes)
    if (!p->wait_exit(std::chrono::seconds(10)))
      std::fprintf(stderr, "a snapflow-worker did not stop on SIGTERM: %s\n",
                   p->stderr_text().c_str());
  if (!finished) fail("the endpoint run did not finish");
}

// measured / baseline, one ratio per repetition (the runs of one repetition are neighbours).
std::vector<double> paired_ratios(const run_stats& measured, const run_stats& baseline) {
  std::vector<double> out;
  for (std::size_t i = 0; i < std::min(measured.rep_p50.size(), baseline.rep_p50.size()); ++i)
    if (baseline.rep_p50[i] > 0) out.push_back(measured.rep_p50[i] / baseline.rep_p50[i]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--raw-worker")
    return raw_worker_main(argv[2], argv[3]);
  if (argc == 4 && std::string_view(argv[1]) == "--adapter-worker")
    return adapter_worker_main(argv[2], argv[3]);
  spdlog::set_level(spdlog::level::warn);
  const int base_rounds = argc > 1 ? std::max(100, std::atoi(argv[1])) : 1000;
  // Raw and endpoint runs alternate, so drifts in the machine's load hit both alike.
  const int repetitions = argc > 2 ? std::max(1, std::atoi(argv[2])) : 9;
  const std::string only = argc > 3 && std::string_view(argv[3]) != "all" ? argv[3] : "";
  std::vector<int> worker_counts{1, 4, 16};
  if (argc > 4) {
    worker_counts.clear();
    std::istringstream list(argv[4]);
    for (std::string item; std::getline(list, item, ',');)
      worker_counts.push_back(std::max(1, std::atoi(item.c_str())));
  }
  struct paired_row {
    int workers;
    std::vector<double> adapter, endpoint;
  };
  std::vector<paired_row> paired;
  if (argc > 5) {
    auto policy = parse_scheduling_policy(argv[5]);
    if (!policy) fail(policy.err().message.c_str());
    bench_policy = *policy;
  }
  // Before any worker starts: the raw and adapter workers inherit it.
  if (auto applied = apply_scheduling_policy(bench_policy); !applied)
    fail(applied.err().message.c_str());
  // CPU per round (coordinator side, worker processes) of the raw, adapter and endpoint runs.
  struct cpu_split {
    double coordinator, workers;
  };
  struct cpu_row {
    int workers;
    cpu_split raw, adapter, endpoint;
  };
  std::vector<cpu_row> cpu_rows;
  std::printf("control-plane round trip: trigger to every worker process, acknowledgement back\n");
  std::printf("(%d repetitions alternating raw, adapter and endpoint runs; microseconds per "
              "round; cpu = CPU time of every process per round; every process scheduled %s)\n\n",
              repetitions, std::string(to_string(bench_policy)).c_str());
  std::printf("%8s %9s %12s %13s %9s %13s %8s %12s %13s %9s %9s\n", "workers", "raw p50",
              "adapter p50", "endpoint p50", "raw p90", "endpoint p90", "raw cpu", "adapter cpu",
              "endpoint cpu", "adapter/", "endpoint/");
  std::printf("%8s %9s %12s %13s %9s %13s %8s %12s %13s %9s %9s\n", "", "", "", "", "", "", "", "",
              "", "raw", "raw");
  for (int workers : worker_counts) {
    // The same number of rounds at every size: dividing them by the workers left 16 workers
    // with 100-round samples whose per-repetition ratios scattered from 1.1x to 1.5x.
    const int rounds = base_rounds;
    run_stats raw, adapter, endpoint;
    const std::vector<std::pair<const char*, std::function<void()>>> kinds{
        {"raw", [&] { raw_round_trips(workers, rounds, raw); }},
        {"adapter", [&] { adapter_round_trips(workers, rounds, adapter); }},
        {"endpoint", [&] { endpoint_round_trips(workers, rounds, endpoint); }}};
    for (int rep = 0; rep < repetitions; ++rep) {
      // The order rotates too, so no kind always runs right after process start-up.
      for (std::size_t k = 0; k < kinds.size(); ++k) {
        const auto& [name, run] = kinds[(k + static_cast<std::size_t>(rep)) % kinds.size()];
        if (!only.empty() && only != name) continue;
        run_stats* stats = name == std::string_view("raw")       ? &raw
                           : name == std::string_view("adapter") ? &adapter
                                                                 : &endpoint;
        const std::size_t before = stats->samples.size();
        run();
        stats->rep_p50.push_back(percentile(
            {stats->samples.begin() + static_cast<std::ptrdiff_t>(before), stats->samples.end()},
            0.5));
      }
    }
    const double raw_p50 = percentile(raw.samples, 0.5),
                 adapter_p50 = percentile(adapter.samples, 0.5),
                 endpoint_p50 = percentile(endpoint.samples, 0.5);
    std::printf("%8d %9.1f %12.1f %13.1f %9.1f %13.1f %8.1f %12.1f %13.1f %8.2fx %8.2fx\n",
                workers, raw_p50, adapter_p50, endpoint_p50, percentile(raw.samples, 0.9),
                percentile(endpoint.samples, 0.9), raw.cpu_us_per_round(),
                adapter.cpu_us_per_round(), endpoint.cpu_us_per_round(), adapter_p50 / raw_p50,
                endpoint_p50 / raw_p50);
    paired.push_back({workers, paired_ratios(adapter, raw), paired_ratios(endpoint, raw)});
    auto split = [](const run_stats& s) {
      return cpu_split{s.coordinator_cpu_us_per_round(), s.workers_cpu_us_per_round()};
    };
    cpu_rows.push_back({workers, split(raw), split(adapter), split(endpoint)});
  }
  // Which side spends the CPU: this process is the coordinator side of every run.
  std::printf("\nCPU per round, us: coordinator side (this process) / every worker process\n");
  std::printf("%8s %17s %17s %17s\n", "workers", "raw", "adapter", "endpoint");
  for (const auto& row : cpu_rows) {
    auto cell = [](const cpu_split& s) {
      char text[32];
      std::snprintf(text, sizeof text, "%7.1f / %7.1f", s.coordinator, s.workers);
      return std::string(text);
    };
    std::printf("%8d %17s %17s %17s\n", row.workers, cell(row.raw).c_str(),
                cell(row.adapter).c_str(), cell(row.endpoint).c_str());
  }
  // Each repetition runs raw, adapter and endpoint back to back, so their ratio within one
  // repetition cancels the drift of a shared machine; the spread of those ratios says how far
  // the pooled ratio above can be trusted.
  if (repetitions > 1 && only.empty()) {
    std::printf("\nper-repetition ratios of medians: median [lower quartile - upper quartile]\n");
    std::printf("%8s %28s %28s\n", "workers", "adapter/raw", "endpoint/raw");
    for (const auto& row : paired)
      std::printf("%8d %11.2fx [%5.2f - %5.2f] %11.2fx [%5.2f - %5.2f]\n", row.workers,
                  percentile(row.adapter, 0.5), percentile(row.adapter, 0.25),
                  percentile(row.adapter, 0.75), percentile(row.endpoint, 0.5),
                  percentile(row.endpoint, 0.25), percentile(row.endpoint, 0.75));
  }
  return 0;
}
