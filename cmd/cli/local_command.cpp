// `snapflow local`: the README's first command. A coordinator and N workers as child
// processes on loopback, the job submitted over REST, live progress until it ends (and with
// --keep-running, the cluster up until a signal). A worker that exits is started again; the
// coordinator exiting ends the run; a state folder it made up is removed at exit.
#include <atomic>
#include <csignal>
#include <filesystem>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "cmd/cpu_affinity.hpp"
#include "cmd/cli/child_processes.hpp"
#include "cmd/cli/commands.hpp"
#include "cmd/cli/records_rate.hpp"
#include "cmd/cli/rest_client.hpp"

namespace snapflow::cli {

using nlohmann::json;

namespace {

std::atomic<int> interrupted{0};
void on_signal(int) { interrupted.fetch_add(1); }

std::filesystem::path self_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path();
}

// 1234567 -> "1.23M": progress lines stay short.
std::string format_count(double n) {
  std::ostringstream os;
  os.precision(3);
  if (n >= 1e9)
    os << n / 1e9 << "G";
  else if (n >= 1e6)
    os << n / 1e6 << "M";
  else if (n >= 1e3)
    os << n / 1e3 << "k";
  else
    os << std::fixed << std::setprecision(0) << n;
  return os.str();
}

std::string format_us(double us) {
  std::ostringstream os;
  os.precision(3);
  if (us >= 1000)
    os << us / 1000 << " ms";
  else
    os << us << " us";
  return os.str();
}

// "key=value" fields of the coordinator's listening line.
std::string field(const std::string& line, const std::string& key) {
  auto at = line.find(key + "=");
  if (at == std::string::npos) return {};
  auto start = at + key.size() + 1;
  auto end = line.find(' ', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The state folder this command made up (no --state-dir), removed when it exits however it
// exits: the job ends, fails, is cancelled, or the coordinator dies. Declared before the
// children, so they are stopped (and stop writing into it) before it goes.
struct owned_folder {
  std::filesystem::path path;
  owned_folder() = default;
  owned_folder(const owned_folder&) = delete;
  owned_folder& operator=(const owned_folder&) = delete;
  ~owned_folder() {
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec)
      std::cerr << "snapflow local: could not remove " << path.string() << ": " << ec.message()
                << "\n";
  }
};

// Runs `PROGRAM submit --coordinator REST [--arg ...]` and returns the job id it prints. Its
// refusal (the reason) goes to the inherited stderr.
result<std::string> submit_program(child_processes& children, const std::string& program,
                                   const std::string& rest,
                                   const std::vector<std::string>& program_args,
                                   std::optional<std::size_t>& index_out) {
  std::vector<std::string> args{"submit", "--coordinator", rest};
  args.insert(args.end(), program_args.begin(), program_args.end());
  auto index = children.spawn("submit", program, args, true);
  if (!index) return index.err();
  index_out = *index;
  // Building the job and one REST call: a minute is far more than either takes.
  for (int i = 0; i < 600; ++i) {
    auto line = children.read_line(*index, std::chrono::milliseconds(100));
    if (!line && children.children()[*index].stdout_fd < 0) break;  // it exited, silent
    if (!line) continue;
    std::string id = *line;
    while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
    if (id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos)
      return id;
    return error{program + " submit printed '" + id + "', not a job id"};
  }
  return error{program + " submit printed no job id (its reason, if any, is above)"};
}

// Progress goes to stdout line by line, flushed at once: a pipe or a file sees each line as it
// is printed, not a buffer's worth at the end.
void say(const std::string& text) { std::cout << text << std::flush; }

}  // namespace

int run_local(const local_options& o) {
  if (o.workers < 1 || o.workers > 64) {
    std::cerr << "snapflow local: --workers must be between 1 and 64\n";
    return 2;
  }
  const bool from_program = !o.program.empty();
  std::stringstream job_text;
  if (from_program) {
    if (::access(o.program.c_str(), X_OK) != 0) {
      std::cerr << "snapflow local: cannot run program '" << o.program
                << "': " << std::strerror(errno) << "\n";
      return 2;
    }
  } else {
    std::ifstream in(o.job_file, std::ios::binary);
    if (!in) {
      std::cerr << "snapflow local: cannot read job file '" << o.job_file
                << "' (run from the repository root, or pass --job FILE)\n";
      return 2;
    }
    job_text << in.rdbuf();
  }
  // `--arg KEY=VALUE` for each of the program's settings, the same for workers and submit.
  std::vector<std::string> program_args;
  for (const auto& a : o.program_args) {
    program_args.push_back("--arg");
    program_args.push_back(a);
  }

  owned_folder temporary_state;
  std::filesystem::path state_dir = o.state_dir;
  if (state_dir.empty()) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "snapflow-local-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "snapflow local: cannot create a state folder " << pattern << ": "
                << std::strerror(errno) << "\n";
      return 1;
    }
    state_dir = pattern;
    temporary_state.path = state_dir;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(state_dir, ec);
    if (ec) {
      std::cerr << "snapflow local: cannot create --state-dir " << state_dir.string() << ": "
                << ec.message() << "\n";
      return 1;
    }
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A closed terminal stops the cluster like Ctrl-C: the children run in process groups of
  // their own and would not get its SIGHUP.
  sigaction(SIGHUP, &sa, nullptr);
  // A reader of stdout that went away (`snapflow local ... | head`) must not kill this process
  // before it has stopped its children and removed its state folder: writes fail instead.
  std::signal(SIGPIPE, SIG_IGN);

  const auto bin = self_dir();
  // The children log at the level given, else as SPDLOG_LEVEL says, else only warnings: their
  // lines share the terminal with the progress line.
  std::vector<std::string> log_args;
  if (!o.log_level.empty())
    log_args = {"--log-level", o.log_level};
  else if (std::getenv("SPDLOG_LEVEL") == nullptr)
    log_args = {"--log-level", "warn"};
  const std::string worker_binary =
      from_program ? o.program
                   : (o.worker_binary.empty() ? (bin / "snapflow-worker").string()
                                              : o.worker_binary);
  if (::access(worker_binary.c_str(), X_OK) != 0) {
    std::cerr << "snapflow local: cannot run worker binary '" << worker_binary
              << "': " << std::strerror(errno) << "\n";
    return 2;
  }
  std::vector<int> cpus;
  if (o.pin_workers) {
    auto allowed = allowed_cpus();
    if (!allowed) {
      std::cerr << "snapflow local: --pin-workers: " << allowed.err().message << "\n";
      return 1;
    }
    cpus = std::move(*allowed);
  }
  child_processes children;
  // Heartbeats every 500 ms, not the default second: on loopback they cost nothing, and a
  // restarted worker is let in once its predecessor has missed two of them, so a worker killed
  // during a demo is back, and the job restarted, in about a second.
  const std::string heartbeat_ms = "500";
  std::vector<std::string> coordinator_args{
      "--bind",      "tcp://127.0.0.1:*", "--state-dir", state_dir.string(),
      "--rest-host", "127.0.0.1",         "--rest-port", std::to_string(o.rest_port),
      "--heartbeat-interval-ms", heartbeat_ms};
  coordinator_args.insert(coordinator_args.end(), log_args.begin(), log_args.end());
  auto coordinator = children.spawn("coordinator", (bin / "snapflow-coordinator").string(),
                                    coordinator_args, true);
  if (!coordinator) {
    std::cerr << "snapflow local: " << coordinator.err().message << "\n";
    return 1;
  }
  spdlog::info("started the coordinator, pid {}", children.children()[*coordinator].pid);
  std::string control, rest;
  for (int i = 0; i < 100 && control.empty(); ++i) {
    auto line = children.read_line(*coordinator, std::chrono::milliseconds(100));
    if (line && line->find("listening") != std::string::npos) {
      control = field(*line, "control");
      rest = field(*line, "rest");
    }
    if (!children.reap_exited().empty()) break;
  }
  if (control.empty() || rest.empty()) {
    std::cerr << "snapflow local: the coordinator did not start (see its log above)\n";
    return 1;
  }
  for (int w = 0; w < o.workers; ++w) {
    std::vector<std::string> worker_args;
    if (from_program) worker_args.push_back("worker");
    const std::vector<std::string> common{
        "--coordinator", control, "--id", "local-worker-" + std::to_string(w + 1), "--slots",
        std::to_string(o.slots), "--data-bind", "tcp://127.0.0.1:*", "--executor", o.executor,
        "--heartbeat-interval-ms", heartbeat_ms,
        // The job's files may lie under the working folder (where its relative paths resolve,
        // as they did before workers confined them) and under the job file's own folder.
        "--data-root", std::filesystem::current_path().string()};
    worker_args.insert(worker_args.end(), common.begin(), common.end());
    if (!from_program) {
      worker_args.push_back("--data-root");
      worker_args.push_back(std::filesystem::absolute(o.job_file).parent_path().string());
    }
    worker_args.insert(worker_args.end(), program_args.begin(), program_args.end());
    if (o.pin_workers) {
      worker_args.push_back("--cpus");
      worker_args.push_back(format_cpu_list(cpu_share(cpus, o.workers, w)));
    }
    if (!o.worker_scheduling.empty()) {
      worker_args.push_back("--scheduling");
      worker_args.push_back(o.worker_scheduling);
    }
    worker_args.insert(worker_args.end(), log_args.begin(), log_args.end());
    auto worker = children.spawn("worker-" + std::to_string(w + 1), worker_binary, worker_args,
                                 false);
    if (!worker) {
      std::cerr << "snapflow local: " << worker.err().message << "\n";
      return 1;
    }
    spdlog::info("started worker {}, pid {}", w + 1, children.children()[*worker].pid);
  }
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  {
    std::ostringstream header;
    header << "snapflow local: coordinator " << control << ", REST and web page at http://"
           << rest << "/, " << o.workers << " workers x " << o.slots << " slots"
           << (o.pin_workers ? " (each on CPUs of its own)" : "") << ", state in "
           << state_dir.string()
           << (temporary_state.path.empty() ? "" : " (removed when this command exits)") << "\n";
    say(header.str());
  }

  // Watches the children: a worker that exits is started again with the same id and
  // arguments (its tasks fail over, the job restarts from its latest checkpoint), at most
  // max_worker_restarts times within restart_window each; the coordinator exiting ends the run.
  constexpr std::size_t max_worker_restarts = 5;
  constexpr auto restart_window = std::chrono::minutes(1);
  std::vector<std::deque<std::chrono::steady_clock::time_point>> restart_times(
      children.children().size());
  std::size_t worker_restarts = 0;
  std::optional<std::string> coordinator_exit;
  // `PROGRAM submit`, while it runs: its exit is no worker's.
  std::optional<std::size_t> submitter;
  std::optional<std::string> submitter_exit;
  const auto supervise = [&](bool restart_workers) {
    for (const auto& exit : children.reap_exited()) {
      if (exit.index == *coordinator) {
        coordinator_exit = exit.description;
        continue;
      }
      if (submitter && exit.index == *submitter) {
        submitter_exit = exit.description;
        continue;
      }
      const std::string prefix = tty ? "\nsnapflow local: " : "snapflow local: ";
      if (!restart_workers) {
        std::cerr << prefix << exit.description << "\n";
        continue;
      }
      auto& times = restart_times.at(exit.index);
      const auto now = std::chrono::steady_clock::now();
      while (!times.empty() && now - times.front() > restart_window) times.pop_front();
      if (times.size() >= max_worker_restarts) {
        std::cerr << prefix << exit.description << "; it was restarted " << max_worker_restarts
                  << " times within a minute already, not starting it again\n";
        continue;
      }
      auto pid = children.respawn(exit.index);
      if (!pid) {
        std::cerr << prefix << exit.description << "; cannot restart it: " << pid.err().message
                  << "\n";
        continue;
      }
      times.push_back(now);
      ++worker_restarts;
      std::cerr << prefix << exit.description << "; restarting it (pid " << *pid << ")\n";
    }
  };
  // Sleeps `period` in short steps, watching the children; returns early on a signal or when
  // the coordinator exits.
  const auto watch_for = [&](std::chrono::milliseconds period, bool restart_workers) {
    const int signals = interrupted.load();
    const auto until = std::chrono::steady_clock::now() + period;
    while (std::chrono::steady_clock::now() < until) {
      supervise(restart_workers);
      if (coordinator_exit || interrupted.load() != signals) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  const auto report_coordinator_exit = [&] {
    std::cerr << (tty ? "\n" : "") << "snapflow local: the " << *coordinator_exit
              << "; stopping the workers\n";
  };

  rest_client client(rest);
  std::string job;
  if (from_program) {
    auto submitted = submit_program(children, o.program, rest, program_args, submitter);
    supervise(false);
    if (!submitted) {
      if (coordinator_exit) report_coordinator_exit();
      std::cerr << "snapflow local: " << submitted.err().message << "\n";
      return 1;
    }
    job = *submitted;
    say("submitted job " + job + " from program " + o.program + "\n");
  } else {
    auto submitted =
        client.post("/jobs?name=" + query_value(o.job_file), job_text.str(), "application/toml");
    if (!submitted) {
      supervise(false);
      if (coordinator_exit) report_coordinator_exit();
      std::cerr << "snapflow local: " << submitted.err().message << "\n";
      return 1;
    }
    job = (*submitted)["jobid"];
    say("submitted job " + job + " from " + o.job_file + "\n");
  }

  const auto started = std::chrono::steady_clock::now();
  std::string last_plain;
  std::string state = "CREATED";
  json last_checkpoints;
  std::uint64_t job_restarts = 0;
  int cancel_requests = 0;
  records_rate rate;
  for (;;) {
    supervise(cancel_requests == 0);
    if (coordinator_exit) break;
    if (interrupted.load() > cancel_requests) {
      cancel_requests = interrupted.load();
      if (cancel_requests == 1) {
        say("\ncancelling job " + job + " (Ctrl-C again to stop at once)\n");
        (void)client.patch("/jobs/" + job + "?mode=cancel");
      } else {
        break;
      }
    }
    auto details = client.get("/jobs/" + job);
    if (details) {
      state = (*details)["state"];
      job_restarts = (*details).value("restarts", std::uint64_t{0});
      auto cps = client.get("/jobs/" + job + "/checkpoints");
      std::ostringstream line;
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      line << "[" << std::fixed;
      line.precision(1);
      line << elapsed << "s] " << state << "  restarts " << job_restarts;
      rate.add((*details).value("source-records", std::uint64_t{0}),
               (*details).value("records-timestamp", std::int64_t{0}), job_restarts);
      line << "  " << format_count(static_cast<double>(rate.total_across_restarts()))
           << " records";
      if (auto per_s = rate.per_second()) line << ", " << format_count(*per_s) << "/s";
      if (cps) {
        last_checkpoints = *cps;
        const auto& latest = (*cps)["latest"]["completed"];
        line << "  checkpoints " << (*cps)["counts"]["completed"] << " completed, "
             << (*cps)["counts"]["failed"] << " failed";
        if (!latest.is_null())
          line << "  last #" << latest["id"] << " in "
               << format_us(latest["end_to_end_duration_us"].get<double>());
      }
      if ((*details).value("waiting-for-slots", false)) line << "  (waiting for slots)";
      if (tty) {
        say("\r" + line.str() + "\033[K");
      } else if (line.str().substr(line.str().find(']')) != last_plain) {
        last_plain = line.str().substr(line.str().find(']'));
        say(line.str() + "\n");
      }
      if (state == "FINISHED" || state == "FAILED" || state == "CANCELED") break;
    }
    if (o.timeout_s > 0 &&
        std::chrono::steady_clock::now() - started > std::chrono::seconds(o.timeout_s)) {
      std::cerr << "\nsnapflow local: --timeout reached, cancelling\n";
      (void)client.patch("/jobs/" + job + "?mode=cancel");
      state = "TIMEOUT";
      break;
    }
    watch_for(std::chrono::milliseconds(tty ? 250 : 1000), cancel_requests == 0);
    if (coordinator_exit) break;
  }
  if (tty) say("\n");
  if (coordinator_exit) report_coordinator_exit();

  std::ostringstream summary;
  if (coordinator_exit)
    summary << "\nsummary: job " << job << ": the coordinator exited while the job was " << state
            << "\n";
  else
    summary << "\nsummary: job " << job << " " << state << "\n";
  {
    const double run_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    summary << "  records: " << rate.total_across_restarts() << " from the sources";
    if (rate.attempts() > 1)
      summary << " over " << rate.attempts()
              << " attempts, as each last reported them (replays count again)";
    if (auto avg = rate.average_per_second())
      summary << ", " << format_count(*avg) << "/s on average while running";
    summary << " (" << std::fixed << std::setprecision(1) << run_s << " s)\n"
            << std::defaultfloat;
  }
  summary << "  restarts: " << job_restarts << " of the job, " << worker_restarts
          << " of worker processes\n";
  if (!last_checkpoints.is_null()) {
    const auto& counts = last_checkpoints["counts"];
    const auto& e2e = last_checkpoints["summary"]["end_to_end_duration_us"];
    summary << "  checkpoints: " << counts["completed"] << " completed, " << counts["failed"]
            << " failed, " << counts["restored"] << " restored\n"
            << "  end to end: p50 " << format_us(e2e["p50"].get<double>()) << ", p99 "
            << format_us(e2e["p99"].get<double>()) << ", max "
            << format_us(e2e["max"].get<double>()) << "\n";
  }
  if (!coordinator_exit) {
    if (auto details = client.get("/jobs/" + job); details && details->contains("failure-cause"))
      summary << "  cause: " << (*details)["failure-cause"].get<std::string>() << "\n";
  }
  say(summary.str());
  if (coordinator_exit) return 1;

  if (o.keep_running && cancel_requests == 0) {
    say("\nthe job has ended; the cluster keeps running: REST API and web page at http://" +
        rest + "/ (Ctrl-C or SIGTERM stops it)\n");
    const int signals = interrupted.load();
    while (interrupted.load() == signals && !coordinator_exit)
      watch_for(std::chrono::milliseconds(1000), true);
    if (coordinator_exit) {
      report_coordinator_exit();
      return 1;
    }
    say("stopping the cluster\n");
  }
  children.stop_all(std::chrono::milliseconds(5000));
  if (state == "FINISHED") return 0;
  if (cancel_requests > 0) return 130;
  return 1;
}

}  // namespace snapflow::cli
