// Workers and the coordinator as real processes on loopback: registration, heartbeats, loss,
// re-registration, refused protocol versions, a custom worker binary.
#include <signal.h>

#include <catch2/catch.hpp>
#include <thread>
#include <zmq.hpp>

#include "tests/cluster/cluster_support.hpp"
#include "transport/envelope.hpp"

using namespace snapflow::testing;

namespace {

std::uint64_t frames_received(const coordinator_process& c) {
  return c.overview().value("frames-received", std::uint64_t{0});
}

}  // namespace

TEST_CASE("a worker registers and keeps heartbeating") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "w1");
  REQUIRE(coordinator.wait_for_workers(1));
  CHECK(worker->wait_for_stderr("registered with the coordinator", patience));
  CHECK(coordinator.process().wait_for_stderr("worker w1 registered", patience));

  // Heartbeats every 50 ms: the frame count keeps growing and the worker stays registered
  // well past the 500 ms timeout.
  const std::uint64_t before = frames_received(coordinator);
  REQUIRE(eventually([&] { return frames_received(coordinator) >= before + 20; }));
  CHECK(coordinator.overview()["taskmanagers"] == 1);
  CHECK(coordinator.process().count_in_stderr("is lost") == 0);
  CHECK(worker->count_in_stderr("reconnecting") == 0);
}

TEST_CASE("a killed worker is declared lost and a fresh one registers in its place") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "w1");
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(sources_job(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));

  worker->send_signal(SIGKILL);
  REQUIRE(worker->wait_exit(patience) == 128 + SIGKILL);
  REQUIRE(coordinator.wait_for_workers(0));
  CHECK(coordinator.process().wait_for_stderr("worker w1 is lost", patience));

  // The job fails over and waits for a slot; a fresh worker under the same id takes it.
  const std::int64_t completed_before =
      coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  auto fresh = start_worker(coordinator.control(), "w1");
  REQUIRE(coordinator.wait_for_workers(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, completed_before + 2));
  const json details = coordinator.job(job);
  CHECK(details["state"] == "RUNNING");
  CHECK(details["restarts"].get<int>() >= 1);
}

TEST_CASE("a worker whose process dies is lost at once, not at the heartbeat timeout, and its "
          "job fails over") {
  temp_dir dir;
  // A heartbeat timeout far beyond the test's patience: only the closed connection can tell.
  coordinator_process coordinator(dir.path() / "state", {}, "tcp://127.0.0.1:*", 600'000);
  auto worker = start_worker(coordinator.control(), "w1");
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(sources_job(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));

  worker->send_signal(SIGKILL);
  REQUIRE(worker->wait_exit(patience) == 128 + SIGKILL);
  REQUIRE(coordinator.process().wait_for_stderr("worker w1 is lost: its control connection closed",
                                                patience));
  REQUIRE(coordinator.wait_for_workers(0));
  REQUIRE(eventually([&] { return coordinator.job(job)["restarts"].get<int>() >= 1; }));
  auto fresh = start_worker(coordinator.control(), "w1");
  const std::int64_t completed_before =
      coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, completed_before + 2));
  CHECK(coordinator.job(job)["state"] == "RUNNING");
}

TEST_CASE("a worker gone silent is lost when its connection stops answering pings, and rejoins "
          "when it speaks again") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state", {"--connection-timeout-ms", "400"},
                                  "tcp://127.0.0.1:*", 600'000);
  auto worker = start_worker(coordinator.control(), "w1");
  REQUIRE(coordinator.wait_for_workers(1));
  // Stopped, it answers nothing, as a host whose cable was pulled; its sockets stay open.
  worker->send_signal(SIGSTOP);
  const bool lost = coordinator.process().wait_for_stderr(
      "worker w1 is lost: its control connection closed", patience);
  worker->send_signal(SIGCONT);
  REQUIRE(lost);
  // Resumed, it finds its connection closed, reconnects and registers again.
  REQUIRE(eventually([&] {
    return coordinator.process().count_in_stderr("worker w1 registered") >= 2;
  }));
  REQUIRE(coordinator.wait_for_workers(1));
}

TEST_CASE("a register_worker spoofed under a live worker's id changes nothing") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "w1");
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(sources_job(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));

  // Whoever knows the id connects under it and claims a new incarnation: with ROUTER_HANDOVER
  // off its connection cannot take the id from the live one: its frames never arrive as the
  // worker's (ZeroMQ holds them back, or they arrive under another routing id and are refused).
  zmq::context_t context(1);
  zmq::socket_t spoofer(context, zmq::socket_type::dealer);
  spoofer.set(zmq::sockopt::linger, 0);
  spoofer.set(zmq::sockopt::routing_id, "w1");
  spoofer.connect(coordinator.control());
  snapflow::wire::register_worker claim;
  claim.worker_id = "w1";
  claim.slots = 1;
  claim.data_endpoint = "tcp://127.0.0.1:1";
  claim.pid = 4242;
  claim.session = 77;
  const std::string frame = snapflow::wire::encode(snapflow::wire::message{claim});
  for (int i = 0; i < 10; ++i) {
    spoofer.send(zmq::buffer(frame), zmq::send_flags::dontwait);
    std::this_thread::sleep_for(20ms);  // paces the claims; nothing depends on it
  }

  // The job runs on, unrestarted, on the same incarnation; the live worker is still answered.
  const std::int64_t completed =
      coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, completed + 3));
  const json details = coordinator.job(job);
  CHECK(details["state"] == "RUNNING");
  CHECK(details.value("restarts", 0) == 0);
  CHECK(coordinator.overview()["taskmanagers"] == 1);
  CHECK(coordinator.process().count_in_stderr("new incarnation") == 0);
  CHECK(coordinator.process().count_in_stderr("worker w1 registered") == 1);
  CHECK(coordinator.process().count_in_stderr("is lost") == 0);
  CHECK(worker->count_in_stderr("registered with the coordinator") == 1);
  CHECK(worker->count_in_stderr("no longer knows this worker") == 0);
  CHECK(worker->count_in_stderr("reconnecting") == 0);
  // No answer went to the spoofer: nothing tells it whether it guessed a live id.
  zmq::message_t answer;
  CHECK_FALSE(spoofer.recv(answer, zmq::recv_flags::dontwait));
}

TEST_CASE("a worker restarted under its id at once registers again and takes its job back") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "w1");
  REQUIRE(coordinator.wait_for_workers(1));
  const std::string job = coordinator.submit(sources_job(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 2));

  // Killed and started again without waiting for the coordinator to declare it lost: its old
  // connection closed with its process, so the id is free for the new one.
  worker->send_signal(SIGKILL);
  REQUIRE(worker->wait_exit(patience) == 128 + SIGKILL);
  const std::int64_t completed =
      coordinator.checkpoints(job)["counts"]["completed"].get<std::int64_t>();
  auto fresh = start_worker(coordinator.control(), "w1");
  CHECK(fresh->wait_for_stderr("registered with the coordinator", patience));
  REQUIRE(coordinator.wait_for_workers(1));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, completed + 2));
  const json details = coordinator.job(job);
  CHECK(details["state"] == "RUNNING");
  CHECK(details.value("restarts", 0) >= 1);
  CHECK(coordinator.process().count_in_stderr("worker w1 registered") >= 2);
}

TEST_CASE("binding the control plane beyond loopback needs CURVE or --insecure") {
  temp_dir dir;
  // "lo" is an interface name: bound, it is loopback, yet it is not a loopback address, so
  // the binaries judge it as they would a public one (and the test stays on loopback).
  child_process refused({SNAPFLOW_COORDINATOR_BIN, "--bind", "tcp://lo:*", "--rest-port", "0",
                         "--state-dir", (dir.path() / "refused").string()});
  REQUIRE(refused.wait_exit(patience) == 2);
  CHECK_THAT(refused.stderr_text(),
             Catch::Contains("--bind tcp://lo:*") && Catch::Contains("--insecure"));
  child_process worker_refused({SNAPFLOW_WORKER_BIN, "--coordinator", "tcp://127.0.0.1:1",
                                "--data-bind", "tcp://lo:*"});
  REQUIRE(worker_refused.wait_exit(patience) == 2);
  CHECK_THAT(worker_refused.stderr_text(),
             Catch::Contains("--data-bind tcp://lo:*") && Catch::Contains("--insecure"));

  coordinator_process coordinator(dir.path() / "state", {"--insecure"}, "tcp://lo:*");
  CHECK(coordinator.process().wait_for_stderr("--insecure", patience));
  auto worker = start_worker(coordinator.control(), "w1",
                             {"--executor", "runtime", "--data-bind", "tcp://lo:*", "--insecure"});
  CHECK(worker->wait_for_stderr("--insecure", patience));
  REQUIRE(coordinator.wait_for_workers(1));
}

TEST_CASE("a worker registers again with a restarted coordinator") {
  temp_dir dir;
  auto first = std::make_unique<coordinator_process>(dir.path() / "state");
  const std::string control = first->control();
  auto worker = start_worker(control, "w1");
  REQUIRE(first->wait_for_workers(1));

  first->process().send_signal(SIGTERM);
  REQUIRE(first->process().wait_exit(patience) == 0);
  first.reset();
  // The same port, so the worker's address still holds; the new coordinator knows no worker.
  coordinator_process second(dir.path() / "state", {}, control);
  REQUIRE(second.control() == control);
  REQUIRE(second.wait_for_workers(1));
  // Either it heard not_registered in answer to a heartbeat, or it gave the old one up.
  CHECK(eventually([&] {
    return worker->count_in_stderr("no longer knows this worker") > 0 ||
           worker->count_in_stderr("reconnecting") > 0;
  }));
  // The coordinator counts the worker when it sends register_ack; the worker logs the line
  // when that ack arrives, a moment later.
  CHECK(eventually([&] { return worker->count_in_stderr("registered with the coordinator") >= 2; }));
}

TEST_CASE("a worker that gave a dead coordinator up registers with the one started later") {
  temp_dir dir;
  auto first = std::make_unique<coordinator_process>(dir.path() / "state");
  const std::string control = first->control();
  auto worker = start_worker(control, "w1");
  REQUIRE(first->wait_for_workers(1));

  first->process().send_signal(SIGKILL);
  REQUIRE(first->process().wait_exit(patience).has_value());
  first.reset();
  // Nothing listens now: the worker's silence timeout passes and it starts over, opening a
  // fresh connection after a pause while its ticker keeps running.
  REQUIRE(worker->wait_for_stderr("reconnecting", patience));
  coordinator_process second(dir.path() / "state", {}, control);
  CHECK(second.wait_for_workers(1));
  CHECK(eventually([&] { return worker->count_in_stderr("registered with the coordinator") >= 2; }));
}

TEST_CASE("a worker whose protocol version is refused exits and says why") {
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "from-the-future", {"--protocol-version", "2"});
  const auto code = worker->wait_exit(patience);
  REQUIRE(code);
  CHECK(*code == 3);
  CHECK_THAT(worker->stderr_text(), Catch::Contains("refused to register worker from-the-future") &&
                                        Catch::Contains("protocol version 2 is not supported"));
  CHECK(coordinator.overview()["taskmanagers"] == 0);
  CHECK(coordinator.overview()["refused-messages"].get<int>() >= 1);
}

TEST_CASE("a custom worker built on worker_main runs its own executor and operator kinds") {
  {
    child_process help({SNAPFLOW_CUSTOM_WORKER_BIN, "--help"});
    REQUIRE(help.wait_exit(patience) == 0);
    CHECK_THAT(help.stdout_text(), Catch::Contains("announcing-stub"));
  }
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "custom-1", {"--executor", "announcing-stub"},
                             SNAPFLOW_CUSTOM_WORKER_BIN);
  REQUIRE(coordinator.wait_for_workers(1));
  CHECK(worker->wait_for_stderr("test_double_source", patience));
  const std::string job = coordinator.submit(sources_job(1));
  CHECK(coordinator.wait_for_completed_checkpoints(job, 3));
}

TEST_CASE("both binaries describe their options and refuse bad ones") {
  child_process coordinator_help({SNAPFLOW_COORDINATOR_BIN, "--help"});
  child_process worker_help({SNAPFLOW_WORKER_BIN, "--help"});
  child_process bad_executor({SNAPFLOW_WORKER_BIN, "--executor", "warp-drive"});
  // The runtime executor (the default) binds its data endpoint at start: a bad one is refused.
  child_process bad_data_bind({SNAPFLOW_WORKER_BIN, "--data-bind", "nowhere"});
  REQUIRE(coordinator_help.wait_exit(patience) == 0);
  REQUIRE(worker_help.wait_exit(patience) == 0);
  CHECK_THAT(coordinator_help.stdout_text(),
             Catch::Contains("--curve-allowlist") && Catch::Contains("--heartbeat-timeout-ms"));
  CHECK_THAT(worker_help.stdout_text(),
             Catch::Contains("--coordinator") && Catch::Contains("--executor"));
  CHECK(bad_executor.wait_exit(patience) == 2);
  CHECK_THAT(bad_executor.stderr_text(), Catch::Contains("unknown executor 'warp-drive'"));
  CHECK(bad_data_bind.wait_exit(patience) == 2);
  CHECK_THAT(bad_data_bind.stderr_text(), Catch::Contains("cannot bind the data endpoint nowhere"));
}
