// `snapflow local` end to end: a coordinator and two runtime workers as its children, the
// progress lines with record counts, the summary, its own logger, --pin-workers and
// --worker-scheduling; progress through a pipe while the job runs, the coordinator dying, a
// worker killed and restarted, --keep-running, its temporary state folder removed, and the job
// id in committed file names (scripts/check_output.py --job).
#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cmd/cpu_affinity.hpp"
#include "tests/cluster/child_process.hpp"
#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"

using namespace snapflow::testing;

namespace {

// The example job, smaller, writing into the test's folder; `rate` records/s per source subtask
// (0 = as fast as it goes) makes it last a known while.
std::string small_job(const std::filesystem::path& out, int count, int rate = 0) {
  return "[job]\nname = \"cli-test\"\nparallelism = 2\n\n"
         "[checkpointing]\ninterval_ms = 50\nmode = \"exactly_once\"\n\n"
         "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
         "params = { count = " +
         std::to_string(count) + ", keys = 8, rate = " + std::to_string(rate) +
         " }\n\n"
         "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
         "partition = \"hash\"\n\n"
         "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"sum\"\n"
         "params = { path = \"" +
         out.string() + "\" }\n";
}

struct local_run {
  std::optional<int> code;
  std::string out;
  std::string err;
  pid_t pid = -1;
};

// `snapflow local` with two workers of two slots on small_job(count), to its end.
local_run run_local(const temp_dir& dir, int count, std::vector<std::string> extra_args = {}) {
  const auto job_file = dir.path() / "job.toml";
  std::ofstream(job_file) << small_job(dir.path() / "out", count);
  std::vector<std::string> argv{SNAPFLOW_CLI_BIN, "local",       "--job",     job_file.string(),
                                "--workers",      "2",           "--slots",   "2",
                                "--state-dir",    (dir.path() / "state").string(),
                                "--timeout",      "240",         "--log-level", "info"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  child_process cli(argv);
  local_run run;
  run.code = cli.wait_exit(std::chrono::seconds(300));
  run.out = cli.stdout_text();
  run.err = cli.stderr_text();
  run.pid = cli.pid();
  return run;
}

// `snapflow local` on small_job(count, rate), still running when this returns. Without
// --state-dir unless `state_dir` is given.
std::unique_ptr<child_process> start_local(const temp_dir& dir, int count, int rate,
                                           std::vector<std::string> extra_args = {},
                                           const std::string& job_name = "job.toml",
                                           int slots = 2) {
  const auto job_file = dir.path() / job_name;
  std::ofstream(job_file) << small_job(dir.path() / "out", count, rate);
  std::vector<std::string> argv{SNAPFLOW_CLI_BIN, "local",   "--job",   job_file.string(),
                                "--workers",      "2",       "--slots", std::to_string(slots),
                                "--timeout",      "240",     "--log-level", "info"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return std::make_unique<child_process>(argv);
}

// The first match of `pattern`'s group 1 in `text`; empty when there is none.
std::string first_match(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return {};
  return m[1].str();
}

// The pid `snapflow local` logged for one of its children ("started worker 1, pid N").
pid_t logged_pid(child_process& cli, const std::string& what) {
  const std::string line = "started " + what + ", pid ";
  if (!cli.wait_for_stderr(line, patience)) return -1;
  REQUIRE(eventually([&] { return !first_match(cli.stderr_text(), line + "([0-9]+)\n").empty(); }));
  return static_cast<pid_t>(std::stol(first_match(cli.stderr_text(), line + "([0-9]+)\n")));
}

// The temporary state folder the header line names ("state in DIR (removed when ...)").
std::filesystem::path temporary_state_dir(child_process& cli) {
  if (!cli.wait_for_stdout("(removed when this command exits)", patience)) return {};
  return first_match(cli.stdout_text(), R"(state in (\S+) \(removed when this command exits\))");
}

bool job_running(const child_process& cli) {
  return cli.stdout_text().find("] RUNNING") != std::string::npos;
}

}  // namespace

TEST_CASE("snapflow local: progress with records, an exact record total, exit 0") {
  temp_dir dir;
  const auto [code, out, err, pid] = run_local(dir, 200'000);
  INFO("stdout:\n" << out << "\nstderr:\n" << err);
  REQUIRE(code);
  CHECK(*code == 0);
  // Not a terminal: plain progress lines, each with the records the sources emitted.
  CHECK(
      std::regex_search(out, std::regex(R"(\[[0-9.]+s\] \w+  restarts 0  [0-9.]+[kMG]? records)")));
  CHECK_THAT(out, Catch::Contains("summary: job "));
  CHECK_THAT(out, Catch::Contains(" FINISHED"));
  // The final counters travel before the tasks report their end, so the total is exact.
  CHECK_THAT(out, Catch::Contains("records: 200000 from the sources"));
  // Its own logger: role and pid on every line, on stderr.
  CHECK_THAT(err,
             Catch::Contains("cli[" + std::to_string(pid) + "] started the coordinator"));
  CHECK_THAT(out, Catch::Contains("restarts: 0 of the job, 0 of worker processes"));
  // A --state-dir of the user's is kept.
  CHECK(std::filesystem::is_directory(dir.path() / "state" / "jobs"));
}

TEST_CASE("snapflow local: progress reaches a pipe line by line while the job runs") {
  temp_dir dir;
  // 2 sources x 1,000 records/s: about 6 s.
  auto cli = start_local(dir, 12'000, 1'000, {"--state-dir", (dir.path() / "state").string()});
  // A progress line saying RUNNING arrives while the command still runs: it was flushed, not
  // held in a buffer until the end.
  REQUIRE(eventually([&] { return job_running(*cli) || cli->exited(); }, patience));
  INFO("stdout:\n" << cli->stdout_text() << "\nstderr:\n" << cli->stderr_text());
  CHECK(job_running(*cli));
  CHECK_FALSE(cli->exited());
  const auto code = cli->wait_exit(std::chrono::seconds(60));
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(cli->stdout_text(), Catch::Contains("records: 12000 from the sources"));
}

TEST_CASE("snapflow local: the coordinator dying ends the run with exit code 1 and says so") {
  temp_dir dir;
  // Would run for minutes.
  auto cli = start_local(dir, 1'000'000, 1'000);
  const pid_t coordinator = logged_pid(*cli, "the coordinator");
  REQUIRE(coordinator > 0);
  const auto state_dir = temporary_state_dir(*cli);
  REQUIRE_FALSE(state_dir.empty());
  CHECK(std::filesystem::is_directory(state_dir));
  REQUIRE(eventually([&] { return job_running(*cli); }, patience));
  REQUIRE(::kill(coordinator, SIGKILL) == 0);
  const auto code = cli->wait_exit(patience);
  INFO("stdout:\n" << cli->stdout_text() << "\nstderr:\n" << cli->stderr_text());
  REQUIRE(code);
  CHECK(*code == 1);
  CHECK_THAT(cli->stderr_text(),
             Catch::Contains("the coordinator exited, killed by signal 9") &&
                 Catch::Contains("stopping the workers"));
  CHECK_THAT(cli->stdout_text(), Catch::Contains("the coordinator exited while the job was RUNNING"));
  // The state folder it made up is gone with it.
  CHECK_FALSE(std::filesystem::exists(state_dir));
}

TEST_CASE("snapflow local: a worker killed with kill -9 is restarted and the job ends exactly once") {
  temp_dir dir;
  // 2 sources x 2,000 records/s: about 5 s, checkpoints every 50 ms. One slot per worker, so
  // the job (parallelism 2) runs on both and the killed one hosts some of its tasks.
  auto cli = start_local(dir, 20'000, 2'000, {"--state-dir", (dir.path() / "state").string()},
                         "job.toml", 1);
  const pid_t worker = logged_pid(*cli, "worker 1");
  REQUIRE(worker > 0);
  // Killed once the job runs and has completed a checkpoint.
  REQUIRE(eventually(
      [&] { return std::regex_search(cli->stdout_text(), std::regex("checkpoints [1-9]")); },
      patience));
  REQUIRE(::kill(worker, SIGKILL) == 0);
  CHECK(cli->wait_for_stderr("worker-1 exited, killed by signal 9", patience));
  const auto code = cli->wait_exit(std::chrono::seconds(60));
  const std::string out = cli->stdout_text(), err = cli->stderr_text();
  INFO("stdout:\n" << out << "\nstderr:\n" << err);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(err, Catch::Contains("worker-1 exited, killed by signal 9 (Killed); restarting it"));
  CHECK_THAT(out, Catch::Contains(" FINISHED"));
  // The summary shows the restarts and counts the records of every attempt.
  CHECK(std::regex_search(out, std::regex("restarts: [1-9][0-9]* of the job, 1 of worker processes")));
  CHECK(std::regex_search(out, std::regex("records: [1-9][0-9]* from the sources over [2-9] attempts")));
  // Exactly once across the kill.
  const auto output = read_committed_output(dir.path() / "out", 20'000, 8);
  CHECK(output.bad_lines == 0);
  CHECK(output.missing == 0);
  CHECK(output.duplicated == 0);
  CHECK(output.wrong_sums == 0);
}

TEST_CASE("snapflow local --keep-running: REST answers after the job ends, SIGTERM exits 0") {
  temp_dir dir;
  auto cli = start_local(dir, 2'000, 0, {"--keep-running"});
  const auto state_dir = temporary_state_dir(*cli);
  REQUIRE_FALSE(state_dir.empty());
  const bool kept = cli->wait_for_stdout("the cluster keeps running", std::chrono::seconds(60));
  INFO("stdout:\n" << cli->stdout_text() << "\nstderr:\n" << cli->stderr_text());
  REQUIRE(kept);
  CHECK_THAT(cli->stdout_text(), Catch::Contains("summary: job ") && Catch::Contains(" FINISHED"));
  const std::string port =
      first_match(cli->stdout_text(), R"(keeps running: REST API and web page at http://127\.0\.0\.1:([0-9]+)/)");
  REQUIRE_FALSE(port.empty());
  rest_client rest("127.0.0.1", std::stoi(port));
  // Still up a while after the job ended.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK_FALSE(cli->exited());
  const auto overview = rest.get("/overview");
  CHECK(overview.status == 200);
  CHECK(overview.body.value("jobs-finished", 0) == 1);
  cli->send_signal(SIGTERM);
  const auto code = cli->wait_exit(patience);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(cli->stdout_text(), Catch::Contains("stopping the cluster"));
  CHECK(rest.get("/overview").status == 0);  // nobody answers any more
  CHECK_FALSE(std::filesystem::exists(state_dir));
}

TEST_CASE("snapflow local: Ctrl-C cancels, exits 130 and removes its temporary state folder") {
  temp_dir dir;
  auto cli = start_local(dir, 1'000'000, 1'000);
  const auto state_dir = temporary_state_dir(*cli);
  REQUIRE_FALSE(state_dir.empty());
  REQUIRE(eventually([&] { return job_running(*cli); }, patience));
  cli->send_signal(SIGINT);
  const auto code = cli->wait_exit(patience);
  INFO("stdout:\n" << cli->stdout_text() << "\nstderr:\n" << cli->stderr_text());
  REQUIRE(code);
  CHECK(*code == 130);
  CHECK_THAT(cli->stdout_text(), Catch::Contains("CANCELED"));
  CHECK_FALSE(std::filesystem::exists(state_dir));
}

TEST_CASE("snapflow local twice into one folder: committed files per job, check_output --job") {
  temp_dir dir;
  std::vector<std::string> jobs;
  for (const char* job_file : {"first.toml", "second.toml"}) {
    auto cli = start_local(dir, 4'000, 0, {}, job_file);
    const auto code = cli->wait_exit(std::chrono::seconds(60));
    INFO("stdout:\n" << cli->stdout_text() << "\nstderr:\n" << cli->stderr_text());
    REQUIRE(code);
    REQUIRE(*code == 0);
    jobs.push_back(first_match(cli->stdout_text(), "submitted job ([0-9a-f]+) "));
    REQUIRE(jobs.back().size() == 32);
  }
  // Every committed file names its job; both runs' files are there, none overwritten.
  std::map<std::string, int> files_of;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "out")) {
    const std::string name = e.path().filename().string();
    if (name[0] == '.') continue;
    INFO(name);
    REQUIRE(name.rfind("part-", 0) == 0);
    ++files_of[name.substr(5, 32)];
  }
  CHECK(files_of.size() == 2);
  CHECK(files_of.count(jobs[0]) == 1);
  CHECK(files_of.count(jobs[1]) == 1);

  const auto check = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{SNAPFLOW_PYTHON, SNAPFLOW_CHECK_OUTPUT_SCRIPT,
                                  (dir.path() / "out").string(), "4000", "--keys", "8"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto script = std::make_unique<child_process>(argv);
    auto code = script->wait_exit(patience);
    return std::make_tuple(code, script->stdout_text(), script->stderr_text());
  };
  // Two jobs there: it will not guess which one.
  auto [code, out, err] = check({});
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(err, Catch::Contains("2 jobs wrote into") && Catch::Contains("--job"));
  for (const auto& job : jobs) {
    std::tie(code, out, err) = check({"--job", job});
    INFO(out << err);
    REQUIRE(code);
    CHECK(*code == 0);
    CHECK_THAT(out, Catch::Contains("job " + job + ": ") &&
                        Catch::Contains("0 seq missing, 0 duplicated, 0 wrong sums"));
  }
}

TEST_CASE("snapflow local --pin-workers gives each worker CPUs of its own") {
  temp_dir dir;
  const auto [code, out, err, pid] = run_local(dir, 20'000, {"--pin-workers"});
  INFO("stdout:\n" << out << "\nstderr:\n" << err);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(out, Catch::Contains("records: 20000 from the sources"));
  auto allowed = snapflow::allowed_cpus();
  REQUIRE(allowed);
  CHECK_THAT(out, Catch::Contains("(each on CPUs of its own)"));
  for (int w = 0; w < 2; ++w) {
    const auto share = snapflow::cpu_share(*allowed, 2, w);
    CHECK_THAT(err, Catch::Contains("running on CPU " + snapflow::format_cpu_list(share)));
  }
}

TEST_CASE("snapflow local: workers under SCHED_BATCH by default, --worker-scheduling normal") {
  for (const std::string policy : {"batch", "normal"}) {
    temp_dir dir;
    std::vector<std::string> extra;
    if (policy == "normal") extra = {"--worker-scheduling", "normal"};
    const auto [code, out, err, pid] = run_local(dir, 20'000, extra);
    INFO("policy " << policy << "\nstdout:\n" << out << "\nstderr:\n" << err);
    REQUIRE(code);
    CHECK(*code == 0);
    CHECK_THAT(out, Catch::Contains("records: 20000 from the sources"));
    // Each of the two workers says which policy its threads run under.
    const std::string line = "scheduling policy " + policy;
    const auto first = err.find(line);
    REQUIRE(first != std::string::npos);
    CHECK(err.find(line, first + 1) != std::string::npos);
    const std::string other = policy == "batch" ? "normal" : "batch";
    CHECK(err.find("scheduling policy " + other) == std::string::npos);
  }
}

TEST_CASE("snapflow: bad log level and no coordinator are clear errors") {
  child_process bad_level({SNAPFLOW_CLI_BIN, "list", "--log-level", "loud"});
  auto code = bad_level.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(bad_level.stderr_text(), Catch::Contains("unknown log level 'loud'"));

  // Options the parser refuses: code 2 too, with the reason.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"local", "--worker-scheduling", "fast"},
        std::vector<std::string>{"local", "--workers", "abc"},
        std::vector<std::string>{"list", "--no-such-option"}}) {
    std::vector<std::string> argv{SNAPFLOW_CLI_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    child_process bad(argv);
    auto bad_code = bad.wait_exit(std::chrono::seconds(30));
    INFO(args[1] << " " << (args.size() > 2 ? args[2] : ""));
    REQUIRE(bad_code);
    CHECK(*bad_code == 2);
    CHECK_FALSE(bad.stderr_text().empty());
  }

  // Port 1 on loopback: nothing listens there.
  child_process nobody({SNAPFLOW_CLI_BIN, "list", "--coordinator", "127.0.0.1:1"});
  code = nobody.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code != 0);
  CHECK_THAT(nobody.stderr_text(), Catch::Contains("no coordinator answering at http://127.0.0.1:1"));
}

TEST_CASE("snapflow local: a worker that keeps exiting is restarted 5 times, then left stopped") {
  temp_dir dir;
  // A "worker" that exits at once with status 1; the job waits for slots until --timeout.
  const auto job_file = dir.path() / "job.toml";
  std::ofstream(job_file) << small_job(dir.path() / "out", 1'000);
  auto cli = std::make_unique<child_process>(std::vector<std::string>{
      SNAPFLOW_CLI_BIN, "local", "--job", job_file.string(), "--workers", "2", "--worker",
      "/bin/false", "--timeout", "4", "--state-dir", (dir.path() / "state").string()});
  const auto code = cli->wait_exit(std::chrono::seconds(60));
  const std::string out = cli->stdout_text(), err = cli->stderr_text();
  INFO("stdout:\n" << out << "\nstderr:\n" << err);
  REQUIRE(code);
  CHECK(*code == 1);
  for (const std::string worker : {"worker-1", "worker-2"}) {
    CHECK(cli->count_in_stderr(worker + " exited with status 1; restarting it (pid ") == 5);
    CHECK(cli->count_in_stderr(worker + " exited with status 1; it was restarted 5 times within "
                                        "a minute already, not starting it again") == 1);
  }
  CHECK_THAT(out, Catch::Contains("restarts: 0 of the job, 10 of worker processes"));
}
