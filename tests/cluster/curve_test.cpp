// CURVE: only workers whose public key is on the coordinator's allowlist get in, and the data
// channels between workers are encrypted and let in only the keys the coordinator vouched for.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <zmq.hpp>

#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"
#include "transport/curve_keys.hpp"
#include "transport/data/data_frame.hpp"
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

  // An allowed key sending as "good" without good's key: with ROUTER_HANDOVER off its
  // connection never gets good's routing id while good's is open, so nothing it sends is taken
  // as good's (were it to get the id later, the key check would refuse it).
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
    for (int i = 0; i < 5; ++i)
      REQUIRE(impostor.send(zmq::buffer(forged), zmq::send_flags::none));
    // Past the impostor's handshake and frames: checkpoints go on completing meanwhile.
    const auto before = coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
    CHECK(coordinator.wait_for_completed_checkpoints(job, before + 3));
  }
  // The forged failure did nothing: no restart, and good's own connection was never cut.
  const auto completed = coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  CHECK(coordinator.wait_for_completed_checkpoints(job, completed + 2));
  CHECK(coordinator.job(job).dump().find("forged") == std::string::npos);
  CHECK(coordinator.process().count_in_stderr("forged by an impostor") == 0);
  CHECK(coordinator.job(job).value("restarts", 0) == 0);
  CHECK(good->count_in_stderr("registered with the coordinator") == 1);
  CHECK_FALSE(good->exited());
}

namespace {

constexpr std::int64_t curve_record_count = 60'000;
constexpr std::int64_t curve_key_count = 16;

// The exactly-once example at reduced size (as in exactly_once_job_test): 2 rate-limited
// sources, keyed_sum and a two-phase-commit sink of parallelism 4, so records cross between
// the two workers for about 1.5 s.
std::string curve_exactly_once_job(const std::filesystem::path& out) {
  std::ostringstream os;
  os << "[job]\nname = \"curve-exactly-once\"\nparallelism = 4\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 30\nmode = \"exactly_once\"\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = " << curve_record_count << ", keys = " << curve_key_count
     << ", rate = 20000 }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 4\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"sum\"\n"
     << "parallelism = 4\nparams = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

// The data endpoint a worker logged when it started ("data endpoint tcp://...,").
std::string logged_data_endpoint(const child_process& worker) {
  const std::string text = worker.stderr_text();
  const std::string marker = "data endpoint ";
  const auto at = text.find(marker);
  if (at == std::string::npos) return {};
  const auto start = at + marker.size();
  return text.substr(start, text.find_first_of(",\n", start) - start);
}

}  // namespace

TEST_CASE(
    "with CURVE the exactly-once example crosses encrypted data channels, and strangers "
    "on a worker's data port change nothing") {
  REQUIRE(transport::curve_available());
  temp_dir dir;
  keygen(dir.path() / "coordinator");
  const auto w1_keys = keygen(dir.path() / "w1");
  const auto w2_keys = keygen(dir.path() / "w2");
  const auto stranger_keys = keygen(dir.path() / "stranger");
  std::ofstream(dir.path() / "allowed") << w1_keys.public_key << " w1\n"
                                        << w2_keys.public_key << " w2\n";
  coordinator_process coordinator(
      dir.path() / "state", {"--curve-secret-key", (dir.path() / "coordinator.secret").string(),
                             "--curve-allowlist", (dir.path() / "allowed").string()});
  const std::string coordinator_public = (dir.path() / "coordinator.public").string();
  // Two slots each (the job needs four, its widest vertex), the runtime executor.
  const auto runtime_worker = [&](const std::string& id) {
    return std::make_unique<child_process>(std::vector<std::string>{
        SNAPFLOW_WORKER_BIN, "--coordinator", coordinator.control(), "--id", id, "--slots", "2",
        "--executor", "runtime", "--heartbeat-interval-ms", std::to_string(heartbeat_interval_ms),
        "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms), "--curve-secret-key",
        (dir.path() / (id + ".secret")).string(), "--curve-coordinator-key", coordinator_public,
        "--curve-peer-wait-ms", "3000", "--data-root", test_data_root()});
  };
  auto w1 = runtime_worker("w1");
  auto w2 = runtime_worker("w2");
  REQUIRE(coordinator.wait_for_workers(2));
  REQUIRE(w2->wait_for_stderr("CURVE (control and data)", patience));
  const std::string w2_data = logged_data_endpoint(*w2);
  REQUIRE(w2_data.rfind("tcp://127.0.0.1:", 0) == 0);

  const auto out = dir.path() / "out";
  const std::string job = coordinator.submit(curve_exactly_once_job(out));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));
  const json running = coordinator.job(job);
  // Subtasks on both workers: records cross the (encrypted) network between them.
  std::set<std::string> workers;
  for (const auto& vertex : running["vertices"])
    for (const auto& subtask : vertex["subtasks"]) workers.insert(subtask["worker"]);
  CHECK(workers == std::set<std::string>{"w1", "w2"});

  // Strangers forge a record for a keyed_sum subtask on w2 (a value that would break every sum
  // of its key), one without CURVE, one with a key no deployment names.
  const json& source = running["vertices"][0];
  const json& sum = running["vertices"][1];
  std::uint32_t consumer = 0;
  for (const auto& subtask : sum["subtasks"])
    if (subtask["worker"] == "w2") consumer = subtask["subtask"].get<std::uint32_t>();
  const channel_key forged_channel{job,      source["id"].get<vertex_id>(),
                                   0,        sum["id"].get<vertex_id>(),
                                   consumer, sum["subtasks"][0]["attempt"].get<std::uint32_t>()};
  const std::string forged = data::encode(
      data::data_frame{forged_channel, 0, element_batch{record{3, 3, 1'000'000'000, {}}}});
  {
    zmq::context_t context(1);
    zmq::socket_t plain(context, zmq::socket_type::dealer);
    plain.set(zmq::sockopt::linger, 0);
    plain.connect(w2_data);
    REQUIRE(plain.send(zmq::buffer(forged), zmq::send_flags::dontwait));
    zmq::socket_t stranger(context, zmq::socket_type::dealer);
    stranger.set(zmq::sockopt::linger, 0);
    REQUIRE_FALSE(transport::apply_curve_client(stranger, {stranger_keys, w2_keys.public_key}));
    stranger.connect(w2_data);
    REQUIRE(stranger.send(zmq::buffer(forged), zmq::send_flags::dontwait));
    // The keyless handshake fails on the mechanism, or as a hang-up when the client notices
    // first; either way it is refused and logged.
    CHECK(w2->wait_for_stderr("data plane: refused a connection: ", patience));
    CHECK(w2->wait_for_stderr("data plane CURVE: denied a connection", patience));
  }

  const bool finished =
      eventually([&] { return coordinator.job(job).value("state", "") == "FINISHED"; }, 40s);
  INFO("job: " << coordinator.job(job).dump() << "\nw1 stderr: " << w1->stderr_text()
               << "\nw2 stderr: " << w2->stderr_text());
  REQUIRE(finished);
  CHECK(coordinator.job(job).value("restarts", 0) == 0);
  const committed_output o = read_committed_output(out, curve_record_count, curve_key_count);
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.wrong_sums == 0);
  CHECK(o.lines == static_cast<std::size_t>(curve_record_count));
  CHECK_FALSE(w2->exited());

  stop_cleanly(coordinator, {w1.get(), w2.get()});
  // The worker counted both strangers, and no frame came in on a channel with the wrong key.
  CHECK(w2->count_in_stderr("keys_denied=1 ") == 1);
  CHECK(w2->count_in_stderr("wrong_key_frames=0") == 1);
  CHECK(w2->count_in_stderr("handshakes_refused=0 ") == 0);
}

TEST_CASE("a worker whose CURVE handshake fails says so and keeps retrying") {
  REQUIRE(transport::curve_available());
  temp_dir dir;
  keygen(dir.path() / "coordinator");
  const auto good_keys = keygen(dir.path() / "good");
  keygen(dir.path() / "impostor");  // a key pair the coordinator does not hold
  keygen(dir.path() / "rogue");
  std::ofstream(dir.path() / "allowed") << good_keys.public_key << "\n";
  coordinator_process coordinator(
      dir.path() / "state",
      {"--curve-secret-key", (dir.path() / "coordinator.secret").string(), "--curve-allowlist",
       (dir.path() / "allowed").string()});

  // An allowed key, but the wrong coordinator key: the coordinator cannot read its hello.
  auto wrong_server = start_worker(
      coordinator.control(), "good",
      {"--curve-secret-key", (dir.path() / "good.secret").string(), "--curve-coordinator-key",
       (dir.path() / "impostor.public").string()});
  // The right coordinator key, but a key the allowlist does not name: ZAP denies it.
  auto not_listed = start_worker(
      coordinator.control(), "rogue",
      {"--curve-secret-key", (dir.path() / "rogue.secret").string(), "--curve-coordinator-key",
       (dir.path() / "coordinator.public").string()});
  // No keys at all against a CURVE coordinator.
  auto no_keys = start_worker(coordinator.control(), "plain");

  for (auto* worker : {wrong_server.get(), not_listed.get(), no_keys.get()}) {
    CHECK(worker->wait_for_stderr("the handshake with the coordinator at", patience));
    CHECK(worker->count_in_stderr("registered with") == 0);
    CHECK_FALSE(worker->exited());
  }
  CHECK(coordinator.process().wait_for_stderr("refused a connection's handshake", patience));
  CHECK(coordinator.process().wait_for_stderr("CURVE: denied a connection", patience));
  // None got in, and each is still up, retrying.
  CHECK(coordinator.overview()["taskmanagers"] == 0);
  CHECK_FALSE(not_listed->exited());
}
