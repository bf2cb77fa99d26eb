// CURVE: only workers whose public key is on the coordinator's allowlist get in.
#include <catch2/catch.hpp>
#include <fstream>

#include "tests/cluster/cluster_support.hpp"
#include "transport/curve_keys.hpp"

using namespace snapflow;
using namespace snapflow::testing;

namespace {

// Keys through the coordinator's keygen subcommand, as an operator would make them.
transport::curve_key_pair keygen(const std::filesystem::path& prefix) {
  child_process command({SNAPFLOW_COORDINATOR_BIN, "keygen", "--out", prefix.string()});
  REQUIRE(command.wait_exit(patience) == 0);
  auto keys = transport::read_secret_key_file(prefix.string() + ".secret");
  REQUIRE(keys);
  auto pub = transport::read_key_file(prefix.string() + ".public");
  REQUIRE(pub);
  CHECK(*pub == keys->public_key);
  return *keys;
}

}  // namespace

TEST_CASE("with CURVE a worker with an allowed key registers and others cannot") {
  REQUIRE(transport::curve_available());
  temp_dir dir;
  const auto coordinator_keys = keygen(dir.path() / "coordinator");
  const auto good_keys = keygen(dir.path() / "good");
  keygen(dir.path() / "rogue");
  std::ofstream(dir.path() / "allowed") << "# workers let in\n" << good_keys.public_key << "\n";

  coordinator_process coordinator(
      dir.path() / "state",
      {"--curve-secret-key", (dir.path() / "coordinator.secret").string(), "--curve-allowlist",
       (dir.path() / "allowed").string()});
  const std::string coordinator_public = (dir.path() / "coordinator.public").string();

  auto good = start_worker(coordinator.control(), "good",
                           {"--curve-secret-key", (dir.path() / "good.secret").string(),
                            "--curve-coordinator-key", coordinator_public});
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(sources_job(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));

  // A key not on the allowlist: ZAP denies the handshake, so nothing it sends arrives.
  auto rogue = start_worker(coordinator.control(), "rogue",
                            {"--curve-secret-key", (dir.path() / "rogue.secret").string(),
                             "--curve-coordinator-key", coordinator_public});
  // No CURVE at all: the handshake cannot even start.
  auto plain = start_worker(coordinator.control(), "plain");
  CHECK(coordinator.process().wait_for_stderr("CURVE: denied a connection", patience));
  // Both give up waiting for an answer after the heartbeat timeout, at least once.
  CHECK(rogue->wait_for_stderr("no answer from the coordinator", patience));
  CHECK(plain->wait_for_stderr("no answer from the coordinator", patience));

  const json overview = coordinator.overview();
  CHECK(overview["taskmanagers"] == 1);
  CHECK(overview["refused-messages"] == 0);
  CHECK(overview["bad-frames"] == 0);
  CHECK(rogue->count_in_stderr("registered with") == 0);
  CHECK(plain->count_in_stderr("registered with") == 0);
  CHECK_FALSE(rogue->exited());
  const auto completed = coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  CHECK(coordinator.wait_for_completed_checkpoints(job, completed + 2));
}

TEST_CASE("CURVE options need both halves and readable keys") {
  temp_dir dir;
  std::ofstream(dir.path() / "not-a-key") << "hello\n";
  child_process half({SNAPFLOW_COORDINATOR_BIN, "--curve-secret-key",
                      (dir.path() / "not-a-key").string()});
  child_process bad_key({SNAPFLOW_COORDINATOR_BIN, "--rest-port", "0", "--bind",
                         "tcp://127.0.0.1:*", "--curve-secret-key",
                         (dir.path() / "not-a-key").string(), "--curve-allowlist",
                         (dir.path() / "not-a-key").string()});
  CHECK(half.wait_exit(patience) == 2);
  CHECK_THAT(half.stderr_text(), Catch::Contains("--curve-allowlist"));
  CHECK(bad_key.wait_exit(patience) == 2);
  CHECK_THAT(bad_key.stderr_text(), Catch::Contains("not a Z85 CURVE key"));
}
