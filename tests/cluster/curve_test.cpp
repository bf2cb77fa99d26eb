// CURVE: only workers whose public key is on the coordinator's allowlist get in.
#include <catch2/catch.hpp>
#include <fstream>
#include <zmq.hpp>

#include "tests/cluster/cluster_support.hpp"
#include "transport/curve_keys.hpp"
#include "transport/envelope.hpp"

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

TEST_CASE("with CURVE a key bound to a worker id cannot speak for another worker") {
  REQUIRE(transport::curve_available());
  temp_dir dir;
  const auto coordinator_keys = keygen(dir.path() / "coordinator");
  const auto good_keys = keygen(dir.path() / "good");
  const auto spare_keys = keygen(dir.path() / "spare");
  // good's key may only register "good"; the spare key may register any id.
  std::ofstream(dir.path() / "allowed") << good_keys.public_key << " good\n"
                                        << spare_keys.public_key << "\n";
  coordinator_process coordinator(
      dir.path() / "state",
      {"--curve-secret-key", (dir.path() / "coordinator.secret").string(), "--curve-allowlist",
       (dir.path() / "allowed").string()});
  const std::string coordinator_public = (dir.path() / "coordinator.public").string();
  const auto curve_args = [&](const char* name) {
    return std::vector<std::string>{"--curve-secret-key",
                                    (dir.path() / (std::string(name) + ".secret")).string(),
                                    "--curve-coordinator-key", coordinator_public};
  };
  auto good = start_worker(coordinator.control(), "good", curve_args("good"));
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(sources_job(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));

  // good's key under another worker id: the handshake passes ZAP, the registration does not,
  // and the worker exits saying why.
  auto thief = start_worker(coordinator.control(), "thief", curve_args("good"));
  CHECK(thief->wait_exit(patience) == 3);
  CHECK_THAT(thief->stderr_text(), Catch::Contains("bound to worker id 'good'"));

  // An allowed key sending as "good" (ROUTER_HANDOVER hands it good's routing id) without
  // good's key: nothing it sends is acted on.
  const std::uint64_t refused_before = coordinator.overview().value("refused-messages", 0ull);
  const json details = coordinator.job(job);
  const json& source = details["vertices"][0];
  const execution_attempt_id attempt{
      {source["id"].get<vertex_id>(), source["subtasks"][0]["subtask"].get<std::uint32_t>()},
      source["subtasks"][0]["attempt"].get<std::uint32_t>()};
  {
    zmq::context_t context(1);
    zmq::socket_t impostor(context, zmq::socket_type::dealer);
    impostor.set(zmq::sockopt::linger, 0);
    impostor.set(zmq::sockopt::routing_id, "good");
    REQUIRE_FALSE(transport::apply_curve_client(
        impostor, {spare_keys, transport::read_key_file(coordinator_public).value()}));
    impostor.connect(coordinator.control());
    const std::string forged = wire::encode(wire::task_state_update{
        job, attempt, wire::task_state::failed, "forged by an impostor"});
    REQUIRE(impostor.send(zmq::buffer(forged), zmq::send_flags::none));
    CHECK(coordinator.process().wait_for_stderr(
        "sent with a CURVE key other than the one this worker registered with", patience));
    CHECK(coordinator.overview().value("refused-messages", 0ull) > refused_before);
  }
  // The forged failure did nothing, and once good's own connection is back (the takeover may
  // have cost a trigger or two, so no claim about restarts) its checkpoints complete again.
  const auto completed = coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  CHECK(coordinator.wait_for_completed_checkpoints(job, completed + 2));
  CHECK(coordinator.job(job).dump().find("forged") == std::string::npos);
  CHECK(coordinator.process().count_in_stderr("forged by an impostor") == 0);
  CHECK_FALSE(good->exited());
}
