// Event time in the typed API: window assigners and session merging; the window operator
// driven by hand (tumbling, sliding, session, allowed lateness, late records to their own
// stream), tumbling and sliding windows against a model with a window per element; keyed
// timers from a process function; and event-time tumbling windows on the
// local_cluster through checkpoints, a killed task and a restore (also rescaled): every window
// emits exactly once; processing-time timers in a running job, once each across the same.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "engine/api/typed_api.hpp"
#include "engine/cluster/local_cluster.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/source_operators.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"
#include "tests/support/gated_source.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;
using namespace std::chrono_literals;
using snapflow::testing::gated_kinds;

namespace {

struct reading {
  std::string sensor;
  std::int64_t t = 0;
  std::int64_t v = 0;
  MSGPACK_DEFINE_MAP(sensor, t, v);
};

struct window_sum {
  std::string sensor;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t sum = 0;
  std::int64_t count = 0;
  MSGPACK_DEFINE_MAP(sensor, start, end, sum, count);
};

// One operator of a typed job, driven by hand over a heap backend (what a task does: the
// record's key set as current, then process; watermarks through process_watermark).
class harness {
 public:
  explicit harness(const job_graph& job, const std::string& kind = "user_process")
      : backend_(128, key_group_range{0, 127}) {
    for (const auto& v : job.vertices)
      if (v.kind == kind) vertex_ = v;
    auto made = operator_factory::builtin().create(vertex_);
    REQUIRE(made);
    op_ = std::move(made).value();
    operator_context ctx;
    ctx.vertex = &vertex_;
    ctx.keyed_state = &backend_;
    REQUIRE(op_->open(ctx, {}));
  }
  void send(const reading& r) {
    record rec{api::hash_of_key(r.sensor), r.t, 0, api::encode(r)};
    rec.timestamp = r.t;
    backend_.set_current_key(rec.key);
    REQUIRE(op_->process(rec, out_));
  }
  void advance(std::int64_t wm) { REQUIRE(op_->process_watermark(watermark{wm, false}, out_)); }
  // Results (tag 0) decoded, and late records (tag 1).
  std::vector<window_sum> results() const {
    std::vector<window_sum> out;
    for (const auto& r : out_.records)
      if (r.value == 0) {
        out.push_back(api::decode_or_throw<window_sum>(r.payload, "result"));
        CHECK(r.timestamp == out.back().end - 1);  // at the window's max timestamp
      }
    return out;
  }
  std::vector<reading> late() const {
    std::vector<reading> out;
    for (const auto& r : out_.records)
      if (r.value == 1) out.push_back(api::decode_or_throw<reading>(r.payload, "late"));
    return out;
  }
  const std::vector<record>& records() const { return out_.records; }
  stream_operator& op() { return *op_; }
  collecting_output& out() { return out_; }
  void send_raw(record r) {
    backend_.set_current_key(r.key);
    REQUIRE(op_->process(r, out_));
  }
  void clear() { out_.records.clear(); }

 private:
  heap_keyed_state_backend backend_;
  job_vertex vertex_;
  std::unique_ptr<stream_operator> op_;
  collecting_output out_;
};

template <typename A>
job_graph window_job(A assigner, std::chrono::milliseconds lateness) {
  stream_environment env;
  api::typed_environment typed(env);
  auto readings = typed.from_collection(std::vector<reading>{});
  auto w = readings.assign_timestamps_and_watermarks([](const reading& r) { return r.t; }, 0ms)
               .key_by([](const reading& r) { return r.sensor; })
               .window(assigner)
               .allowed_lateness(lateness)
               .aggregate(
                   window_sum{},
                   [](window_sum acc, const reading& r) {
                     acc.sum += r.v;
                     ++acc.count;
                     acc.sensor = r.sensor;
                     return acc;
                   },
                   [](window_sum a, const window_sum& b) {
                     a.sum += b.sum;
                     a.count += b.count;
                     return a;
                   },
                   [](const std::string& key, const api::time_window& win, window_sum acc) {
                     acc.sensor = key;
                     acc.start = win.start;
                     acc.end = win.end;
                     return acc;
                   },
                   "sums");
  w.results.sink([](const window_sum&) {});
  w.late.sink([](const reading&) {});
  return env.build_job_graph();
}

}  // namespace

TEST_CASE("window assigners: tumbling, sliding, and sessions that merge") {
  api::tumbling_event_time_windows tumbling(1000ms);
  CHECK(tumbling.assign(0) == std::vector<api::time_window>{{0, 1000}});
  CHECK(tumbling.assign(999) == std::vector<api::time_window>{{0, 1000}});
  CHECK(tumbling.assign(-1) == std::vector<api::time_window>{{-1000, 0}});
  api::tumbling_event_time_windows shifted(1000ms, 200ms);
  CHECK(shifted.assign(100) == std::vector<api::time_window>{{-800, 200}});

  api::sliding_event_time_windows sliding(1000ms, 500ms);
  CHECK(sliding.assign(700) == std::vector<api::time_window>{{500, 1500}, {0, 1000}});
  CHECK(sliding.assign(1000) == std::vector<api::time_window>{{1000, 2000}, {500, 1500}});

  std::vector<api::time_window> existing{{0, 10}, {20, 30}, {40, 50}};
  std::vector<std::size_t> merged;
  // Bridges the first two.
  CHECK(api::merge_sessions(existing, {5, 25}, merged) == api::time_window{0, 30});
  CHECK(merged.size() == 2);
  // Touching merges, as in Flink.
  CHECK(api::merge_sessions(existing, {10, 20}, merged) == api::time_window{0, 30});
  CHECK(merged.size() == 2);
  CHECK(api::merge_sessions(existing, {60, 70}, merged) == api::time_window{60, 70});
  CHECK(merged.empty());
  CHECK_THROWS(api::tumbling_event_time_windows(0ms));
}

TEST_CASE("tumbling windows fire at the watermark, once, at their max timestamp") {
  harness h(window_job(api::tumbling_event_time_windows(1000ms), 0ms));
  h.send({"a", 100, 1});
  h.send({"a", 900, 2});
  h.send({"b", 950, 10});
  h.send({"a", 1500, 4});
  h.advance(998);
  CHECK(h.results().empty());
  h.advance(999);
  auto r = h.results();
  REQUIRE(r.size() == 2);
  std::map<std::string, window_sum> by;
  for (auto& w : r) by[w.sensor] = w;
  CHECK(by["a"].sum == 3);
  CHECK(by["a"].start == 0);
  CHECK(by["b"].sum == 10);
  h.clear();
  h.advance(5000);
  REQUIRE(h.results().size() == 1);
  CHECK(h.results()[0].sum == 4);
  h.clear();
  h.advance(max_watermark);
  CHECK(h.results().empty());  // nothing fires twice
}

TEST_CASE("sliding windows put a record in each of its windows") {
  harness h(window_job(api::sliding_event_time_windows(1000ms, 500ms), 0ms));
  h.send({"a", 700, 1});
  h.advance(max_watermark);
  auto r = h.results();
  REQUIRE(r.size() == 2);
  CHECK(r[0].count == 1);
  CHECK(r[1].count == 1);
}

TEST_CASE("sessions merge when records close the gap, and fire once the gap passed") {
  harness h(window_job(api::event_time_session_windows(100ms), 0ms));
  h.send({"a", 0, 1});
  h.send({"a", 180, 2});
  h.send({"a", 90, 4});  // bridges [0, 100) and [180, 280): one session [0, 280)
  h.send({"b", 0, 8});
  h.advance(120);
  auto first = h.results();
  REQUIRE(first.size() == 1);
  CHECK(first[0].sensor == "b");
  h.clear();
  h.advance(278);
  CHECK(h.results().empty());
  h.advance(279);
  auto r = h.results();
  REQUIRE(r.size() == 1);
  CHECK(r[0].start == 0);
  CHECK(r[0].end == 280);
  CHECK(r[0].sum == 7);
  CHECK(r[0].count == 3);
}

TEST_CASE("late records: within the allowed lateness they refire the window, beyond it they go "
          "to the late stream") {
  harness h(window_job(api::tumbling_event_time_windows(1000ms), 500ms));
  h.send({"a", 100, 1});
  h.advance(1200);
  REQUIRE(h.results().size() == 1);
  h.clear();
  h.send({"a", 200, 2});  // late by 201 ms, within 500: fires again with both
  REQUIRE(h.results().size() == 1);
  CHECK(h.results()[0].sum == 3);
  CHECK(h.late().empty());
  h.clear();
  h.advance(1499);  // the window's state is gone now (999 + 500)
  h.send({"a", 300, 4});
  CHECK(h.results().empty());
  REQUIRE(h.late().size() == 1);
  CHECK(h.late()[0].v == 4);
}

TEST_CASE("without lateness a record behind the watermark goes to the late stream") {
  harness h(window_job(api::tumbling_event_time_windows(1000ms), 0ms));
  h.advance(2000);
  h.send({"a", 1999, 5});
  CHECK(h.results().empty());
  REQUIRE(h.late().size() == 1);
  h.send({"a", 2001, 6});
  h.advance(max_watermark);
  REQUIRE(h.results().size() == 1);
  CHECK(h.results()[0].sum == 6);
}

namespace {

// Elements at and just beyond the nearest times the window operator can compute (reach_for away
// from the int64 limits; the lowest int64 is "no timestamp") go to the late stream, those just
// within are windowed and fire at the end of input. Without the bound the windows' ends overflow
// (the sanitizer build stops on that).
template <typename A>
void check_limits(A assigner, std::chrono::milliseconds lateness, int windows_per_element) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
  const std::int64_t reach = api::window_detail::reach_for(assigner.reach_ms(), lateness.count());
  harness h(window_job(assigner, lateness));
  h.send({"a", max, 1});
  h.send({"a", max - reach + 1, 2});
  h.send({"b", min + 1, 4});
  h.send({"b", min + reach - 1, 8});
  h.send({"a", max - reach, 16});
  h.send({"b", min + reach, 32});
  h.send({"c", 0, 64});
  h.advance(max_watermark);
  std::int64_t late = 0;
  for (const auto& r : h.late()) late += r.v;
  CHECK(late == 1 + 2 + 4 + 8);
  std::int64_t windowed = 0;
  for (const auto& w : h.results()) windowed += w.sum;
  CHECK(windowed == windows_per_element * (16 + 32 + 64));
}

}  // namespace

TEST_CASE("elements too close to the int64 limits for their windows go to the late stream") {
  SECTION("tumbling") {
    check_limits(api::tumbling_event_time_windows(1000ms, 300ms), 0ms, 1);
  }
  SECTION("sliding") {
    check_limits(api::sliding_event_time_windows(1000ms, 500ms), 700ms, 2);
  }
  SECTION("session") {
    check_limits(api::event_time_session_windows(100ms), 50ms, 1);
  }
  SECTION("a size beyond every time: all late") {
    harness h(window_job(api::tumbling_event_time_windows(
                             std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max())),
                         0ms));
    h.send({"a", 0, 1});
    h.advance(max_watermark);
    CHECK(h.late().size() == 1);
    CHECK(h.results().empty());
  }
}

namespace {

// What Flink's window operator emits, one accumulator per window an element is in: the model
// the sliced operator (one accumulator per slice) must match. Results as (sensor, start, end,
// sum, count), late records as (sensor, t, v).
template <typename A>
class window_model {
 public:
  using result = std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  window_model(A assigner, std::int64_t lateness) : assigner_(assigner), lateness_(lateness) {}

  void send(const reading& r) {
    bool accepted = false;
    for (const auto& w : assigner_.assign(r.t)) {
      if (w.max_timestamp() + lateness_ <= wm_) continue;
      accepted = true;
      auto& [sum, count] = windows_[{r.sensor, w.start, w.end}];
      sum += r.v;
      ++count;
      if (w.max_timestamp() <= wm_) fire(r.sensor, w);
    }
    if (!accepted) late_.emplace_back(r.sensor, r.t, r.v);
  }
  void advance(std::int64_t wm) {
    for (auto it = windows_.begin(); it != windows_.end();) {
      const auto& [sensor, start, end] = it->first;
      const api::time_window w{start, end};
      if (w.max_timestamp() > wm_ && w.max_timestamp() <= wm) fire(sensor, w);
      if (w.max_timestamp() + lateness_ <= wm)
        it = windows_.erase(it);
      else
        ++it;
    }
    wm_ = std::max(wm_, wm);
  }
  std::vector<result> results() const { return sorted(results_); }
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> late() const {
    return sorted(late_);
  }

 private:
  void fire(const std::string& sensor, const api::time_window& w) {
    const auto& [sum, count] = windows_.at({sensor, w.start, w.end});
    results_.emplace_back(sensor, w.start, w.end, sum, count);
  }
  template <typename V>
  static V sorted(V v) {
    std::sort(v.begin(), v.end());
    return v;
  }

  A assigner_;
  std::int64_t lateness_;
  std::int64_t wm_ = min_watermark;
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>,
           std::pair<std::int64_t, std::int64_t>>
      windows_;
  std::vector<result> results_;
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> late_;
};

// A seeded run of out-of-order readings and watermarks through the operator and the model.
template <typename A>
void compare_with_model(const char* windows, A assigner, std::int64_t lateness,
                        std::uint32_t seed) {
  CAPTURE(windows);
  harness h(window_job(assigner, std::chrono::milliseconds(lateness)));
  window_model<A> model(assigner, lateness);
  std::mt19937 rng(seed);
  std::int64_t wm = -3000;  // negative times too: slices must fire in time order
  const std::vector<std::string> sensors{"a", "b", "c"};
  for (int step = 0; step < 400; ++step) {
    if (rng() % 5 == 0) {
      wm += static_cast<std::int64_t>(rng() % 400);
      h.advance(wm);
      model.advance(wm);
      continue;
    }
    // Mostly ahead of the watermark, some behind it (late, within the lateness or beyond).
    const auto t = wm - 1500 + static_cast<std::int64_t>(rng() % 4000);
    const reading r{sensors[rng() % sensors.size()], t, static_cast<std::int64_t>(rng() % 100)};
    h.send(r);
    model.send(r);
  }
  h.advance(max_watermark);
  model.advance(max_watermark);
  std::vector<typename window_model<A>::result> got;
  for (const auto& w : h.results()) got.emplace_back(w.sensor, w.start, w.end, w.sum, w.count);
  std::sort(got.begin(), got.end());
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> got_late;
  for (const auto& r : h.late()) got_late.emplace_back(r.sensor, r.t, r.v);
  std::sort(got_late.begin(), got_late.end());
  CHECK(got == model.results());
  CHECK(got_late == model.late());
  CHECK(!model.results().empty());
}

}  // namespace

TEST_CASE(
    "tumbling and sliding windows kept as slices emit what a window per element would, "
    "with out-of-order, late and too-late records") {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    for (const std::int64_t lateness : {0, 700}) {
      CAPTURE(seed, lateness);
      compare_with_model("tumbling 1000", api::tumbling_event_time_windows(1000ms), lateness, seed);
      compare_with_model("tumbling 1000 from 300", api::tumbling_event_time_windows(1000ms, 300ms),
                         lateness, seed);
      compare_with_model("sliding 1000/500", api::sliding_event_time_windows(1000ms, 500ms),
                         lateness, seed);
      compare_with_model("sliding 1000/300", api::sliding_event_time_windows(1000ms, 300ms),
                         lateness, seed);
      compare_with_model("sliding 900/600", api::sliding_event_time_windows(900ms, 600ms), lateness,
                         seed);
      compare_with_model("sliding 500/1000", api::sliding_event_time_windows(500ms, 1000ms),
                         lateness, seed);
    }
  }
}

TEST_CASE("a process function's event-time timers fire at the watermark with the key's state") {
  stream_environment env;
  api::typed_environment typed(env);
  auto readings = typed.from_collection(std::vector<reading>{});
  auto out = readings.assign_timestamps_and_watermarks([](const reading& r) { return r.t; }, 0ms)
                 .key_by([](const reading& r) { return r.sensor; })
                 .process<reading>(
                     [](const reading& r, api::keyed_process_context<std::string>& ctx,
                        api::collector<reading>&) {
                       auto total = ctx.get_state<std::int64_t>("total");
                       total.update(total.value_or(0) + r.v);
                       ctx.register_event_time_timer(r.t + 100);
                     },
                     [](std::int64_t t, api::keyed_process_context<std::string>& ctx,
                        api::collector<reading>& c) {
                       auto total = ctx.get_state<std::int64_t>("total");
                       c.collect(reading{ctx.key(), t, total.value_or(0)});
                     },
                     "timers");
  out.sink([](const reading&) {});
  harness h(env.build_job_graph());
  h.send({"a", 10, 1});
  h.send({"a", 10, 2});  // the same timer again: fires once
  h.send({"b", 50, 7});
  h.advance(109);
  CHECK(h.records().empty());
  h.advance(110);
  auto decoded = [&] {
    std::vector<std::pair<reading, std::int64_t>> out;
    for (const auto& r : h.records())
      out.emplace_back(api::decode_or_throw<reading>(r.payload, "timer output"), r.timestamp);
    return out;
  };
  auto first = decoded();
  REQUIRE(first.size() == 1);
  CHECK(first[0].first.sensor == "a");
  CHECK(first[0].first.v == 3);
  CHECK(first[0].second == 110);  // at the timer's time
  h.clear();
  h.advance(max_watermark);
  auto second = decoded();
  REQUIRE(second.size() == 1);
  CHECK(second[0].first.sensor == "b");
  CHECK(second[0].first.v == 7);
}

TEST_CASE("processing-time timers fire once by the operator's clock") {
  stream_environment env;
  api::typed_environment typed(env);
  auto readings = typed.from_collection(std::vector<reading>{});
  readings.key_by([](const reading& r) { return r.sensor; })
      .process<reading>(
          [](const reading& r, api::keyed_process_context<std::string>& ctx,
             api::collector<reading>&) { ctx.register_processing_time_timer(r.t); },
          [](std::int64_t t, api::keyed_process_context<std::string>& ctx,
             api::collector<reading>& c) { c.collect(reading{ctx.key(), t, 0}); },
          "processing")
      .sink([](const reading&) {});
  harness h(env.build_job_graph());
  h.send({"a", 5000, 0});
  h.send({"b", 3000, 0});
  CHECK(h.op().next_processing_time() == 3000);
  REQUIRE(h.op().on_processing_time(2999, h.out()));
  CHECK(h.records().empty());
  REQUIRE(h.op().on_processing_time(5000, h.out()));
  REQUIRE(h.records().size() == 2);
  CHECK(api::decode_or_throw<reading>(h.records()[0].payload, "").sensor == "b");
  CHECK(h.records()[0].timestamp == no_timestamp);  // processing time is no event time
  REQUIRE(h.op().on_processing_time(9000, h.out()));
  CHECK(h.records().size() == 2);
  CHECK_FALSE(h.op().next_processing_time());
}

namespace {
// Collects watermarks too.
struct watermark_output : collecting_output {
  void emit_watermark(const watermark& w) override { watermarks.push_back(w); }
  std::vector<watermark> watermarks;
};
}  // namespace

TEST_CASE("the timestamp assigner stamps records and emits watermarks per split on its period") {
  stream_environment env;
  api::typed_environment typed(env);
  typed.from_collection(std::vector<reading>{})
      .assign_timestamps_and_watermarks([](const reading& r) { return r.t; }, 100ms, 0ms,
                                        [](const reading& r) {
                                          return static_cast<std::uint32_t>(r.v);
                                        })
      .sink([](const reading&) {});
  job_vertex v;
  for (const auto& x : env.build_job_graph().vertices)
    if (x.kind == "user_timestamps") v = x;
  auto made = operator_factory::builtin().create(v);
  REQUIRE(made);
  auto& op = *made.value();
  watermark_output out;
  auto send = [&](const reading& r) { REQUIRE(op.process(record{1, 0, 0, api::encode(r)}, out)); };
  send({"a", 1000, 0});
  send({"a", 5000, 1});
  REQUIRE(out.records.size() == 2);
  CHECK(out.records[1].timestamp == 5000);
  REQUIRE(op.next_processing_time());
  REQUIRE(op.on_processing_time(*op.next_processing_time(), out));
  // The minimum over splits 0 and 1: 1000 - 100 - 1.
  CHECK(out.watermarks == std::vector<watermark>{watermark{899, false}});
  // Its input's watermarks are its own business, but for the end of input.
  REQUIRE(op.process_watermark(watermark{4000, false}, out));
  CHECK(out.watermarks.size() == 1);
}

namespace {

constexpr std::int64_t sensors = 8;
std::atomic<int> late_readings{0};
constexpr std::int64_t window_ms = 1000;

// Reading n: sensor n % 8 at event time n ms, value n. Tumbling 1 s windows per sensor, summed;
// each result a line: key = sensor * 1000 + window index, seq = window start, value = sum.
job_graph windows_job(const std::filesystem::path& out, std::int64_t count,
                      const std::string& backend, const operator_registry& registry,
                      std::uint32_t window_parallelism) {
  stream_environment env;
  env.set_job_name("event-time-windows").set_parallelism(2);
  env.enable_checkpointing(100ms);
  env.set_state_backend(backend);
  api::typed_environment typed(env);
  auto source = env.add_source("gated_source", {{"count", std::to_string(count)}});
  source.uid("source");
  auto readings = typed.from_sequence(source, [](std::int64_t n) {
    return reading{"s" + std::to_string(n % sensors), n, n};
  });
  readings.uid("decode");
  auto stamped =
      readings.assign_timestamps_and_watermarks([](const reading& r) { return r.t; }, 200ms);
  stamped.uid("timestamps");
  auto w = stamped.key_by([](const reading& r) { return r.sensor; })
               .window(api::tumbling_event_time_windows(std::chrono::milliseconds(window_ms)))
               .aggregate(
                   window_sum{},
                   [](window_sum acc, const reading& r) {
                     acc.sum += r.v;
                     ++acc.count;
                     return acc;
                   },
                   [](window_sum a, const window_sum& b) {
                     a.sum += b.sum;
                     a.count += b.count;
                     return a;
                   },
                   [](const std::string& key, const api::time_window& win, window_sum acc) {
                     acc.sensor = key;
                     acc.start = win.start;
                     acc.end = win.end;
                     return acc;
                   },
                   "sums");
  w.window.uid("sums").set_parallelism(window_parallelism);
  w.results.uid("sums-results").set_parallelism(window_parallelism);
  w.late.uid("sums-late").set_parallelism(window_parallelism);
  w.results
      .to_records([](const window_sum& s) {
        const std::int64_t sensor = std::stoll(s.sensor.substr(1));
        return record{static_cast<std::uint64_t>(sensor * 1000 + s.start / window_ms), s.start,
                      s.sum, {}};
      })
      .uid("to-records")
      .set_parallelism(window_parallelism)
      .add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink")
      .set_parallelism(window_parallelism);
  w.late.sink([](const reading&) { late_readings.fetch_add(1); }).uid("late-sink");
  return env.build_job_graph(registry);
}

vertex_id vertex_of_kind(const job_graph& job, const std::string& kind) {
  for (const auto& v : job.vertices)
    if (v.kind == kind) return v.id;
  FAIL("no vertex of kind " << kind);
  return 0;
}

void check_windows(const std::filesystem::path& out, std::int64_t count) {
  std::map<std::uint64_t, std::int64_t> expected;
  for (std::int64_t n = 0; n < count; ++n)
    expected[static_cast<std::uint64_t>((n % sensors) * 1000 + n / window_ms)] += n;
  std::map<std::uint64_t, int> seen;
  std::size_t wrong = 0;
  for (const auto& l : read_committed_output(out)) {
    ++seen[l.key];
    auto it = expected.find(l.key);
    if (it == expected.end() || it->second != l.value) ++wrong;
  }
  CHECK(wrong == 0);
  CHECK(seen.size() == expected.size());  // none lost
  for (const auto& [k, n] : seen) CHECK(n == 1);  // none twice
}

}  // namespace

TEST_CASE("event-time windows on the local cluster: a killed task, a restore (also rescaled), "
          "every window exactly once") {
  const std::string backend = GENERATE("hashmap", "rocksdb");
  const std::uint32_t restored_parallelism = GENERATE(2u, 4u, 1u);
  INFO("state backend " << backend << ", windows restored at parallelism " << restored_parallelism);
  testing::temp_folder dir("event-time-job");
  constexpr std::int64_t count = 20'000;
  const auto out = dir.path() / "out";
  gated_kinds kinds(/*hold_after=*/4'500);  // per source subtask: 9,000 before the gate
  const job_graph job = windows_job(out, count, backend, kinds.registry, 2);
  {
    local_cluster first(job, kinds.options(dir));
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    REQUIRE(first.wait_for_completed_checkpoints(3, 60s));
    first.kill_task({vertex_of_kind(job, "user_process"), 1}, "killed by test");
    REQUIRE(first.wait(60s) == job_status::failed);
  }
  CHECK(read_committed_output(out).size() < static_cast<std::size_t>(sensors * count / window_ms));
  kinds.open->store(true);
  auto options = kinds.options(dir);
  options.restore_latest = true;
  job_graph restored = windows_job(out, count, backend, kinds.registry, restored_parallelism);
  restored.id = job.id;
  local_cluster second(restored, options);
  auto status = second.run(120s);
  if (!status) FAIL(status.err().message);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(*status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  check_windows(out, count);
  CHECK(late_readings.load() == 0);
}

namespace {

// Each sensor arms two processing-time timers at its first reading: a quick one that fires
// while the first run is still going, and a slow one still pending when the task is killed (on
// a loaded machine it may fire before the kill; exactly once holds either way). A timer's line:
// key = sensor * 10 + which (0 quick, 1 slow), seq = which, value = readings seen by then.
constexpr std::int64_t quick_timer_ms = 10;
constexpr std::int64_t slow_timer_ms = 3'000;

job_graph processing_timers_job(const std::filesystem::path& out, std::int64_t count,
                                const std::string& backend, const operator_registry& registry,
                                std::uint32_t timers_parallelism) {
  stream_environment env;
  env.set_job_name("processing-time-timers").set_parallelism(2);
  env.enable_checkpointing(100ms);
  env.set_state_backend(backend);
  api::typed_environment typed(env);
  auto source = env.add_source("gated_source", {{"count", std::to_string(count)}});
  source.uid("source");
  auto readings = typed.from_sequence(source, [](std::int64_t n) {
    return reading{"s" + std::to_string(n % sensors), n, n};
  });
  readings.uid("decode");
  auto fired =
      readings.key_by([](const reading& r) { return r.sensor; })
          .process<reading>(
              [](const reading&, api::keyed_process_context<std::string>& ctx,
                 api::collector<reading>&) {
                auto seen = ctx.get_state<std::int64_t>("seen");
                const std::int64_t n = seen.value_or(0) + 1;
                seen.update(n);
                if (n > 1) return;
                const std::int64_t now = ctx.current_processing_time();
                ctx.get_state<std::int64_t>("quick-at").update(now + quick_timer_ms);
                ctx.register_processing_time_timer(now + quick_timer_ms);
                ctx.register_processing_time_timer(now + slow_timer_ms);
              },
              [](std::int64_t t, api::keyed_process_context<std::string>& ctx,
                 api::collector<reading>& c) {
                const std::int64_t which =
                    t == ctx.get_state<std::int64_t>("quick-at").value_or(-1) ? 0 : 1;
                c.collect(reading{ctx.key(), which, ctx.get_state<std::int64_t>("seen").value_or(0)});
              },
              "timers");
  fired.uid("timers").set_parallelism(timers_parallelism);
  fired
      .to_records([](const reading& r) {
        const std::int64_t sensor = std::stoll(r.sensor.substr(1));
        return record{static_cast<std::uint64_t>(sensor * 10 + r.t), r.t, r.v, {}};
      })
      .uid("to-records")
      .set_parallelism(timers_parallelism)
      .add_sink("two_phase_commit_file_sink", {{"path", out.string()}})
      .uid("sink")
      .set_parallelism(timers_parallelism);
  return env.build_job_graph(registry);
}

// How many committed lines are of the quick (0) or slow (1) timers.
std::size_t committed_timer_lines(const std::filesystem::path& out, std::int64_t which) {
  std::size_t n = 0;
  for (const auto& l : read_committed_output(out)) n += l.seq == which ? 1 : 0;
  return n;
}

// Polls until `want` lines of timer `which` are committed, for at most `timeout`.
bool wait_for_timer_lines(const std::filesystem::path& out, std::int64_t which, std::size_t want,
                          std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (committed_timer_lines(out, which) < want) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

}  // namespace

TEST_CASE("processing-time timers in a running job fire once each across a killed task and a "
          "restore, also rescaled") {
  const auto [backend, restored_parallelism] =
      GENERATE(std::pair<std::string, std::uint32_t>{"hashmap", 4},
               std::pair<std::string, std::uint32_t>{"rocksdb", 1},
               std::pair<std::string, std::uint32_t>{"rocksdb", 2});
  INFO("state backend " << backend << ", timers restored at parallelism " << restored_parallelism);
  testing::temp_folder dir("processing-timers");
  constexpr std::int64_t count = 4'000;
  const auto out = dir.path() / "out";
  gated_kinds kinds(/*hold_after=*/500);
  const job_graph job = processing_timers_job(out, count, backend, kinds.registry, 2);
  {
    local_cluster first(job, kinds.options(dir));
    auto started = first.start();
    if (!started) FAIL(started.err().message);
    // The quick timers fired and their lines were committed by a checkpoint: a restore must not
    // fire them again. The slow ones are in that checkpoint, pending.
    REQUIRE(wait_for_timer_lines(out, 0, sensors, 60s));
    REQUIRE(first.wait_for_completed_checkpoints(1, 60s));
    first.kill_task({vertex_of_kind(job, "user_process"), 1}, "killed by test");
    REQUIRE(first.wait(60s) == job_status::failed);
  }
  INFO("slow timers committed before the kill: " << committed_timer_lines(out, 1));
  auto options = kinds.options(dir);
  options.restore_latest = true;
  job_graph restored = processing_timers_job(out, count, backend, kinds.registry,
                                             restored_parallelism);
  restored.id = job.id;
  local_cluster second(restored, options);
  auto started = second.start();
  if (!started) FAIL(started.err().message);
  // Still gated: the restored slow timers fire by the clock, not at the end of the input.
  const bool slow_fired = wait_for_timer_lines(out, 1, sensors, 60s);
  kinds.open->store(true);
  const job_status status = second.wait(120s);
  INFO("failure: " << second.failure_cause().value_or("none"));
  REQUIRE(status == job_status::finished);
  REQUIRE(second.restored_checkpoint());
  REQUIRE(slow_fired);
  std::map<std::uint64_t, int> lines;
  for (const auto& l : read_committed_output(out)) ++lines[l.key];
  CHECK(lines.size() == static_cast<std::size_t>(2 * sensors));
  for (const auto& [key, n] : lines) {
    INFO("sensor " << key / 10 << ", timer " << key % 10);
    CHECK(n == 1);
  }
}
