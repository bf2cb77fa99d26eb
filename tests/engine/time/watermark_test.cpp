// Watermarks stepped by hand: the valve's minimum over active inputs with idleness and ends,
// the generator's bounded out-of-orderness per split with idleness, and their wire form.
#include <catch2/catch.hpp>

#include "engine/time/watermark_generator.hpp"
#include "engine/time/watermark_valve.hpp"
#include "transport/data/data_frame.hpp"

using namespace snapflow;

namespace {
watermark at(std::int64_t t) { return watermark{t, false}; }
watermark idle_at(std::int64_t t) { return watermark{t, true}; }
}  // namespace

TEST_CASE("the valve passes on the minimum over its inputs when it advances") {
  watermark_valve v(3);
  CHECK_FALSE(v.on_watermark(0, at(10)));
  CHECK_FALSE(v.on_watermark(1, at(5)));
  CHECK(v.on_watermark(2, at(7)) == at(5));
  CHECK(v.on_watermark(1, at(6)) == at(6));
}

TEST_CASE("the valve advances step by step and never goes back") {
  watermark_valve v(2);
  CHECK_FALSE(v.on_watermark(0, at(10)));
  CHECK(v.on_watermark(1, at(4)) == at(4));
  CHECK(v.on_watermark(1, at(8)) == at(8));
  CHECK_FALSE(v.on_watermark(1, at(3)));  // a lower one is ignored
  CHECK(v.on_watermark(1, at(20)) == at(10));
  CHECK(v.current() == 10);
}

TEST_CASE("an idle input does not hold the valve back, and rejoins once it caught up") {
  watermark_valve v(2);
  CHECK_FALSE(v.on_watermark(0, at(100)));
  CHECK(v.on_watermark(1, idle_at(0)) == at(100));  // only input 0 counts now
  CHECK(v.on_watermark(0, at(150)) == at(150));
  // Input 1 comes back behind the task: active, but left out until it catches up.
  CHECK_FALSE(v.on_watermark(1, at(120)));
  CHECK(v.on_watermark(0, at(200)) == at(200));
  CHECK_FALSE(v.on_watermark(1, at(180)));  // still behind 200
  CHECK_FALSE(v.on_watermark(1, at(210)));  // caught up: counted again
  CHECK(v.on_watermark(0, at(300)) == at(210));
}

TEST_CASE("the valve goes idle when every open input is idle, and comes back") {
  watermark_valve v(2);
  CHECK(v.on_watermark(0, at(5)) == std::nullopt);
  CHECK(v.on_watermark(1, at(5)) == at(5));
  CHECK_FALSE(v.on_watermark(0, idle_at(5)));
  CHECK(v.on_watermark(1, idle_at(5)) == idle_at(5));
  CHECK(v.idle());
  CHECK(v.any_idle());
  // A record on an idle input makes it (and the task) active again.
  CHECK(v.on_record(0) == at(5));
  CHECK_FALSE(v.idle());
  CHECK_FALSE(v.on_record(0));  // not idle: nothing to say
}

TEST_CASE("an ended input counts as the end of time") {
  watermark_valve v(2);
  CHECK_FALSE(v.on_watermark(0, at(5)));
  CHECK(v.on_end(1) == at(5));
  CHECK(v.on_watermark(0, at(9)) == at(9));
  CHECK(v.on_end(0) == at(max_watermark));
  CHECK_FALSE(v.on_end(0));
}

TEST_CASE("the generator bounds out-of-orderness per split and takes the minimum") {
  watermark_generator g(/*max_out_of_orderness_ms=*/10, /*idle_ms=*/0);
  CHECK_FALSE(g.on_periodic(0));  // nothing seen
  g.on_event(0, 100, 0);
  CHECK(g.on_periodic(1) == at(89));
  g.on_event(1, 50, 2);
  g.on_event(0, 200, 2);
  CHECK_FALSE(g.on_periodic(3));  // split 1 holds it at 39 < 89: never back
  g.on_event(1, 300, 4);
  CHECK(g.on_periodic(5) == at(189));
}

TEST_CASE("an idle split does not hold the generator back; all idle makes it idle") {
  watermark_generator g(0, /*idle_ms=*/100);
  g.on_event(0, 1000, 0);
  g.on_event(1, 10, 0);
  CHECK(g.on_periodic(50) == at(9));
  g.on_event(0, 2000, 120);
  // Split 1 was silent for 120 ms: left out.
  CHECK(g.on_periodic(120) == at(1999));
  CHECK(g.on_periodic(300) == idle_at(1999));
  CHECK(g.idle());
  CHECK_FALSE(g.on_periodic(400));
  g.on_event(1, 500, 410);  // back, behind: active again, the watermark does not go back
  CHECK(g.on_periodic(410) == at(1999));
}

TEST_CASE("a generator that never sees a record goes idle after the idleness timeout") {
  watermark_generator g(0, 100);
  CHECK_FALSE(g.on_periodic(1000));
  CHECK_FALSE(g.on_periodic(1050));
  CHECK(g.on_periodic(1100) == idle_at(min_watermark));
}

TEST_CASE("timestamps and watermarks travel in data frames; old records decode as before") {
  data::data_frame f;
  f.key = channel_key{"job", 1, 0, 2, 0, 0};
  record plain{7, 1, 2, "p"};
  record stamped{7, 2, 3, "q"};
  stamped.timestamp = -42;
  f.elements = {plain, stamped, watermark{100, false}, watermark{100, true},
                watermark{max_watermark, false}};
  const std::string bytes = data::encode(f);
  auto decoded = data::decode_data_frame(bytes);
  REQUIRE(decoded);
  CHECK(std::get<data::data_frame>(decoded.value()) == f);

  // A record without a timestamp keeps the five items of the first version of the frame.
  data::data_frame old;
  old.key = f.key;
  old.elements = {plain};
  data::data_frame stamped_only = old;
  stamped_only.elements = {stamped};
  CHECK(data::encode(stamped_only).size() > data::encode(old).size());
}
