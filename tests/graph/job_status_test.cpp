#include <catch2/catch.hpp>

#include "graph/job_status.hpp"

using namespace snapflow;

TEST_CASE("job status allows only legal transitions") {
  job_status_machine m;
  CHECK(m.current() == job_status::created);
  CHECK_FALSE(m.transition(job_status::finished, 1));
  CHECK(m.current() == job_status::created);
  CHECK(m.transition(job_status::running, 2));
  CHECK(m.transition(job_status::failing, 3));
  CHECK(m.transition(job_status::restarting, 4));
  CHECK(m.transition(job_status::running, 5));
  CHECK(m.transition(job_status::cancelling, 6));
  CHECK_FALSE(m.transition(job_status::running, 7));
  CHECK(m.transition(job_status::canceled, 8));
  for (auto s : {job_status::created, job_status::running, job_status::failing,
                 job_status::restarting, job_status::finished})
    CHECK_FALSE(m.transition(s, 9));
  CHECK(m.timestamp_of(job_status::canceled) == 8);
}

TEST_CASE("terminal statuses have no way out") {
  for (auto terminal : {job_status::failed, job_status::canceled, job_status::finished,
                        job_status::suspended})
    for (int to = 0; to < 9; ++to)
      CHECK_FALSE(is_legal_transition(terminal, static_cast<job_status>(to)));
}

TEST_CASE("job status listeners run in registration order with from and to") {
  job_status_machine m;
  std::vector<std::string> calls;
  m.add_listener([&](job_status from, job_status to, std::int64_t) {
    calls.push_back("a:" + std::string(to_string(from)) + "->" + std::string(to_string(to)));
  });
  m.add_listener([&](job_status, job_status to, std::int64_t) {
    calls.push_back("b:" + std::string(to_string(to)));
  });
  m.transition(job_status::running, 1);
  m.transition(job_status::suspended, 1);  // refused below does not notify
  m.transition(job_status::running, 2);
  REQUIRE(calls == std::vector<std::string>{"a:CREATED->RUNNING", "b:RUNNING",
                                            "a:RUNNING->SUSPENDED", "b:SUSPENDED"});
}

TEST_CASE("conditional transition only moves from the expected status") {
  job_status_machine m;
  CHECK_FALSE(m.transition(job_status::running, job_status::failing, 1));
  CHECK(m.transition(job_status::created, job_status::running, 1));
}

TEST_CASE("job status names round-trip") {
  for (int i = 0; i < 9; ++i) {
    auto s = static_cast<job_status>(i);
    CHECK(parse_job_status(to_string(s)) == s);
  }
  CHECK_FALSE(parse_job_status("RUNNINGG"));
}
