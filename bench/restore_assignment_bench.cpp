// What a recovery costs the coordinator and the workers as the job grows: the job master
// restores a job of 1,000 and 10,000 subtasks from a completed checkpoint whose subtask states
// are small and travel inline in their handles, the way most states do
// (checkpoint_config::inline_state_max_bytes).
//
// The job is sequence_source -> keyed_count (hash) -> two_phase_commit_file_sink (forward),
// each at parallelism subtasks / 3, so each vertex has a different redistribution rule to
// follow: sources and the sink by index, the keyed vertex by key-group range. The deployment
// gateway encodes every descriptor into the deploy_task frame the coordinator would send
// (transport/wire_conversions.hpp), and then decodes every state it carries with
// state_file::read, which is what each task does before it opens its operator. Nothing runs
// and no socket is opened: what is measured is the part of a recovery that grows with the
// number of states each subtask receives.
//
//   coordinator_ms   job_master::start() with restore: placement, descriptors and their
//                    encoding (the task reads below run inside the gateway and are taken out)
//   frames_mib       all deploy_task frames; frame_max_kib, the largest
//   states_sent      old subtask states listed in all descriptors together
//   task_read_ms     every task's state_file::read of what it received, summed
//
//   restore_assignment_bench [--subtasks 1000 10000] [--state-bytes 256] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "engine/jobmaster/job_master.hpp"
#include "engine/state/key_groups.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/state/int64_state_value.hpp"
#include "graph/job_file.hpp"
#include "transport/envelope.hpp"
#include "transport/wire_conversions.hpp"

namespace {

using namespace snapflow;
using steady = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Encodes each descriptor as the coordinator would send it and reads its states as the task
// would; keeps the totals.
class measuring_deployer : public task_deployment_gateway {
 public:
  void deploy(const worker_id&, const task_deployment_descriptor& d) override {
    const std::string frame = wire::encode(transport::to_wire(d));
    frame_bytes += frame.size();
    frame_max_bytes = std::max(frame_max_bytes, frame.size());
    states_sent += d.restore_states.size();
    const auto start = steady::now();
    for (const auto& [_, state] : d.restore_states)
      for (const auto& handle : state.handles) {
        auto snapshot = state_file::read(handle);
        if (!snapshot) throw std::runtime_error("state read: " + snapshot.err().message);
      }
    task_read_ms += ms_between(start, steady::now());
    ++deployed;
  }
  void cancel(const worker_id&, const job_id&, const execution_attempt_id&) override {}

  std::size_t deployed = 0;
  std::size_t frame_bytes = 0;
  std::size_t frame_max_bytes = 0;
  std::size_t states_sent = 0;
  double task_read_ms = 0;
};

std::string job_toml(std::uint32_t parallelism, std::uint32_t max_parallelism,
                     const fs::path& sink_path) {
  return "[job]\nname = \"restore-bench\"\nparallelism = " + std::to_string(parallelism) +
         "\nmax_parallelism = " + std::to_string(max_parallelism) +
         "\n\n[checkpointing]\ninterval_ms = 1000\n\n"
         "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
         "params = { count = 1000000 }\n\n"
         "[[operator]]\nuid = \"count\"\nkind = \"keyed_count\"\ninput = \"source\"\n\n"
         "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"count\"\n"
         "partition = \"forward\"\nparams = { path = \"" +
         sink_path.string() + "\" }\n";
}

// A checkpoint of `graph` at its own parallelism: every subtask's state inline, about
// `state_bytes` of operator state each, and a few key groups of keyed state for keyed_count.
completed_checkpoint make_checkpoint(const job_graph& graph, std::size_t state_bytes) {
  completed_checkpoint c;
  c.job = graph.id;
  c.id = 7;
  c.location = "chk-7";
  for (const auto& v : graph.vertices)
    for (std::uint32_t i = 0; i < v.parallelism; ++i) {
      subtask_snapshot s;
      s.operator_uid = v.uid;
      s.subtask_index = i;
      s.parallelism = v.parallelism;
      s.checkpoint = c.id;
      if (v.kind == "keyed_count") {
        s.keyed.max_parallelism = v.max_parallelism;
        const auto range = key_groups::range_for_subtask(i, v.parallelism, v.max_parallelism);
        for (std::uint32_t g = range.first; g <= range.last && g < range.first + 4; ++g)
          s.keyed.key_groups[g].values["count"][g] = encode_int64_state(1);
      } else {
        s.operator_state.push_back({"offset", std::string(state_bytes, 'x')});
      }
      c.subtask_states.emplace(subtask_id{v.id, i},
                               subtask_state{{state_file::make_inline(state_file::encode(s))}, 0});
    }
  return c;
}

struct run_result {
  int subtasks = 0;
  std::uint32_t parallelism = 0;
  double coordinator_ms = 0;
  double frames_mib = 0;
  double frame_max_kib = 0;
  std::size_t states_sent = 0;
  double task_read_ms = 0;
};

run_result run_one(int subtasks, std::size_t state_bytes) {
  run_result r;
  r.subtasks = subtasks;
  r.parallelism = static_cast<std::uint32_t>(subtasks / 3);
  const fs::path dir = fs::temp_directory_path() /
                       ("snapflow-restore-bench-" + std::to_string(std::random_device{}()));
  struct cleanup {
    fs::path p;
    ~cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } remove_dir{dir};

  const std::uint32_t max_parallelism = std::max<std::uint32_t>(128, r.parallelism);
  auto parsed = parse_job_file(job_toml(r.parallelism, max_parallelism, dir / "out"), "bench");
  if (!parsed) throw std::runtime_error("job file: " + parsed.error().what());
  const job_graph graph = parsed.value();

  asio::io_context io;
  auto workers = std::make_shared<worker_registry>();
  if (!workers->register_worker("w1", r.parallelism, "tcp://w1", 0))
    throw std::runtime_error("cannot register the worker");
  auto deployer = std::make_shared<measuring_deployer>();
  job_master::options opts{
      dir / "state", io.get_executor(), {}, make_checkpoint(graph, state_bytes)};
  // A gateway that drops checkpoint messages: nothing is triggered before the job runs.
  struct no_gateway : checkpoint_task_gateway {
    void trigger_checkpoint(const execution_attempt_id&, checkpoint_id, std::int64_t,
                            const checkpoint_options&) override {}
    void notify_checkpoint_complete(const execution_attempt_id&, checkpoint_id,
                                    std::int64_t) override {}
    void notify_checkpoint_aborted(const execution_attempt_id&, checkpoint_id,
                                   checkpoint_id) override {}
  };
  auto created = job_master::create(io.get_executor(), graph, workers, deployer,
                                    std::make_shared<no_gateway>(), opts);
  if (!created) throw std::runtime_error("job master: " + created.err().message);

  const auto start = steady::now();
  (*created)->start();
  r.coordinator_ms = ms_between(start, steady::now()) - deployer->task_read_ms;
  if (deployer->deployed != 3 * r.parallelism)
    throw std::runtime_error("deployed " + std::to_string(deployer->deployed) + " subtasks");
  r.frames_mib = static_cast<double>(deployer->frame_bytes) / (1024.0 * 1024.0);
  r.frame_max_kib = static_cast<double>(deployer->frame_max_bytes) / 1024.0;
  r.states_sent = deployer->states_sent;
  r.task_read_ms = deployer->task_read_ms;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{1000, 10000};
  std::size_t state_bytes = 256;
  bool json_output = false;
  CLI::App app{"restore_assignment_bench: what restoring a job costs as it grows"};
  app.add_option("--subtasks", sizes, "job sizes, in subtasks (three vertices)")
      ->check(CLI::Range(3, 3 * 32768))
      ->capture_default_str();
  app.add_option("--state-bytes", state_bytes, "operator state per non-keyed subtask")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_flag("--json", json_output, "one JSON object per size");
  CLI11_PARSE(app, argc, argv);

  if (!json_output)
    std::printf("%9s %6s %14s %10s %13s %12s %12s\n", "subtasks", "p", "coordinator_ms",
                "frames_mib", "frame_max_kib", "states_sent", "task_read_ms");
  try {
    for (int n : sizes) {
      const run_result r = run_one(n, state_bytes);
      if (json_output) {
        nlohmann::json j{{"subtasks", r.subtasks},
                         {"parallelism", r.parallelism},
                         {"coordinator_ms", r.coordinator_ms},
                         {"frames_mib", r.frames_mib},
                         {"frame_max_kib", r.frame_max_kib},
                         {"states_sent", r.states_sent},
                         {"task_read_ms", r.task_read_ms}};
        std::cout << j.dump() << std::endl;
      } else {
        std::printf("%9d %6u %14.1f %10.2f %13.1f %12zu %12.1f\n", r.subtasks, r.parallelism,
                    r.coordinator_ms, r.frames_mib, r.frame_max_kib, r.states_sent, r.task_read_ms);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "restore_assignment_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
