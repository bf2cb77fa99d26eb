// The checkpoint-path hop tracer: one line per event, from every thread, on one clock.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "engine/hop_trace.hpp"
#include "tests/engine/coordinator/coordinator_harness.hpp"

using namespace snapflow;

TEST_CASE("hop trace: events from several threads, one well-formed line each, in time order") {
  test::temp_dir dir;
  REQUIRE_FALSE(hop_trace::start(dir.path.string()));
  CHECK(hop_trace::enabled());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 100; ++i) hop_trace::record("t.ack", t * 1000 + i);
    });
  for (auto& t : threads) t.join();
  hop_trace::record("c.frame", -7);
  hop_trace::stop();
  CHECK_FALSE(hop_trace::enabled());
  hop_trace::record("c.frame", 1);  // after stop: not written

  std::ifstream in(dir.path / ("hops-" + std::to_string(::getpid()) + ".txt"));
  REQUIRE(in);
  std::string line;
  long long last_us = 0;
  int acks = 0, frames = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    long long us = 0, tid = 0, value = 0;
    std::string event, rest;
    REQUIRE((fields >> us >> tid >> event >> value));
    CHECK_FALSE((fields >> rest));
    CHECK(us >= last_us);  // written under one lock, stamped inside it
    last_us = us;
    CHECK(tid > 0);
    if (event == "t.ack") ++acks;
    if (event == "c.frame") {
      ++frames;
      CHECK(value == -7);
    }
  }
  CHECK(acks == 400);
  CHECK(frames == 1);
}

TEST_CASE("hop trace: a folder that cannot be made is reported, tracing stays off") {
  hop_trace::stop();
  test::temp_dir dir;
  std::ofstream(dir.path / "a-file") << "not a folder";
  auto error = hop_trace::start((dir.path / "a-file" / "trace").string());
  REQUIRE(error);
  CHECK(error->find("cannot create the folder") != std::string::npos);
  CHECK_FALSE(hop_trace::enabled());
}

TEST_CASE("hop trace: a folder that does not exist yet is made") {
  test::temp_dir dir;
  const auto folder = dir.path / "traces" / "run-1";
  REQUIRE_FALSE(hop_trace::start(folder.string()));
  hop_trace::record("c.send", 42);
  hop_trace::stop();
  std::ifstream in(folder / ("hops-" + std::to_string(::getpid()) + ".txt"));
  REQUIRE(in);
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(line.find(" c.send 42") != std::string::npos);
}
