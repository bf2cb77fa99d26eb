// `snapflow local` end to end: a coordinator and two runtime workers as its children, the
// progress lines with record counts, the summary, and its own logger.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>

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

}  // namespace

TEST_CASE("snapflow local: progress with records, an exact record total, exit 0") {
  temp_dir dir;
  const auto job_file = dir.path() / "job.toml";
  std::ofstream(job_file) << small_job(dir.path() / "out", 200'000);
  child_process cli({SNAPFLOW_CLI_BIN, "local", "--job", job_file.string(), "--workers", "2",
                     "--slots", "2", "--state-dir", (dir.path() / "state").string(), "--timeout",
                     "240", "--log-level", "info"});
  const auto code = cli.wait_exit(std::chrono::seconds(300));
  const std::string out = cli.stdout_text();
  const std::string err = cli.stderr_text();
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
             Catch::Contains("cli[" + std::to_string(cli.pid()) + "] started the coordinator"));
}

TEST_CASE("snapflow: bad log level and no coordinator are clear errors") {
  child_process bad_level({SNAPFLOW_CLI_BIN, "list", "--log-level", "loud"});
  auto code = bad_level.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(bad_level.stderr_text(), Catch::Contains("unknown log level 'loud'"));

  // Port 1 on loopback: nothing listens there.
  child_process nobody({SNAPFLOW_CLI_BIN, "list", "--coordinator", "127.0.0.1:1"});
  code = nobody.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code != 0);
  CHECK_THAT(nobody.stderr_text(), Catch::Contains("no coordinator answering at 127.0.0.1:1"));
}
