// records/s for `snapflow local` from heartbeat-stamped counters.
#include <catch2/catch.hpp>

#include "cmd/cli/records_rate.hpp"

using snapflow::cli::records_rate;

TEST_CASE("records rate: computed between samples with different stamps") {
  records_rate r;
  r.add(0, 0);  // no counters reported yet
  CHECK(r.total() == 0);
  CHECK_FALSE(r.per_second());
  r.add(1'000, 10'000);
  CHECK(r.total() == 1'000);
  CHECK_FALSE(r.per_second());  // one sample is no rate
  r.add(1'000, 10'000);         // polled again before the next heartbeat: nothing changes
  CHECK_FALSE(r.per_second());
  r.add(3'000, 10'500);
  REQUIRE(r.per_second());
  CHECK(*r.per_second() == Approx(4'000.0));
  r.add(3'000, 10'500);  // a repeated sample keeps the rate rather than reporting zero
  CHECK(*r.per_second() == Approx(4'000.0));
  r.add(4'000, 11'500);
  CHECK(*r.per_second() == Approx(1'000.0));
  REQUIRE(r.average_per_second());
  CHECK(*r.average_per_second() == Approx(3'000.0 / 1.5));
}

TEST_CASE("records rate: an older stamp is ignored, a restart starts over") {
  records_rate r;
  r.add(5'000, 2'000);
  r.add(9'000, 3'000);
  CHECK(*r.per_second() == Approx(4'000.0));
  r.add(1, 2'500);  // older than the newest sample
  CHECK(r.total() == 9'000);
  r.add(100, 4'000);  // counts went down: the job restarted and its tasks count afresh
  CHECK(r.total() == 100);
  CHECK_FALSE(r.per_second());
  CHECK_FALSE(r.average_per_second());
  r.add(600, 5'000);
  CHECK(*r.per_second() == Approx(500.0));
}

TEST_CASE("records rate: the total across restarts adds up every attempt's highest count") {
  records_rate r;
  r.add(1'000, 1'000, 0);
  r.add(4'000, 2'000, 0);
  CHECK(r.total_across_restarts() == 4'000);
  CHECK(r.attempts() == 1);
  // The job restarts: the coordinator shows the new attempt, whose tasks have not reported
  // yet (no newer stamp), then their counts from zero.
  r.add(0, 2'000, 1);
  CHECK(r.total_across_restarts() == 4'000);
  CHECK(r.attempts() == 2);
  r.add(500, 3'000, 1);
  CHECK(r.total() == 500);
  CHECK(r.total_across_restarts() == 4'500);
  CHECK_FALSE(r.per_second());  // no rate across the restart
  r.add(1'500, 4'000, 1);
  CHECK(*r.per_second() == Approx(1'000.0));
  CHECK(r.total_across_restarts() == 5'500);
  // Counts that go down without a new restart count (two restarts between polls, say) start
  // an attempt of their own; the attempt counter moves once per attempt.
  r.add(200, 5'000, 1);
  CHECK(r.total_across_restarts() == 5'700);
  CHECK(r.attempts() == 3);
  r.add(300, 6'000, 1);
  CHECK(r.attempts() == 3);
  CHECK(r.total_across_restarts() == 5'800);
}
