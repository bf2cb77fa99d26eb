#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>

#include "tests/transport/frame_builder.hpp"
#include "transport/envelope.hpp"

using namespace snapflow;
using namespace snapflow::wire;
using snapflow::wire::testing::frame_builder;

namespace {

execution_attempt_id attempt_of(vertex_id vertex, std::uint32_t index, std::uint32_t n) {
  return execution_attempt_id{subtask_id{vertex, index}, n};
}

std::string describe(const decode_result& r) {
  std::ostringstream os;
  if (r.ok())
    os << "ok: " << r.value();
  else
    os << r.error();
  return os.str();
}

// Both readers: decode() reads what encode writes on its fast path (canonical frames), and the
// general reader it falls back to reads the same message from the same bytes.
template <typename M>
void check_round_trip(const M& original) {
  const std::string frame = encode(original);
  const decode_result decoded = decode(frame);
  INFO(describe(decoded));
  REQUIRE(decoded.ok());
  REQUIRE(std::holds_alternative<M>(decoded.value()));
  CHECK(std::get<M>(decoded.value()) == original);
  CHECK(type_name(decoded.value()) == M::wire_type);
  const std::optional<message> fast = detail::decode_canonical(frame);
  REQUIRE(fast.has_value());
  CHECK(*fast == decoded.value());
  const decode_result general = detail::decode_general(frame);
  REQUIRE(general.ok());
  CHECK(general.value() == decoded.value());
}

decode_error error_of(std::string_view frame) {
  const decode_result decoded = decode(frame);
  INFO(describe(decoded));
  REQUIRE_FALSE(decoded.ok());
  return decoded.error();
}

const std::string job = "5f0e7a3c9b1d4e2f8a6c0b7d3e9f1a2c";

}  // namespace

// ---- round trips ----------------------------------------------------------------------------

TEST_CASE("register_worker round-trips") {
  check_round_trip(register_worker{"worker-7", 4, "tcp://10.0.0.7:6123", 1, 4242});
}

TEST_CASE("register_worker carries its session; from a worker that sends none the field reads as zero") {
  check_round_trip(register_worker{"worker-7", 4, "tcp://10.0.0.7:6123", 1, 4242, 0x1234abcd});
  frame_builder f;
  f.envelope("register_worker", 5);
  f.str("worker_id").str("old").str("slots").uint(1).str("data_endpoint").str("tcp://x:1");
  f.str("protocol_version").uint(1).str("pid").uint(7);
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK(std::get<register_worker>(r.value()).session == 0);
}

TEST_CASE("register_worker carries its data roots; a worker that sends none has none") {
  register_worker m{"worker-7", 4, "tcp://10.0.0.7:6123", 1, 4242, 9};
  m.data_roots = {{"/srv/snapflow/data"}, {"/srv/snapflow/input"}};
  check_round_trip(m);
  frame_builder f;
  f.envelope("register_worker", 5);
  f.str("worker_id").str("old").str("slots").uint(1).str("data_endpoint").str("tcp://x:1");
  f.str("protocol_version").uint(1).str("pid").uint(7);
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK(std::get<register_worker>(r.value()).data_roots.empty());
}

TEST_CASE("register_worker carries the programs a worker holds; one that sends none has none") {
  register_worker m{"worker-8", 2, "tcp://10.0.0.8:6123", 1, 4243, 3};
  m.programs = {{"0123abcd", "word-count 1.0"}, {"ffee", ""}};
  check_round_trip(m);
  frame_builder f;
  f.envelope("register_worker", 5);
  f.str("worker_id").str("old").str("slots").uint(1).str("data_endpoint").str("tcp://x:1");
  f.str("protocol_version").uint(1).str("pid").uint(7);
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK(std::get<register_worker>(r.value()).programs.empty());
}

TEST_CASE("not_registered round-trips, with and without a reason") {
  check_round_trip(not_registered{"this coordinator does not know worker w1: register first"});
  check_round_trip(not_registered{});
}

TEST_CASE("source_exhausted and finish_task round-trip") {
  check_round_trip(source_exhausted{job, attempt_of(0, 3, 1), 17});
  check_round_trip(source_exhausted{job, attempt_of(0, 0, 0), 0});
  check_round_trip(finish_task{job, attempt_of(0, 3, 1)});
}

TEST_CASE("register_ack round-trips, accepted and refused") {
  check_round_trip(register_ack{true, "", 100, 1000});
  check_round_trip(register_ack{false, "duplicate worker id", 0, 0});
}

TEST_CASE("heartbeat round-trips, including negative timestamps") {
  check_round_trip(heartbeat{"worker-7", 1'733'000'000'123});
  check_round_trip(heartbeat{"coordinator", -5});
}

TEST_CASE("heartbeat task counters round-trip with the byte bound and buffered bytes") {
  task_io io{job, attempt_of(1, 2, 3), 10, 20, std::nullopt};
  io.in_flight_bytes_bound = 65'536;
  io.buffered_in_bytes = 1'234;
  check_round_trip(heartbeat{"worker-1", 7, std::vector<task_io>{io}});
}

TEST_CASE("deploy_task round-trips with and without restore state") {
  std::string graph_bytes;
  for (int i = 0; i < 300; ++i) graph_bytes.push_back(static_cast<char>(i));  // every byte value
  const std::vector<subtask_endpoint> endpoints = {{{0, 0}, "tcp://10.0.0.7:7001"},
                                                   {{3, 1}, "tcp://10.0.0.8:7001"}};
  check_round_trip(deploy_task{job, attempt_of(3, 1, 2), graph_bytes, endpoints, std::nullopt,
                               {}, "/state/" + job});
  check_round_trip(deploy_task{
      job, attempt_of(3, 1, 0), graph_bytes, endpoints, 17,
      {{0, {{"chk-17/v3-0.state", 4096, 0xdeadbeef}}, 4096},
       {1, {{"chk-17/v3-1.state", 10, 1}, {"chk-17/v3-1.extra", 0, 0}}, 10},
       {2, {}, 0}},
      "/state/" + job});
  check_round_trip(deploy_task{job, attempt_of(0, 0, 0), "", {}, std::nullopt, {}, ""});
}

TEST_CASE("deploy_task carries public keys with CURVE, and frames without them are unchanged") {
  const std::string key_a = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  const std::vector<subtask_endpoint> with_keys = {{{0, 0}, "tcp://10.0.0.7:7001", key_a},
                                                   {{3, 1}, "tcp://10.0.0.8:7001", key_a}};
  check_round_trip(deploy_task{job, attempt_of(3, 1, 2), "g", with_keys, std::nullopt, {}, ""});

  // The key is written only when set: an endpoint without one is the three-field map it always
  // was, so the frames of a cluster without CURVE stay byte for byte what they were.
  const std::vector<subtask_endpoint> without = {{{0, 0}, "tcp://10.0.0.7:7001"}};
  const std::string plain =
      encode(deploy_task{job, attempt_of(3, 1, 2), "g", without, std::nullopt, {}, ""});
  CHECK(plain.find("public_key") == std::string::npos);
  CHECK(plain.find("\x83\xa6vertex") != std::string::npos);  // fixmap of 3, "vertex" first
  const std::string keyed =
      encode(deploy_task{job, attempt_of(3, 1, 2), "g", {with_keys[0]}, std::nullopt, {}, ""});
  CHECK(keyed.find("\x84\xa6vertex") != std::string::npos);  // fixmap of 4
  CHECK(keyed.find("public_key") != std::string::npos);
}

TEST_CASE("cancel_task round-trips") { check_round_trip(cancel_task{job, attempt_of(9, 31, 4)}); }

TEST_CASE("task_state_update round-trips for every state") {
  for (auto state : {task_state::deploying, task_state::running, task_state::finished,
                     task_state::failed, task_state::canceled})
    check_round_trip(task_state_update{job, attempt_of(1, 2, 3), state,
                                       state == task_state::failed ? "boom" : ""});
}

TEST_CASE("trigger_checkpoint round-trips for checkpoints and savepoints in both modes") {
  check_round_trip(trigger_checkpoint{job, attempt_of(0, 0, 1), 42, 1'733'000'000'000, false, "",
                                      checkpointing_mode::exactly_once, true, "/state/chk-42"});
  check_round_trip(trigger_checkpoint{job, attempt_of(0, 3, 1), 43, 1, true, "/savepoints",
                                      checkpointing_mode::at_least_once, false, ""});
}

TEST_CASE("acknowledge_checkpoint round-trips with every metric") {
  check_round_trip(acknowledge_checkpoint{job, attempt_of(2, 0, 1), 42,
                                          {{"chk-42/a", 10, 1}, {"chk-42/b", 20, 0xffffffff}},
                                          30, 120, 4500, 17, 65536});
  check_round_trip(acknowledge_checkpoint{job, attempt_of(2, 1, 1), 43, {}, 0, 0, 0, 0, 0});
}

TEST_CASE("a keyed acknowledgement and restore state carry max parallelism and key groups") {
  acknowledge_checkpoint ack{job, attempt_of(2, 0, 1), 42, {{"chk-42/a", 10, 1}}, 10};
  ack.max_parallelism = 32768;
  ack.first_key_group = 16384;
  ack.last_key_group = 32767;
  check_round_trip(ack);
  subtask_restore_state restore{3, {{"chk-42/a", 10, 1}}, 10, 128, 0, 63};
  deploy_task deploy;
  deploy.job = job;
  deploy.attempt = attempt_of(2, 0, 2);
  deploy.restore_checkpoint_id = 42;
  deploy.restore_states = {restore};
  check_round_trip(deploy);
}

TEST_CASE("acknowledge_checkpoint round-trips a state carried inline, bytes as they are") {
  acknowledge_checkpoint m{job, attempt_of(2, 0, 1), 42, {}, 0, 0, 0, 0, 0};
  m.state_handles.push_back({"", 5, 0x1234, std::string("\0\x01\xFF" "ab", 5)});
  m.state_handles.push_back({"chk-42/b", 20, 7, std::nullopt});
  check_round_trip(m);
  // Without inline state a handle encodes as before the field existed.
  const std::string plain = encode(acknowledge_checkpoint{job, attempt_of(2, 0, 1), 42,
                                                          {{"chk-42/b", 20, 7}}, 0, 0, 0, 0, 0});
  CHECK(plain.find("inline_state") == std::string::npos);
  CHECK(encode(m).find("inline_state") != std::string::npos);
}

TEST_CASE("acknowledge_checkpoint round-trips which state files are shared") {
  acknowledge_checkpoint m{job, attempt_of(2, 0, 1), 42, {}, 0, 0, 0, 0, 0};
  m.state_handles.push_back({"a.sst", 5, 1, std::nullopt, std::string("shared_new")});
  m.state_handles.push_back({"b.sst", 6, 2, std::nullopt, std::string("shared_reused")});
  m.state_handles.push_back({"chk-42/own", 20, 7, std::nullopt});
  check_round_trip(m);
}

TEST_CASE("acknowledge_checkpoint round-trips the alignment record counts") {
  acknowledge_checkpoint m{job, attempt_of(3, 0, 1), 7, {}, 0, 0, 0, 250, 0};
  m.records_held_during_alignment = 657;
  m.records_after_barrier = UINT64_MAX;
  check_round_trip(m);
}

TEST_CASE("decline_checkpoint round-trips") {
  check_round_trip(decline_checkpoint{job, attempt_of(1, 1, 1), 44,
                                      "checkpoint_declined_task_not_ready", "still deploying"});
}

TEST_CASE("notify_checkpoint_complete round-trips") {
  check_round_trip(notify_checkpoint_complete{job, attempt_of(1, 0, 2), 45});
}

TEST_CASE("notify_checkpoint_aborted round-trips with and without a latest completed id") {
  check_round_trip(notify_checkpoint_aborted{job, attempt_of(1, 0, 2), 46, 45});
  check_round_trip(notify_checkpoint_aborted{job, attempt_of(1, 0, 2), 1, std::nullopt});
}

TEST_CASE("trigger_checkpoint_batch round-trips and expands to the single triggers") {
  const trigger_checkpoint_batch b{job,
                                   42,
                                   1'733'000'000'000,
                                   true,
                                   "/savepoints",
                                   checkpointing_mode::at_least_once,
                                   true,
                                   "/state/chk-42",
                                   {attempt_of(0, 0, 1), attempt_of(0, 7, 1), attempt_of(3, 1, 2)}};
  check_round_trip(b);
  const trigger_checkpoint one = b.entry(attempt_of(0, 7, 1));
  CHECK(one == trigger_checkpoint{job, attempt_of(0, 7, 1), 42, 1'733'000'000'000, true,
                                  "/savepoints", checkpointing_mode::at_least_once, true,
                                  "/state/chk-42"});
  CHECK(b.takes(one));
  trigger_checkpoint other = one;
  other.checkpoint = 43;
  CHECK_FALSE(b.takes(other));
  check_round_trip(trigger_checkpoint_batch{job, 1, 0, false, "", checkpointing_mode::exactly_once,
                                            false, "", {attempt_of(0, 0, 0)}});
}

TEST_CASE("notification batches round-trip, with and without a latest completed id") {
  check_round_trip(notify_checkpoint_complete_batch{
      job, 45, {attempt_of(1, 0, 2), attempt_of(1, 1, 2), attempt_of(2, 0, 2)}});
  check_round_trip(
      notify_checkpoint_aborted_batch{job, 46, 45, {attempt_of(1, 0, 2), attempt_of(1, 1, 2)}});
  check_round_trip(notify_checkpoint_aborted_batch{job, 1, std::nullopt, {attempt_of(1, 0, 2)}});
}

TEST_CASE("acknowledge_checkpoint_batch round-trips whole acknowledgements of several jobs") {
  acknowledge_checkpoint inline_ack{job, attempt_of(2, 0, 1), 42, {}, 5, 1, 2, 3, 4};
  inline_ack.state_handles.push_back({"", 5, 0x1234, std::string("\0\x01\xFF" "ab", 5)});
  inline_ack.barrier_received_timestamp_us = 1'733'000'000'000'123;
  check_round_trip(acknowledge_checkpoint_batch{
      {inline_ack,
       acknowledge_checkpoint{job, attempt_of(2, 1, 1), 42, {{"chk-42/b", 20, 7}}, 20, 0, 0, 0, 0},
       acknowledge_checkpoint{"another-job", attempt_of(0, 0, 0), 3, {}, 0, 0, 0, 0, 0}}});
}

TEST_CASE("register_worker and register_ack say how large a batch they read; older peers do not") {
  register_worker w{"worker-7", 4, "tcp://10.0.0.7:6123", 1, 4242, 9};
  w.max_batch_bytes = 8 << 20;
  check_round_trip(w);
  check_round_trip(register_ack{true, "", 100, 1000, 8 << 20});
  // Left out, it is 0 (no batches): what an older peer's frame decodes to.
  frame_builder f;
  f.envelope("register_ack", 3);
  f.str("accepted").boolean(true).str("heartbeat_interval_ms").uint(100);
  f.str("heartbeat_timeout_ms").uint(1000);
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK(std::get<register_ack>(r.value()).max_batch_bytes == 0);
}

TEST_CASE("extreme integer values round-trip") {
  check_round_trip(register_worker{"w", UINT32_MAX, "", UINT32_MAX, INT64_MIN});
  check_round_trip(acknowledge_checkpoint{job, attempt_of(UINT32_MAX, UINT32_MAX, UINT32_MAX),
                                          INT64_MAX, {{"p", UINT64_MAX, UINT32_MAX}},
                                          UINT64_MAX, INT64_MAX, INT64_MIN, -1, UINT64_MAX});
}

TEST_CASE("every alternative of the message variant has a distinct wire type") {
  std::vector<std::string_view> names;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (names.push_back(std::variant_alternative_t<I, message>::wire_type), ...);
  }(std::make_index_sequence<std::variant_size_v<message>>{});
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  CHECK(names.size() == 18);
}

// ---- what a peer may legitimately do --------------------------------------------------------

TEST_CASE("unknown keys are ignored so fields can be added") {
  frame_builder f;
  f.envelope("heartbeat", 4);
  f.str("future_field").map(1).str("nested").array(2).uint(1).str("x");
  f.str("sender").str("worker-1");
  f.str("timestamp_ms").sint(99);
  f.uint(7).str("a non-string key is skipped too");
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK(std::get<heartbeat>(r.value()) == heartbeat{"worker-1", 99});
}

TEST_CASE("optional fields may be absent or nil") {
  frame_builder f;
  f.envelope("notify_checkpoint_aborted", 4);
  f.str("job_id").str(job);
  f.str("attempt").attempt(1, 2, 3);
  f.str("checkpoint_id").uint(9);
  f.str("latest_completed_checkpoint_id").nil();
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK(std::get<notify_checkpoint_aborted>(r.value()) ==
        notify_checkpoint_aborted{job, attempt_of(1, 2, 3), 9, std::nullopt});

  frame_builder g;
  g.envelope("acknowledge_checkpoint", 3);
  g.str("job_id").str(job);
  g.str("attempt").attempt(1, 2, 3);
  g.str("checkpoint_id").uint(9);
  const decode_result s = decode(g.bytes());
  INFO(describe(s));
  REQUIRE(s.ok());
  CHECK(std::get<acknowledge_checkpoint>(s.value()) ==
        acknowledge_checkpoint{job, attempt_of(1, 2, 3), 9, {}, 0, 0, 0, 0, 0});
}

TEST_CASE("an optional field at its zero is left out of the frame and decodes back to it") {
  // An acknowledgement without state or metrics is its three required fields.
  const acknowledge_checkpoint bare{job, attempt_of(1, 2, 3), 9, {}, 0, 0, 0, 0, 0};
  frame_builder expected;
  expected.envelope("acknowledge_checkpoint", 3);
  expected.str("job_id").str(job);
  expected.str("attempt").attempt(1, 2, 3);
  expected.str("checkpoint_id").uint(9);
  CHECK(encode(bare) == expected.bytes());
  check_round_trip(bare);

  // A metric that is not zero is written, and only that one.
  acknowledge_checkpoint timed = bare;
  timed.sync_duration_us = 12;
  const std::string frame = encode(timed);
  CHECK(static_cast<unsigned char>(frame.front()) == 0x80 + 2 + 4);
  CHECK(frame.find("sync_duration_us") != std::string::npos);
  CHECK(frame.find("async_duration_us") == std::string::npos);
  check_round_trip(timed);

  // An std::optional that holds its type's zero is not absent: it is written.
  notify_checkpoint_aborted aborted{job, attempt_of(1, 2, 3), 9, 0};
  CHECK(encode(aborted).find("latest_completed_checkpoint_id") != std::string::npos);
  check_round_trip(aborted);
  aborted.latest_completed_checkpoint_id.reset();
  CHECK(encode(aborted).find("latest_completed_checkpoint_id") == std::string::npos);
  check_round_trip(aborted);

  // A trigger leaves out is_savepoint, savepoint_dir, unaligned and an empty location; its
  // mode is required and always there.
  trigger_checkpoint trigger{job, attempt_of(1, 2, 3), 9, 1'700'000'000'000};
  const std::string trigger_frame = encode(trigger);
  CHECK(static_cast<unsigned char>(trigger_frame.front()) == 0x80 + 2 + 5);
  CHECK(trigger_frame.find("exactly_once") != std::string::npos);
  check_round_trip(trigger);
}

TEST_CASE("job graph bytes are accepted as str as well as bin") {
  frame_builder f;
  f.envelope("deploy_task", 3);
  f.str("job_id").str(job);
  f.str("attempt").attempt(0, 0, 0);
  f.str("job_graph").str("graph-as-text");
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK(std::get<deploy_task>(r.value()).job_graph == "graph-as-text");
}

// ---- what a broken or hostile peer may send -------------------------------------------------

TEST_CASE("garbage bytes are not msgpack") {
  CHECK(error_of("\xc1").code == decode_errc::not_msgpack);
  CHECK(error_of("\x92\x01\xc1").code == decode_errc::not_msgpack);
  // 'h' is a msgpack positive fixint: one value, then bytes after it.
  CHECK(error_of("hello world").code == decode_errc::not_msgpack);
}

TEST_CASE("an empty frame is truncated") {
  const decode_error e = error_of("");
  CHECK(e.code == decode_errc::truncated);
  CHECK(e.detail == "empty frame");
}

TEST_CASE("every proper prefix of a valid frame is truncated") {
  const std::string frame = encode(acknowledge_checkpoint{
      job, attempt_of(2, 0, 1), 42, {{"chk-42/a", 10, 1}}, 30, 120, 4500, 17, 65536});
  for (std::size_t n = 0; n < frame.size(); ++n) {
    INFO("prefix of " << n << " of " << frame.size() << " bytes");
    CHECK(error_of(std::string_view(frame).substr(0, n)).code == decode_errc::truncated);
  }
}

TEST_CASE("a batch declaring a huge array of entries is refused before anything is allocated") {
  frame_builder f;
  f.envelope("acknowledge_checkpoint_batch", 1);
  f.str("acks").raw("\xdd\x7f\xff\xff\xff");  // array 32 of 2 Gi entries
  CHECK(error_of(f.bytes()).code == decode_errc::too_large_declared_length);

  frame_builder g;
  g.envelope("trigger_checkpoint_batch", 4);
  g.str("job_id").str(job).str("checkpoint_id").uint(1).str("timestamp_ms").uint(1);
  g.str("attempts").raw("\xdc\xff\xff");  // array 16 of 65535 entries, none there
  CHECK(error_of(g.bytes()).code == decode_errc::truncated);
}

TEST_CASE("a batch without entries, or with one malformed entry, is refused whole") {
  frame_builder empty;
  empty.envelope("notify_checkpoint_complete_batch", 3);
  empty.str("job_id").str(job).str("checkpoint_id").uint(4).str("attempts").array(0);
  const decode_error e = error_of(empty.bytes());
  CHECK(e.code == decode_errc::invalid_value);
  CHECK(e.detail == "field 'attempts': an empty batch");

  frame_builder missing;
  missing.envelope("notify_checkpoint_complete_batch", 2);
  missing.str("job_id").str(job).str("checkpoint_id").uint(4);
  CHECK(error_of(missing.bytes()).code == decode_errc::missing_field);

  // The second acknowledgement lacks its attempt: the frame cannot be read, none of it counts.
  frame_builder bad;
  bad.envelope("acknowledge_checkpoint_batch", 1);
  bad.str("acks").array(2);
  bad.map(3).str("job_id").str(job).str("attempt").attempt(0, 0, 1).str("checkpoint_id").uint(4);
  bad.map(2).str("job_id").str(job).str("checkpoint_id").uint(4);
  const decode_error b = error_of(bad.bytes());
  CHECK(b.code == decode_errc::missing_field);
  CHECK(b.detail == "field 'acks[1].attempt': required");

  // A fault two records deep names the whole path: the entry, its attempt, the field.
  frame_builder deep;
  deep.envelope("acknowledge_checkpoint_batch", 1);
  deep.str("acks").array(2);
  deep.map(3).str("job_id").str(job).str("attempt").attempt(0, 0, 1).str("checkpoint_id").uint(4);
  deep.map(3).str("job_id").str(job).str("checkpoint_id").uint(4).str("attempt").map(3);
  deep.str("vertex").uint(0).str("subtask").str("one").str("attempt").uint(1);
  const decode_error d = error_of(deep.bytes());
  CHECK(d.code == decode_errc::wrong_type);
  CHECK(d.detail == "field 'acks[1].attempt.subtask': expected unsigned integer, got str");

  // An entry that is not a map at all.
  frame_builder not_map;
  not_map.envelope("acknowledge_checkpoint_batch", 1);
  not_map.str("acks").array(1).uint(7);
  const decode_error n = error_of(not_map.bytes());
  CHECK(n.code == decode_errc::wrong_type);
  CHECK(n.detail == "field 'acks[0]': expected map, got int");
}

TEST_CASE("a huge declared array length is refused before anything is allocated") {
  frame_builder f;
  f.envelope("acknowledge_checkpoint", 1);
  f.str("state_handles").raw("\xdd\xff\xff\xff\xff");  // array 32 of 4 Gi elements
  const decode_error e = error_of(f.bytes());
  CHECK(e.code == decode_errc::too_large_declared_length);
  CHECK_THAT(e.detail, Catch::Contains("4294967295 elements"));
}

TEST_CASE("a huge declared map length is refused") {
  CHECK(error_of("\xdf\xff\xff\xff\xff").code == decode_errc::too_large_declared_length);
}

TEST_CASE("a huge declared string length is refused") {
  frame_builder f;
  f.map(2).str("v").uint(1).str("t").raw("\xdb\xff\xff\xff\xff" "abc");  // str 32 of 4 GiB
  const decode_error e = error_of(f.bytes());
  CHECK(e.code == decode_errc::too_large_declared_length);
  CHECK_THAT(e.detail, Catch::Contains("4294967295 bytes"));
}

TEST_CASE("a huge declared bin or ext length is refused") {
  CHECK(error_of("\xc6\xff\xff\xff\xff").code == decode_errc::too_large_declared_length);
  CHECK(error_of("\xc9\x7f\xff\xff\xff\x01").code == decode_errc::too_large_declared_length);
}

TEST_CASE("a declared length within the limit but past the frame is truncated") {
  CHECK(error_of("\xdb\x00\x01\x00\x00" "abc").code == decode_errc::truncated);
  CHECK(error_of("\xdd\x00\x00\x10\x00\x01").code == decode_errc::truncated);
}

TEST_CASE("the too-large threshold is the frame limit the caller passes") {
  const std::string frame = encode(heartbeat{std::string(100, 'w'), 1});
  CHECK(decode(frame, 1000).ok());
  // The frame itself is over the limit: refused before any header is read.
  const decode_error whole = decode(frame, 50).error();
  CHECK(whole.code == decode_errc::frame_too_large);
  CHECK_THAT(whole.detail, Catch::Contains("over the 50-byte frame limit"));
  CHECK(decode(frame, frame.size()).ok());
  // A short frame declaring a string longer than the limit: the declaration is the lie.
  const std::string lying("\xdb\x00\x00\x00\x64" "abc", 8);
  CHECK(decode(lying, 50).error().code == decode_errc::too_large_declared_length);
  CHECK(decode(lying, 200).error().code == decode_errc::truncated);
}

TEST_CASE("nesting deeper than the limit is refused") {
  frame_builder f;
  f.envelope("heartbeat", 3);
  f.str("sender").str("w");
  f.str("timestamp_ms").uint(1);
  f.str("deep");
  for (std::size_t i = 0; i < max_nesting_depth + 8; ++i) f.array(1);
  f.uint(0);
  CHECK(error_of(f.bytes()).code == decode_errc::too_deep);
}

TEST_CASE("bytes after the envelope are refused") {
  std::string frame = encode(heartbeat{"w", 1});
  frame.push_back('\0');
  CHECK(error_of(frame).code == decode_errc::not_msgpack);
}

TEST_CASE("an envelope that is not a map is refused") {
  frame_builder f;
  f.array(2).uint(1).str("heartbeat");
  CHECK(error_of(f.bytes()).code == decode_errc::not_a_map);
  CHECK(error_of("\x01").code == decode_errc::not_a_map);
}

TEST_CASE("a missing version, type or required field is named") {
  frame_builder no_version;
  no_version.map(1).str("t").str("heartbeat");
  decode_error e = error_of(no_version.bytes());
  CHECK(e.code == decode_errc::missing_field);
  CHECK_THAT(e.detail, Catch::Contains("'v'"));

  frame_builder no_type;
  no_type.map(1).str("v").uint(1);
  e = error_of(no_type.bytes());
  CHECK(e.code == decode_errc::missing_field);
  CHECK_THAT(e.detail, Catch::Contains("'t'"));

  frame_builder no_timestamp;
  no_timestamp.envelope("heartbeat", 1).str("sender").str("w");
  e = error_of(no_timestamp.bytes());
  CHECK(e.code == decode_errc::missing_field);
  CHECK_THAT(e.detail, Catch::Contains("timestamp_ms"));

  frame_builder no_subtask;
  no_subtask.envelope("cancel_task", 2).str("job_id").str(job);
  no_subtask.str("attempt").map(2).str("vertex").uint(1).str("attempt").uint(0);
  e = error_of(no_subtask.bytes());
  CHECK(e.code == decode_errc::missing_field);
  CHECK_THAT(e.detail, Catch::Contains("attempt.subtask"));
}

TEST_CASE("a field of the wrong type is named") {
  frame_builder f;
  f.envelope("notify_checkpoint_complete", 3);
  f.str("job_id").str(job);
  f.str("attempt").attempt(1, 0, 0);
  f.str("checkpoint_id").str("42");
  decode_error e = error_of(f.bytes());
  CHECK(e.code == decode_errc::wrong_type);
  CHECK_THAT(e.detail, Catch::Contains("checkpoint_id") && Catch::Contains("got str"));

  frame_builder nested;
  nested.envelope("acknowledge_checkpoint", 4);
  nested.str("job_id").str(job);
  nested.str("attempt").attempt(1, 0, 0);
  nested.str("checkpoint_id").uint(1);
  nested.str("state_handles").array(2);
  nested.map(3).str("path").str("a").str("size").uint(1).str("checksum").uint(1);
  nested.map(3).str("path").uint(5).str("size").uint(1).str("checksum").uint(1);
  e = error_of(nested.bytes());
  CHECK(e.code == decode_errc::wrong_type);
  CHECK_THAT(e.detail, Catch::Contains("state_handles[1].path"));

  frame_builder version_as_text;
  version_as_text.map(2).str("v").str("1").str("t").str("heartbeat");
  CHECK(error_of(version_as_text.bytes()).code == decode_errc::wrong_type);
}

TEST_CASE("values out of range or unknown enum names are invalid") {
  frame_builder too_many_slots;
  too_many_slots.envelope("register_worker", 5);
  too_many_slots.str("worker_id").str("w").str("slots").uint(std::uint64_t{1} << 40);
  too_many_slots.str("data_endpoint").str("").str("protocol_version").uint(1);
  too_many_slots.str("pid").uint(1);
  CHECK(error_of(too_many_slots.bytes()).code == decode_errc::invalid_value);

  frame_builder negative_slots;
  negative_slots.envelope("register_worker", 5);
  negative_slots.str("worker_id").str("w").str("slots").sint(-1);
  negative_slots.str("data_endpoint").str("").str("protocol_version").uint(1);
  negative_slots.str("pid").uint(1);
  CHECK(error_of(negative_slots.bytes()).code == decode_errc::invalid_value);

  frame_builder odd_state;
  odd_state.envelope("task_state_update", 3);
  odd_state.str("job_id").str(job).str("attempt").attempt(0, 0, 0);
  odd_state.str("state").str("exploded");
  const decode_error e = error_of(odd_state.bytes());
  CHECK(e.code == decode_errc::invalid_value);
  CHECK_THAT(e.detail, Catch::Contains("exploded"));
}

TEST_CASE("an unknown message type is named") {
  frame_builder f;
  f.envelope("launch_rockets", 0);
  const decode_error e = error_of(f.bytes());
  CHECK(e.code == decode_errc::unknown_type);
  CHECK_THAT(e.detail, Catch::Contains("launch_rockets"));
}

TEST_CASE("a newer protocol version is unsupported and carries the version") {
  // A newer peer may send types and fields this build has never heard of: only v matters.
  frame_builder f;
  f.envelope("hologram_checkpoint", 1, 2).str("anything").array(0);
  const decode_error e = error_of(f.bytes());
  CHECK(e.code == decode_errc::unsupported_version);
  CHECK(e.version == 2);

  frame_builder zero;
  zero.envelope("heartbeat", 0, 0);
  CHECK(error_of(zero.bytes()).code == decode_errc::unsupported_version);
  CHECK(error_of(zero.bytes()).version == 0);
}

TEST_CASE("decode errors are std::error_codes with readable names") {
  const std::error_code ec = decode_errc::unsupported_version;
  CHECK(ec.category().name() == std::string("snapflow.wire.decode"));
  CHECK(ec.message() == "unsupported_version");
  std::ostringstream os;
  os << decode_error{decode_errc::unsupported_version, "", 3};
  CHECK(os.str() == "decode_error{unsupported_version, v=3}");
}

TEST_CASE("random and mutated frames never crash the decoder") {
  // A small deterministic fuzz: the decoder must return, not crash, on anything (run it under
  // ASan/UBSan to make "not crash" mean "no undefined behaviour" too).
  std::mt19937_64 rng(20240601);
  const std::vector<std::string> seeds = {
      encode(register_worker{"worker-7", 4, "tcp://10.0.0.7:6123", 1, 4242}),
      encode(deploy_task{job, attempt_of(0, 0, 0), "graph", {{{1, 2}, "tcp://h:1"}}, 17,
                         {{0, {{"chk-17/a", 4096, 7}}, 4096}}, "/state"}),
      encode(acknowledge_checkpoint{job, attempt_of(2, 0, 1), 42, {{"a", 1, 2}}, 3, 4, 5, 6, 7}),
  };
  std::size_t ok = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string frame;
    if (round % 2 == 0) {
      frame.resize(rng() % 64);
      for (auto& c : frame) c = static_cast<char>(rng());
    } else {
      frame = seeds[rng() % seeds.size()];
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
        frame[rng() % frame.size()] = static_cast<char>(rng());
    }
    const decode_result r = decode(frame);
    if (r.ok()) {
      ++ok;
      // Whatever decodes must encode again and decode to the same message.
      const decode_result again = decode(encode(r.value()));
      REQUIRE(again.ok());
      CHECK(again.value() == r.value());
    } else {
      CHECK(static_cast<int>(r.error().code) >= 1);
    }
  }
  CHECK(ok < 20000);
}

TEST_CASE("the fast reader agrees with the general reader on every frame it reads") {
  // decode() reads canonical frames with canonical_reader and everything else with the general
  // reader. Whatever the fast reader accepts, the general one must accept as the same message,
  // and decode() must answer exactly as the general reader does: same message, or same fault.
  std::mt19937_64 rng(20261204);
  const std::vector<std::string> seeds = {
      encode(register_worker{"worker-7", 4, "tcp://10.0.0.7:6123", 1, 4242, 99, 1 << 20}),
      encode(register_ack{true, "", 1000, 10000, 1 << 20}),
      encode(heartbeat{"worker-2", 3,
                       std::vector<task_io>{task_io{job, attempt_of(1, 2, 3), 10, 20,
                                                    std::nullopt, 65'536, 1'234}}}),
      encode(heartbeat{"worker-1", -5,
                       std::vector<task_io>{task_io{job, attempt_of(1, 2, 3), 10, 20,
                                                    std::vector<checkpoint_notified>{
                                                        {7, 1'700'000'000'000'000}}}}}),
      encode(deploy_task{job, attempt_of(0, 0, 0), "graph", {{{1, 2}, "tcp://h:1"}}, 17,
                         {{0, {{"chk-17/a", 4096, 7}}, 4096}}, "/state"}),
      encode(trigger_checkpoint{job, attempt_of(3, 7, 2), 12345, 1'700'000'000'000, true,
                                "/savepoints/x", checkpointing_mode::at_least_once, true,
                                "/checkpoints/chk-12345"}),
      encode(trigger_checkpoint{job, attempt_of(3, 7, 2), 12345, 1'700'000'000'000}),
      encode(acknowledge_checkpoint{job, attempt_of(2, 0, 1), 42, {{"a", 1, 2}}, 3, 4, 5, 6, 7}),
      encode(acknowledge_checkpoint{job, attempt_of(2, 0, 1), 42}),
      encode(acknowledge_checkpoint_batch{{acknowledge_checkpoint{job, attempt_of(1, 0, 0), 9},
                                           acknowledge_checkpoint{job, attempt_of(1, 1, 0), 9,
                                                                  {}, 0, -3}}}),
      encode(decline_checkpoint{job, attempt_of(2, 0, 1), 42, "checkpoint_declined", "why"}),
      encode(notify_checkpoint_aborted{job, attempt_of(2, 0, 1), 42, 41}),
      encode(task_state_update{job, attempt_of(2, 0, 1), task_state::failed, "boom"}),
  };
  auto same_answer = [](const decode_result& a, const decode_result& b) {
    if (a.ok() != b.ok()) return false;
    if (a.ok()) return a.value() == b.value();
    return a.error() == b.error();
  };
  std::size_t fast_reads = 0;
  for (const std::string& seed : seeds) {
    INFO("seed " << seed.size() << " bytes");
    REQUIRE(detail::decode_canonical(seed).has_value());
  }
  for (int round = 0; round < 40000; ++round) {
    std::string frame = seeds[rng() % seeds.size()];
    switch (rng() % 4) {
      case 0:  // flip bytes
        for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips)
          frame[rng() % frame.size()] = static_cast<char>(rng());
        break;
      case 1:  // cut short
        frame.resize(rng() % frame.size());
        break;
      case 2:  // a byte more somewhere
        frame.insert(frame.begin() + static_cast<std::ptrdiff_t>(rng() % (frame.size() + 1)),
                     static_cast<char>(rng()));
        break;
      default:  // nudge one byte by one: lengths, counts and small integers off by one
        frame[rng() % frame.size()] += (rng() % 2 == 0) ? 1 : -1;
        break;
    }
    const std::optional<message> fast = detail::decode_canonical(frame);
    const decode_result general = detail::decode_general(frame);
    if (fast) {
      ++fast_reads;
      INFO(describe(general));
      REQUIRE(general.ok());
      CHECK(*fast == general.value());
    }
    CHECK(same_answer(decode(frame), general));
  }
  // The mutations leave a good share of the frames canonical (a changed value, not a changed
  // shape); the fast reader must have read those.
  CHECK(fast_reads > 1000);
}

TEST_CASE("a trigger or an acknowledgement read into a kept struct is the frame's alone") {
  // The endpoints read every trigger (worker) and acknowledgement (coordinator) into one struct
  // they keep; a field the next frame leaves out must read as its zero, not as the last value.
  trigger_checkpoint kept;
  const trigger_checkpoint savepoint{job, attempt_of(3, 7, 2), 5, 1'700'000'000'000, true,
                                     "/savepoints/x", checkpointing_mode::at_least_once, true,
                                     "/savepoints/x"};
  REQUIRE(decode_canonical(encode(savepoint), kept));
  CHECK(kept == savepoint);
  const trigger_checkpoint plain{job, attempt_of(3, 7, 2), 6, 1'700'000'000'001};
  REQUIRE(decode_canonical(encode(plain), kept));
  CHECK(kept == plain);

  acknowledge_checkpoint ack;
  const acknowledge_checkpoint full{job, attempt_of(2, 0, 1), 42, {{"a", 1, 2}}, 3, 4, 5, 6, 7};
  REQUIRE(decode_canonical(encode(full), ack));
  CHECK(ack == full);
  const acknowledge_checkpoint bare{job, attempt_of(2, 0, 1), 43};
  REQUIRE(decode_canonical(encode(bare), ack));
  CHECK(ack == bare);

  // Another message, or the same one as another writer may lay it out, is decode()'s to read.
  CHECK_FALSE(decode_canonical(encode(bare), kept));
  frame_builder reordered;
  reordered.envelope("acknowledge_checkpoint", 3);
  reordered.str("checkpoint_id").uint(9);
  reordered.str("job_id").str(job);
  reordered.str("attempt").attempt(1, 2, 3);
  CHECK_FALSE(decode_canonical(reordered.bytes(), ack));
  const decode_result general = decode(reordered.bytes());
  REQUIRE(general.ok());
  CHECK(std::get<acknowledge_checkpoint>(general.value()) ==
        acknowledge_checkpoint{job, attempt_of(1, 2, 3), 9});
}

TEST_CASE("the heartbeat example in docs/protocol.md is what encode writes") {
  // Keep in step with the example in docs/protocol.md.
  const std::string expected_hex =
      "84a17601a174a9686561727462656174a673656e646572a8776f726b65722d31"
      "ac74696d657374616d705f6d73cf0000018bcfe56800";
  const std::string frame = encode(heartbeat{"worker-1", 1'700'000'000'000});
  std::string hex;
  for (unsigned char c : frame) {
    constexpr char digits[] = "0123456789abcdef";
    hex += digits[c >> 4];
    hex += digits[c & 0x0f];
  }
  CHECK(hex == expected_hex);
}

TEST_CASE("heartbeat carries task record counters; without them it still decodes") {
  heartbeat beat{"w1", 1'700'000'000'000, std::nullopt};
  check_round_trip(beat);
  beat.tasks = std::vector<task_io>{{job, attempt_of(1, 0, 2), 10, 20},
                                    {job, attempt_of(2, 3, 0), 0, 1ULL << 40}};
  check_round_trip(beat);
  acknowledge_checkpoint ack;
  ack.job = job;
  ack.attempt = attempt_of(1, 0, 0);
  ack.checkpoint = 4;
  ack.barrier_received_timestamp_us = 1'700'000'000'123'456;
  check_round_trip(ack);
}

TEST_CASE("a heartbeat whose task counters lack an attempt is refused, not half-read") {
  // A task_io entry without its attempt: the whole frame is a bad frame.
  heartbeat beat{"w1", 1, std::vector<task_io>{{job, attempt_of(1, 0, 0), 1, 1}}};
  const std::string frame = encode(beat);
  const decode_result good = decode(frame);
  REQUIRE(good.ok());
  std::string broken = frame;
  const auto at = broken.find("attempt");
  REQUIRE(at != std::string::npos);
  broken[at] = 'X';  // the key is now "Xttempt": unknown, and the required one is missing
  CHECK_FALSE(decode(broken).ok());
}

TEST_CASE("task counters round-trip with and without the notifications an attempt handled") {
  heartbeat beat{"w1", 1'700'000'000'000, std::nullopt};
  beat.tasks = std::vector<task_io>{
      {job, attempt_of(1, 0, 2), 10, 20,
       std::vector<checkpoint_notified>{{7, 1'700'000'000'123'456}, {8, 1'700'000'000'223'456}}},
      {job, attempt_of(2, 3, 0), 0, 1, std::nullopt}};
  check_round_trip(beat);
  beat.tasks->front().notified = std::vector<checkpoint_notified>{};  // present but empty
  check_round_trip(beat);
}

TEST_CASE("task counters without notifications are the bytes an older worker writes") {
  // What a worker from before the notified field wrote, key by key: the new field must not
  // change it, and such frames must still decode (with no notifications).
  frame_builder f;
  f.envelope("heartbeat", 3);
  f.str("sender").str("w1").str("timestamp_ms").sint(5);
  f.str("tasks").array(1).map(4);
  f.str("job_id").str(job).str("attempt").attempt(1, 0, 2);
  f.str("records_in").uint(10).str("records_out").uint(20);
  const heartbeat beat{"w1", 5, std::vector<task_io>{{job, attempt_of(1, 0, 2), 10, 20, {}}}};
  CHECK(encode(beat) == f.bytes());
  const decode_result r = decode(f.bytes());
  INFO(describe(r));
  REQUIRE(r.ok());
  CHECK_FALSE(std::get<heartbeat>(r.value()).tasks->front().notified);
}

TEST_CASE("a notification without its timestamp refuses the heartbeat") {
  frame_builder f;
  f.envelope("heartbeat", 3);
  f.str("sender").str("w1").str("timestamp_ms").sint(5);
  f.str("tasks").array(1).map(3);
  f.str("job_id").str(job).str("attempt").attempt(1, 0, 2);
  f.str("notified").array(1).map(1).str("checkpoint_id").uint(3);
  const decode_error e = error_of(f.bytes());
  CHECK(e.code == decode_errc::missing_field);
  CHECK(e.detail.find("tasks[0].notified[0].timestamp_us") != std::string::npos);
}
