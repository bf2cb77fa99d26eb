// The coordinator's REST flags and the CLI's REST access, against real processes: one REST port
// per coordinator, no open REST on other machines' reach, token files, HTTPS with --ca-cert.
#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "tests/cluster/child_process.hpp"
#include "tests/cluster/cluster_support.hpp"
#include "tests/transport/rest/raw_connection.hpp"
#include "tests/transport/rest/self_signed_cert.hpp"

using namespace snapflow::testing;

namespace {

const char* job_text =
    "[job]\nname = \"cli-secure\"\nparallelism = 1\n\n"
    "[[operator]]\nuid = \"src\"\nkind = \"sequence_source\"\nparams = { count = 10 }\n\n"
    "[[operator]]\nuid = \"sink\"\nkind = \"print_sink\"\ninput = \"src\"\n";

std::vector<std::string> coordinator_args(const temp_dir& dir, const std::string& state,
                                          std::vector<std::string> extra) {
  std::vector<std::string> argv{SNAPFLOW_COORDINATOR_BIN, "--bind", "tcp://127.0.0.1:*",
                                "--state-dir", (dir.path() / state).string(), "--log-level",
                                "warn"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// The REST port of a started coordinator (from its listening line).
int rest_port(child_process& coordinator) {
  REQUIRE(coordinator.wait_for_stdout("listening", std::chrono::seconds(30)));
  const std::string rest = listening_field(coordinator.stdout_text(), "rest");
  return std::stoi(rest.substr(rest.rfind(':') + 1));
}

struct cli_run {
  std::optional<int> code;
  std::string out, err;
};

cli_run run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), SNAPFLOW_CLI_BIN);
  child_process cli(args);
  cli_run r;
  r.code = cli.wait_exit(std::chrono::seconds(60));
  r.out = cli.stdout_text();
  r.err = cli.stderr_text();
  return r;
}

}  // namespace

TEST_CASE("coordinator: a second coordinator on the same REST port exits 1, the first serves on") {
  temp_dir dir;
  child_process first(coordinator_args(dir, "a", {"--rest-port", "0"}));
  const int port = rest_port(first);
  child_process second(coordinator_args(dir, "b", {"--rest-port", std::to_string(port)}));
  const auto code = second.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code == 1);
  CHECK_THAT(second.stderr_text(), Catch::Contains("port in use"));
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10, 0);
  auto r = c.Get("/overview");
  REQUIRE(r);
  CHECK(r->status == 200);
}

TEST_CASE("coordinator: REST on a non-loopback address without a token exits 2") {
  temp_dir dir;
  child_process open_rest(coordinator_args(dir, "a", {"--rest-host", "0.0.0.0", "--rest-port", "0"}));
  const auto code = open_rest.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(open_rest.stderr_text(), Catch::Contains("--rest-token-file"));
  CHECK_THAT(open_rest.stderr_text(), Catch::Contains("--insecure-rest"));
  // --insecure-rest serves it anyway, with a warning.
  child_process insecure(coordinator_args(
      dir, "b", {"--rest-host", "0.0.0.0", "--rest-port", "0", "--insecure-rest"}));
  rest_port(insecure);
  CHECK(insecure.wait_for_stderr("without a token", std::chrono::seconds(10)));
}

TEST_CASE("coordinator: an unreadable or empty token file and a bad certificate exit 2") {
  temp_dir dir;
  std::ofstream(dir.path() / "empty-token") << "\n";
  std::ofstream(dir.path() / "bad.pem") << "not a certificate\n";
  for (const auto& extra : std::vector<std::vector<std::string>>{
           {"--rest-token-file", (dir.path() / "missing").string()},
           {"--rest-token-file", (dir.path() / "empty-token").string()},
           {"--rest-tls-cert", (dir.path() / "bad.pem").string(), "--rest-tls-key",
            (dir.path() / "bad.pem").string()}}) {
    child_process c(coordinator_args(dir, "a", extra));
    const auto code = c.wait_exit(std::chrono::seconds(30));
    REQUIRE(code);
    CHECK(*code == 2);
    CHECK_THAT(c.stderr_text(), Catch::Contains(extra[1]));
  }
}

TEST_CASE("CLI: a token file round trip (flag and SNAPFLOW_REST_TOKEN_FILE)") {
  temp_dir dir;
  std::ofstream(dir.path() / "token") << "cli-token-1234\n";
  std::ofstream(dir.path() / "wrong") << "not-the-token\n";
  std::ofstream(dir.path() / "job.toml") << job_text;
  child_process coordinator(coordinator_args(
      dir, "a", {"--rest-port", "0", "--rest-token-file", (dir.path() / "token").string()}));
  const std::string address = "127.0.0.1:" + std::to_string(rest_port(coordinator));
  const std::string job = (dir.path() / "job.toml").string();

  auto without = run_cli({"submit", job, "--coordinator", address});
  REQUIRE(without.code);
  CHECK(*without.code != 0);
  CHECK_THAT(without.err, Catch::Contains("--rest-token-file"));
  auto wrong = run_cli({"submit", job, "--coordinator", address, "--rest-token-file",
                        (dir.path() / "wrong").string()});
  REQUIRE(wrong.code);
  CHECK(*wrong.code != 0);
  auto right = run_cli({"submit", job, "--coordinator", address, "--rest-token-file",
                        (dir.path() / "token").string()});
  REQUIRE(right.code);
  CHECK(*right.code == 0);
  ::setenv("SNAPFLOW_REST_TOKEN_FILE", (dir.path() / "token").string().c_str(), 1);
  auto from_env = run_cli({"submit", job, "--coordinator", address});
  ::unsetenv("SNAPFLOW_REST_TOKEN_FILE");
  REQUIRE(from_env.code);
  CHECK(*from_env.code == 0);
  auto listed = run_cli({"list", "--coordinator", address, "--json"});  // GETs need none
  REQUIRE(listed.code);
  CHECK(*listed.code == 0);
  CHECK_THAT(listed.out, Catch::Contains("cli-secure"));
}

TEST_CASE("CLI: an https:// coordinator with --ca-cert") {
  temp_dir dir;
  const auto files = write_self_signed_cert(dir.path());
  child_process coordinator(coordinator_args(
      dir, "a", {"--rest-port", "0", "--rest-tls-cert", files.cert.string(), "--rest-tls-key",
                 files.key.string()}));
  const std::string address = "https://127.0.0.1:" + std::to_string(rest_port(coordinator));
  auto trusted = run_cli({"list", "--coordinator", address, "--ca-cert", files.cert.string()});
  REQUIRE(trusted.code);
  CHECK(*trusted.code == 0);
  auto untrusted = run_cli({"list", "--coordinator", address});
  REQUIRE(untrusted.code);
  CHECK(*untrusted.code != 0);
  CHECK_THAT(untrusted.err, Catch::Contains("--ca-cert"));
}

TEST_CASE("CLI: submit answers once the job is known, and exits 1 with the reason when its "
          "savepoint cannot be used") {
  temp_dir dir;
  std::ofstream(dir.path() / "job file.toml") << job_text;
  child_process coordinator(coordinator_args(dir, "state", {"--rest-port", "0"}));
  const std::string address = "127.0.0.1:" + std::to_string(rest_port(coordinator));
  const std::string job = (dir.path() / "job file.toml").string();

  auto outside = run_cli({"submit", job, "--coordinator", address, "--from-savepoint", "/etc"});
  REQUIRE(outside.code);
  CHECK(*outside.code != 0);
  CHECK_THAT(outside.err, Catch::Contains("/etc") && Catch::Contains("savepoint"));
  auto missing = run_cli(
      {"submit", job, "--coordinator", address, "--from-savepoint", "no such & savepoint"});
  REQUIRE(missing.code);
  CHECK(*missing.code != 0);
  CHECK_THAT(missing.err, Catch::Contains("no such & savepoint"));

  auto submitted = run_cli({"submit", job, "--coordinator", address});
  REQUIRE(submitted.code);
  REQUIRE(*submitted.code == 0);
  std::string id = submitted.out;
  id.erase(id.find_last_not_of(" \n") + 1);
  auto status = run_cli({"status", id, "--coordinator", address});
  REQUIRE(status.code);
  CHECK(*status.code == 0);
  CHECK_THAT(status.out, Catch::Contains("cli-secure"));
}

TEST_CASE("CLI: submit --claim-mode takes claim or no-claim with --from-savepoint, and exits "
          "non-zero with the reason otherwise") {
  temp_dir dir;
  std::ofstream(dir.path() / "job.toml") << job_text;
  const std::string job = (dir.path() / "job.toml").string();
  // Refused before any request: no coordinator listens here.
  auto bad = run_cli({"submit", job, "--coordinator", "127.0.0.1:1", "--from-savepoint", "sp",
                      "--claim-mode", "sometimes"});
  REQUIRE(bad.code);
  CHECK(*bad.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("sometimes") && Catch::Contains("claim or no-claim"));
  auto alone = run_cli({"submit", job, "--coordinator", "127.0.0.1:1", "--claim-mode", "claim"});
  REQUIRE(alone.code);
  CHECK(*alone.code == 2);
  CHECK_THAT(alone.err, Catch::Contains("--from-savepoint"));
  // The coordinator's refusal: CLAIM takes over only what lies in its own folders.
  child_process coordinator(coordinator_args(dir, "state", {"--rest-port", "0"}));
  const std::string address = "127.0.0.1:" + std::to_string(rest_port(coordinator));
  auto outside = run_cli({"submit", job, "--coordinator", address, "--from-savepoint", "/etc",
                          "--claim-mode", "CLAIM"});
  REQUIRE(outside.code);
  CHECK(*outside.code != 0);
  CHECK_THAT(outside.err, Catch::Contains("/etc") && Catch::Contains("claimMode=CLAIM"));
}

TEST_CASE("CLI: list and status answer while 64 slowloris connections hold the REST port") {
  temp_dir dir;
  std::ofstream(dir.path() / "job.toml") << job_text;
  child_process coordinator(coordinator_args(dir, "state", {"--rest-port", "0"}));
  const int port = rest_port(coordinator);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  // Each sends the start of a request and then nothing more, holding its connection open.
  std::vector<std::unique_ptr<raw_connection>> hostile;
  for (int i = 0; i < 64; ++i) {
    hostile.push_back(std::make_unique<raw_connection>(port));
    hostile.back()->send_text("GET /overview HTTP/1.1\r\nHost: x\r\nX-Slow: a");
  }
  auto submitted = run_cli({"submit", (dir.path() / "job.toml").string(), "--coordinator", address});
  REQUIRE(submitted.code);
  CHECK(*submitted.code == 0);
  for (int i = 0; i < 3; ++i) {
    auto listed = run_cli({"list", "--coordinator", address});
    REQUIRE(listed.code);
    CHECK(*listed.code == 0);
    CHECK_THAT(listed.out, Catch::Contains("cli-secure"));
  }
}
