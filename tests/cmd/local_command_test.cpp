// `snapflow local` end to end: a coordinator and two runtime workers as its children, the
// progress lines with record counts, the summary, its own logger, --pin-workers and
// --worker-scheduling.
#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "cmd/cpu_affinity.hpp"
#include "tests/cluster/child_process.hpp"
#include "tests/cluster/cluster_support.hpp"

using namespace snapflow::testing;

namespace {

// The example job, smaller, writing into the test's folder.
std::string small_job(const std::filesystem::path& out, int count) {
  return "[job]\nname = \"cli-test\"\nparallelism = 2\n\n"
         "[checkpointing]\ninterval_ms = 50\nmode = \"exactly_once\"\n\n"
         "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
         "params = { count = " +
         std::to_string(count) +
         ", keys = 8 }\n\n"
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
