// One stream_task at a time on its own thread, wired to local channels the test reads and
// writes: barrier injection at a source, alignment at a two-input task, restore failures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/stream_task.hpp"
#include "engine/runtime/two_phase_commit_file_sink.hpp"
#include "engine/state/int64_state_value.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

struct task_fixture {
  temp_folder dir;
  std::shared_ptr<recording_responder> responder = std::make_shared<recording_responder>();
  std::shared_ptr<recording_listener> listener = std::make_shared<recording_listener>();
  std::shared_ptr<snapshot_writer> writer = std::make_shared<snapshot_writer>(1);

  stream_task_config config(job_vertex v, operator_role role, std::uint32_t index = 0) {
    stream_task_config c;
    c.job = "job";
    c.attempt = {{v.id, index}, 0};
    c.vertex = std::move(v);
    c.role = role;
    c.responder = responder;
    c.listener = listener;
    c.writer = writer;
    return c;
  }

  checkpoint_options options(checkpoint_id id) {
    checkpoint_options o;
    o.target_location = (dir.path() / ("chk-" + std::to_string(id))).string();
    return o;
  }
};

// Takes elements from `c` until `done` says stop (bounded by rounds; waits on the wakeup).
template <typename Done>
std::vector<stream_element> take_until(local_channel& c, task_wakeup& wakeup, Done done) {
  std::vector<stream_element> got;
  for (int rounds = 0; rounds < 100'000 && !done(got); ++rounds) {
    const auto seen = wakeup.generation();
    auto b = c.try_take();
    if (!b) {
      wakeup.wait(seen, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      continue;
    }
    for (auto& e : *b) got.push_back(std::move(e));
  }
  return got;
}

// An ack names its state files relative to the checkpoint's folder, where the coordinator
// resolves them.
state_handle in_folder(state_handle h, const std::string& folder) {
  if (!h.is_inline()) h.path = (std::filesystem::path(folder) / h.path).string();
  return h;
}

bool has_end(const std::vector<stream_element>& got) {
  return !got.empty() && std::holds_alternative<end_of_input>(got.back());
}

}  // namespace

TEST_CASE("stream task: a source injects the barrier between records and acks the offset there") {
  task_fixture f;
  auto out = std::make_shared<local_channel>(2);  // small: the source is soon backpressured
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto c = f.config(make_vertex("sequence_source", {{"count", "5000"}, {"keys", "4"}}),
                    operator_role::source);
  c.outputs.push_back({partitioning::forward, 128, {out}});
  c.batch_size = 10;
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::running));
  task.trigger_checkpoint(1, 111, f.options(1));

  auto got = take_until(*out, *wakeup, [](const auto& g) {
    return !g.empty() && std::holds_alternative<checkpoint_barrier>(g.back());
  });
  REQUIRE_FALSE(got.empty());
  const auto barrier = std::get<checkpoint_barrier>(got.back());
  CHECK(barrier.id == 1);
  CHECK(barrier.timestamp_us == 111);
  const auto before = static_cast<std::int64_t>(got.size() - 1);
  for (std::int64_t i = 0; i < before; ++i) CHECK(std::get<record>(got[i]).seq == i);
  REQUIRE(f.responder->wait_for(1));
  const auto ack = f.responder->acks().at(0);
  CHECK(ack.id == 1);
  CHECK(ack.job == "job");
  REQUIRE(ack.state.handles.size() == 1);
  auto snapshot = state_file::read(in_folder(ack.state.handles[0], f.options(1).target_location));
  REQUIRE(snapshot);
  // The position in the snapshot is exactly the first record after the barrier: the source
  // (parallelism 1, every split its own) emits ascending, so it is the smallest split position.
  REQUIRE(snapshot->operator_state.size() > 1);
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 1; i < snapshot->operator_state.size(); ++i)
    next = std::min<std::int64_t>(next, std::stoll(snapshot->operator_state[i].bytes));
  CHECK(next == before);
  CHECK(ack.state.state_size == ack.state.handles[0].size);

  // The rest of the records, then the source waits (final checkpoint) until told to finish.
  auto rest = take_until(*out, *wakeup, [&](const auto& g) {
    return static_cast<std::int64_t>(g.size()) >= 5000 - before;
  });
  CHECK(std::get<record>(rest.at(0)).seq == before);
  REQUIRE(f.listener->wait_for_exhausted());
  CHECK(f.listener->exhausted() == 1);
  task.trigger_checkpoint(2, 222, f.options(2));
  task.notify_checkpoint_complete(2, 222);
  task.finish();
  auto tail = take_until(*out, *wakeup, has_end);
  REQUIRE(tail.size() == 2);
  CHECK(std::get<checkpoint_barrier>(tail[0]).id == 2);
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
  CHECK(f.listener->states() == std::vector<execution_state>{execution_state::initializing,
                                                             execution_state::running,
                                                             execution_state::finished});
  // It handled the notification before it finished: the time is kept for the worker's next
  // heartbeat, and handed out once.
  const auto notified = task.take_notified();
  REQUIRE(notified.size() == 1);
  CHECK(notified[0].id == 2);
  CHECK(notified[0].timestamp_us > 0);
  CHECK(task.take_notified().empty());
}

// Holds its task thread inside process() until released, so a test can tell what happens on
// the task thread from what happens on the caller's.
struct held_operator_gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool inside = false;
  bool released = false;
  std::vector<checkpoint_id> completions;  // what a listening operator was told

  void enter_and_wait() {
    std::unique_lock lock(mutex);
    inside = true;
    changed.notify_all();
    changed.wait_for(lock, std::chrono::seconds(10), [&] { return released; });
  }
  bool wait_inside() {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [&] { return inside; });
  }
  void release() {
    std::lock_guard lock(mutex);
    released = true;
    changed.notify_all();
  }
};

class held_map : public stream_operator {
 public:
  explicit held_map(std::shared_ptr<held_operator_gate> gate) : gate_(std::move(gate)) {}
  result<void> process(const record& r, record_output& out) override {
    gate_->enter_and_wait();
    out.emit(r);
    return success();
  }

 protected:
  std::shared_ptr<held_operator_gate> gate_;
};

class held_listening_map final : public held_map, public checkpoint_completion_listener {
 public:
  using held_map::held_map;
  result<void> notify_checkpoint_complete(checkpoint_id id) override {
    std::lock_guard lock(gate_->mutex);
    gate_->completions.push_back(id);
    return success();
  }
};

std::shared_ptr<operator_factory> held_factory(std::shared_ptr<held_operator_gate> gate) {
  auto f = std::make_shared<operator_factory>();
  f->add("held_map", [gate](const job_vertex&) -> result<std::unique_ptr<stream_operator>> {
    return std::unique_ptr<stream_operator>(std::make_unique<held_map>(gate));
  });
  f->add("held_listening_map",
         [gate](const job_vertex&) -> result<std::unique_ptr<stream_operator>> {
           return std::unique_ptr<stream_operator>(std::make_unique<held_listening_map>(gate));
         });
  return f;
}

std::vector<checkpoint_id> ids_of(const std::vector<checkpoint_notified>& notified) {
  std::vector<checkpoint_id> ids;
  for (const auto& n : notified) ids.push_back(n.id);
  return ids;
}

TEST_CASE("stream task: only a completion listener's thread handles a completed checkpoint") {
  const bool listening = GENERATE(false, true);
  CAPTURE(listening);
  task_fixture f;
  auto gate = std::make_shared<held_operator_gate>();
  auto in = std::make_shared<local_channel>(8);
  auto out = std::make_shared<local_channel>(8);
  auto c = f.config(make_vertex(listening ? "held_listening_map" : "held_map"),
                    operator_role::transform);
  c.operators = held_factory(gate);
  c.inputs = {in};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  stream_task task(std::move(c));
  task.start();
  REQUIRE(in->send({record{0, 0, 0, {}}}));
  REQUIRE(gate->wait_inside());  // the task thread is busy in process() from here on

  task.notify_checkpoint_complete(3, 0);
  if (listening) {
    // Its thread takes the notification in turn, after the record it is busy with.
    CHECK(task.take_notified().empty());
  } else {
    // Nothing to do on the task thread: notified at once, while that thread is still busy.
    CHECK(ids_of(task.take_notified()) == std::vector<checkpoint_id>{3});
  }

  gate->release();
  REQUIRE(in->send({end_of_input{}}));
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
  if (listening) {
    CHECK(ids_of(task.take_notified()) == std::vector<checkpoint_id>{3});
    std::lock_guard lock(gate->mutex);
    CHECK(gate->completions == std::vector<checkpoint_id>{3});
  } else {
    CHECK(task.take_notified().empty());
  }
}

TEST_CASE("stream task: two inputs are aligned before the barrier goes on") {
  task_fixture f;
  auto in0 = std::make_shared<local_channel>(8);
  auto in1 = std::make_shared<local_channel>(8);
  auto out = std::make_shared<local_channel>(8);
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {in0, in1};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  stream_task task(std::move(c));
  task.start();
  checkpoint_barrier b{1, 10, f.options(1)};
  REQUIRE(in0->send({record{0, 0, 0, {}}, b, record{0, 2, 0, {}}}));
  REQUIRE(in1->send({record{0, 1, 0, {}}, record{0, 3, 0, {}}}));
  // Records 0, 1, 3 reach the output; 2 waits behind input 0's barrier.
  auto first = take_until(*out, *wakeup, [](const auto& g) { return g.size() >= 3; });
  REQUIRE(first.size() == 3);
  for (const auto& e : first) CHECK(std::get<record>(e).seq != 2);
  CHECK(f.responder->acks().empty());
  REQUIRE(in1->send({b, end_of_input{}}));
  REQUIRE(in0->send({end_of_input{}}));
  auto rest = take_until(*out, *wakeup, has_end);
  REQUIRE(rest.size() == 3);
  CHECK(std::get<checkpoint_barrier>(rest[0]).id == 1);
  CHECK(std::get<record>(rest[1]).seq == 2);
  REQUIRE(f.responder->wait_for(1));
  const auto ack = f.responder->acks().at(0);
  CHECK(ack.state.handles.empty());  // a stateless operator writes no file
  CHECK(ack.metrics.alignment_duration_us >= 0);
  // Record 2 waited behind input 0's barrier; nothing was read past a barrier.
  CHECK(ack.metrics.records_held_during_alignment == 1);
  CHECK(ack.metrics.records_after_barrier == 0);
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

TEST_CASE("stream task: a small state goes inline after the operator's asynchronous part ran") {
  // The exactly-once sink fsyncs its pre-committed file off the task thread; its own state (the
  // list of pre-committed files) is a few bytes: inline, unless inlining is off.
  const std::size_t inline_max = GENERATE(std::size_t{1024}, std::size_t{0});
  task_fixture f;
  const auto out_folder = f.dir.path() / "out";
  auto in = std::make_shared<local_channel>(8);
  auto c = f.config(make_vertex("two_phase_commit_file_sink", {{"path", out_folder.string()}}),
                    operator_role::sink);
  c.inputs = {in};
  c.inline_state_max_bytes = inline_max;
  stream_task task(std::move(c));
  task.start();
  checkpoint_barrier b{1, 10, f.options(1)};
  std::filesystem::create_directories(b.options.target_location);
  REQUIRE(in->send({record{1, 0, 5, {}}, record{1, 1, 6, {}}, b}));
  REQUIRE(f.responder->wait_for(1));
  const auto ack = f.responder->acks().at(0);
  REQUIRE(ack.state.handles.size() == 1);
  const auto& handle = ack.state.handles[0];
  std::size_t state_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(b.options.target_location))
    if (e.is_regular_file()) ++state_files;
  if (inline_max > 0) {
    CHECK(handle.is_inline());
    CHECK(state_files == 0);
  } else {
    CHECK_FALSE(handle.is_inline());
    CHECK(state_files == 1);
  }
  CHECK(ack.state.state_size == handle.size);
  // Either way the state reads back as the sink's list with its one pre-committed file.
  auto snapshot = state_file::read(in_folder(handle, b.options.target_location));
  REQUIRE(snapshot);
  REQUIRE(snapshot->operator_state.size() == 1);
  auto txns = two_phase_commit_file_sink::decode_transactions(snapshot->operator_state[0].bytes);
  REQUIRE(txns);
  REQUIRE(txns->size() == 1);
  CHECK((*txns)[0].id == 1);
  REQUIRE(in->send({end_of_input{}}));
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

TEST_CASE("stream task: at-least-once never blocks an input that delivered its barrier") {
  task_fixture f;
  auto in0 = std::make_shared<local_channel>(8);
  auto in1 = std::make_shared<local_channel>(8);
  auto out = std::make_shared<local_channel>(8);
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {in0, in1};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  c.mode = checkpointing_mode::at_least_once;
  stream_task task(std::move(c));
  task.start();
  checkpoint_barrier b{1, 10, f.options(1)};
  REQUIRE(in0->send({record{0, 0, 0, {}}, b, record{0, 2, 0, {}}}));
  // Record 2 came after input 0's barrier and still goes through before input 1's barrier.
  auto first = take_until(*out, *wakeup, [](const auto& g) { return g.size() >= 2; });
  REQUIRE(first.size() == 2);
  CHECK(std::get<record>(first[1]).seq == 2);
  CHECK(f.responder->acks().empty());
  REQUIRE(in1->send({b, end_of_input{}}));
  REQUIRE(in0->send({end_of_input{}}));
  auto rest = take_until(*out, *wakeup, has_end);
  REQUIRE(rest.size() == 2);
  CHECK(std::get<checkpoint_barrier>(rest[0]).id == 1);
  REQUIRE(f.responder->wait_for(1));
  // Record 2 overtook input 0's barrier into the snapshot; nothing was held back.
  CHECK(f.responder->acks().at(0).metrics.records_after_barrier == 1);
  CHECK(f.responder->acks().at(0).metrics.records_held_during_alignment == 0);
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

TEST_CASE("stream task: a newer barrier while aligning declines the older checkpoint") {
  task_fixture f;
  auto in0 = std::make_shared<local_channel>(8);
  auto in1 = std::make_shared<local_channel>(8);
  auto out = std::make_shared<local_channel>(8);
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {in0, in1};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  stream_task task(std::move(c));
  task.start();
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  // Record 5 reaches the output only after the batch that carries it was processed up to the
  // barrier behind it: then input 0 is blocked on checkpoint 1 for sure.
  REQUIRE(in0->send({record{0, 5, 0, {}}, checkpoint_barrier{1, 1, f.options(1)}}));
  auto first = take_until(*out, *wakeup, [](const auto& g) { return !g.empty(); });
  REQUIRE(first.size() == 1);
  REQUIRE(in1->send({checkpoint_barrier{2, 2, f.options(2)}}));
  REQUIRE(f.responder->wait_for(0, 1));
  const auto d = f.responder->declines().at(0);
  CHECK(d.id == 1);
  CHECK(d.reason == checkpoint_failure_reason::checkpoint_declined_subsumed);
  REQUIRE(in0->send({checkpoint_barrier{2, 2, f.options(2)}}));
  REQUIRE(f.responder->wait_for(1, 1));
  CHECK(f.responder->acks().at(0).id == 2);
  task.cancel();
  task.join();
  CHECK(f.listener->wait_for_state(execution_state::canceled));
}

TEST_CASE("stream task: restoring from a corrupt state file fails the task with a clear error") {
  task_fixture f;
  // A real snapshot of a keyed_sum subtask, then damaged on disk.
  subtask_snapshot s;
  s.operator_uid = "keyed_sum";
  s.subtask_index = 0;
  s.parallelism = 1;
  s.checkpoint = 4;
  s.keyed.max_parallelism = 128;
  s.keyed.key_groups[3].values["sum"][7] = encode_int64_state(70);
  const auto file = f.dir.path() / "chk-4" / "sum.state";
  auto handle = state_file::write(file, s);
  REQUIRE(handle);
  {
    std::fstream damaged(file, std::ios::in | std::ios::out | std::ios::binary);
    damaged.seekp(20);
    damaged.put('X');
  }
  auto in = std::make_shared<local_channel>(4);
  auto c = f.config(make_vertex("keyed_sum"), operator_role::keyed);
  c.inputs = {in};
  c.restore_checkpoint = 4;
  c.restore_states[0].handles.push_back(*handle);
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::failed));
  task.join();
  CHECK_THAT(f.listener->failure(), Catch::Contains("checkpoint 4"));
  CHECK_THAT(f.listener->failure(), Catch::Contains("checksum"));
  CHECK_THAT(f.listener->failure(), Catch::Contains(file.string()));
  const auto states = f.listener->states();
  CHECK(std::find(states.begin(), states.end(), execution_state::running) == states.end());
}

TEST_CASE("stream task: an operator whose state belongs to another uid is refused") {
  task_fixture f;
  subtask_snapshot s;
  s.operator_uid = "someone-else";
  s.parallelism = 1;
  s.checkpoint = 2;
  auto handle = state_file::write(f.dir.path() / "x.state", s);
  REQUIRE(handle);
  auto in = std::make_shared<local_channel>(4);
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {in};
  c.restore_checkpoint = 2;
  c.restore_states[0].handles.push_back(*handle);
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::failed));
  task.join();
  CHECK_THAT(f.listener->failure(), Catch::Contains("someone-else"));
}

TEST_CASE("stream task: a keyed subtask missing an overlapping old state is refused") {
  // Rescaled 4 -> 2 at max parallelism 128: new subtask 0 owns key groups 0..63, which old
  // subtasks 0 (0..31) and 1 (32..63) held. It is sent only old 0's state: keys would be lost.
  task_fixture f;
  subtask_snapshot s;
  s.operator_uid = "keyed_sum";
  s.subtask_index = 0;
  s.parallelism = 4;
  s.checkpoint = 3;
  s.keyed.max_parallelism = 128;
  s.keyed.key_groups[5].values["sum"][7] = encode_int64_state(70);
  auto handle = state_file::write(f.dir.path() / "chk-3" / "sum-0.state", s);
  REQUIRE(handle);
  auto in = std::make_shared<local_channel>(4);
  auto c = f.config(make_vertex("keyed_sum", {}, /*parallelism=*/2), operator_role::keyed);
  c.inputs = {in};
  c.restore_checkpoint = 3;
  c.restore_states[0].handles.push_back(*handle);
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::failed));
  task.join();
  CHECK_THAT(f.listener->failure(), Catch::Contains("checkpoint 3"));
  CHECK_THAT(f.listener->failure(), Catch::Contains("old subtask 1 of 4"));
}

TEST_CASE("stream task: keyed state cut at another max parallelism is refused before any file "
          "is read") {
  task_fixture f;
  auto in = std::make_shared<local_channel>(4);
  auto c = f.config(make_vertex("keyed_sum", {}, 1, /*max_parallelism=*/128), operator_role::keyed);
  c.inputs = {in};
  c.restore_checkpoint = 5;
  c.restore_states[0].handles.push_back(state_handle{"never-read.state", 10, 1, std::nullopt});
  c.restore_states[0].keyed = keyed_state_scope{64, 0, 63};
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::failed));
  task.join();
  CHECK_THAT(f.listener->failure(), Catch::Contains("checkpoint 5") &&
                                        Catch::Contains("max parallelism 64") &&
                                        Catch::Contains("declares 128"));
  CHECK_THAT(f.listener->failure(), !Catch::Contains("never-read"));
}

TEST_CASE("stream task: a keyed subtask's acknowledgement names its max parallelism and key "
          "groups; a non-keyed one names none") {
  task_fixture f;
  auto in = std::make_shared<local_channel>(4);
  auto c = f.config(make_vertex("keyed_sum", {}, 1, /*max_parallelism=*/96), operator_role::keyed);
  c.inputs = {in};
  stream_task task(std::move(c));
  task.start();
  REQUIRE(in->send({record{3, 1, 30, {}}, checkpoint_barrier{1, 1, f.options(1)}}));
  REQUIRE(f.responder->wait_for(1));
  CHECK(f.responder->acks().at(0).state.keyed == keyed_state_scope{96, 0, 95});
  task.cancel();
  task.join();

  task_fixture g;
  auto in2 = std::make_shared<local_channel>(4);
  auto plain = g.config(make_vertex("map_identity"), operator_role::transform);
  plain.inputs = {in2};
  stream_task map(std::move(plain));
  map.start();
  REQUIRE(in2->send({checkpoint_barrier{1, 1, g.options(1)}}));
  REQUIRE(g.responder->wait_for(1));
  CHECK_FALSE(g.responder->acks().at(0).state.keyed.has_value());
  map.cancel();
  map.join();
}

namespace {

std::int64_t snapshot_offset(task_fixture& f, const checkpoint_ack& ack) {
  REQUIRE(ack.state.handles.size() == 1);
  auto snapshot = state_file::read(in_folder(ack.state.handles[0], f.options(ack.id).target_location));
  REQUIRE(snapshot);
  // A sequence_source at parallelism 1 owns every split and emits in ascending order: the next
  // number it emits is the smallest split position.
  REQUIRE(snapshot->operator_state.size() > 1);
  CHECK(snapshot->operator_state[0].name == "splits");
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 1; i < snapshot->operator_state.size(); ++i)
    next = std::min<std::int64_t>(next, std::stoll(snapshot->operator_state[i].bytes));
  return next;
}

bool is_barrier(const stream_element& e, checkpoint_id id) {
  const auto* b = std::get_if<checkpoint_barrier>(&e);
  return b != nullptr && b->id == id;
}

// A source that emits nothing and waits: whether its snapshot may run elsewhere is the test's.
class idle_source final : public source_operator {
 public:
  explicit idle_source(bool on_any_thread) : on_any_thread_(on_any_thread) {}
  result<emit_result> emit(record_output&, std::size_t) override {
    return emit_result{emit_result::status::wait,
                       std::chrono::steady_clock::now() + std::chrono::seconds(10)};
  }
  bool snapshot_on_any_thread() const override { return on_any_thread_; }

 private:
  bool on_any_thread_;
};

// Kind `name` builds an Op(false), `name`_any_thread an Op(true): the same operator with and
// without leave to take its snapshot on another thread.
template <typename Op>
std::shared_ptr<operator_factory> with_and_without_any_thread(const std::string& name) {
  auto f = std::make_shared<operator_factory>();
  for (bool any : {false, true})
    f->add(any ? name + "_any_thread" : name,
           [any](const job_vertex&) -> result<std::unique_ptr<stream_operator>> {
             return std::unique_ptr<stream_operator>(std::make_unique<Op>(any));
           });
  return f;
}

std::shared_ptr<operator_factory> idle_source_factory() {
  return with_and_without_any_thread<idle_source>("idle_source");
}

// A started source task writing into one local channel the test reads.
struct running_source {
  std::shared_ptr<local_channel> out;
  std::shared_ptr<task_wakeup> wakeup = std::make_shared<task_wakeup>();
  std::unique_ptr<stream_task> task;

  running_source(task_fixture& f, job_vertex vertex, std::size_t capacity,
                 std::shared_ptr<operator_factory> operators = nullptr)
      : out(std::make_shared<local_channel>(capacity)) {
    out->set_wakeup(wakeup);
    auto c = f.config(std::move(vertex), operator_role::source);
    c.operators = std::move(operators);
    c.outputs.push_back({partitioning::forward, 128, {out}});
    task = std::make_unique<stream_task>(std::move(c));
    task->start();
    REQUIRE(f.listener->wait_for_state(execution_state::running));
  }
};

}  // namespace

TEST_CASE("stream task: an idle source takes a checkpoint on the trigger's thread, the barrier "
          "exactly after the records its snapshot counts") {
  task_fixture f;
  // 200 records a second: idle most of the time, and records on both sides of every barrier.
  running_source source(
      f, make_vertex("sequence_source", {{"count", "100000"}, {"keys", "2"}, {"rate", "200"}}),
      64);
  auto& task = *source.task;
  auto& out = source.out;
  auto& wakeup = source.wakeup;

  std::vector<stream_element> got;
  const checkpoint_id checkpoints = 10;
  for (checkpoint_id id = 1; id <= checkpoints; ++id) {
    // Idle now: a trigger right after the previous ack could find it still busy after the
    // snapshot. (Its next record may still wake it first: then its own thread takes the
    // trigger, which the checks below cover as well.)
    CHECK(task.idle_after_turn());
    task.trigger_checkpoint(id, id, f.options(id));
    REQUIRE(f.responder->wait_for(static_cast<std::size_t>(id)));
    auto more = take_until(*out, *wakeup,
                           [id](const auto& g) { return !g.empty() && is_barrier(g.back(), id); });
    got.insert(got.end(), more.begin(), more.end());
  }
  // The source was idle at almost every trigger; a busy one leaves it to its own thread.
  CHECK(task.triggers_taken_on_caller() >= 1);

  const auto acks = f.responder->acks();
  REQUIRE(acks.size() == checkpoints);
  std::int64_t records = 0;
  checkpoint_id next_barrier = 1;
  for (const auto& e : got) {
    if (const auto* r = std::get_if<record>(&e)) {
      CHECK(r->seq == records);
      ++records;
      continue;
    }
    REQUIRE(is_barrier(e, next_barrier));
    const auto& ack = acks.at(static_cast<std::size_t>(next_barrier - 1));
    CHECK(ack.id == next_barrier);
    // The snapshot's offset is the first record after its barrier, whichever thread took it.
    CHECK(snapshot_offset(f, ack) == records);
    ++next_barrier;
  }
  CHECK(next_barrier == checkpoints + 1);
  CHECK(f.responder->declines().empty());
}

TEST_CASE("stream task: a trigger that would have to wait for room in an output goes to the "
          "source's own thread") {
  task_fixture f;
  // One record at once, the next a second later: idle, with its one-batch output full.
  running_source source(
      f, make_vertex("sequence_source", {{"count", "100"}, {"keys", "2"}, {"rate", "1"}}), 1);
  auto& task = *source.task;
  auto& out = source.out;
  auto& wakeup = source.wakeup;
  for (int rounds = 0; rounds < 10'000 && out->queued_batches() == 0; ++rounds) {
    const auto seen = wakeup->generation();
    if (out->queued_batches() == 0)
      wakeup->wait(seen, std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
  }
  REQUIRE(out->queued_batches() == 1);

  // Sending the barrier from here would block this thread until the batch is taken.
  task.trigger_checkpoint(1, 1, f.options(1));
  CHECK(task.triggers_taken_on_caller() == 0);
  auto got = take_until(*out, *wakeup,
                        [](const auto& g) { return !g.empty() && is_barrier(g.back(), 1); });
  REQUIRE(f.responder->wait_for(1));
  CHECK(snapshot_offset(f, f.responder->acks().at(0)) ==
        static_cast<std::int64_t>(got.size()) - 1);
  CHECK(task.triggers_taken_on_caller() == 0);
}

TEST_CASE("stream task: a source that does not allow it never takes a checkpoint on the "
          "trigger's thread") {
  const bool allowed = GENERATE(false, true);
  CAPTURE(allowed);
  task_fixture f;
  running_source source(f, make_vertex(allowed ? "idle_source_any_thread" : "idle_source"), 64,
                        idle_source_factory());
  auto& task = *source.task;
  for (checkpoint_id id = 1; id <= 5; ++id) {
    REQUIRE(task.idle_after_turn());  // waiting 10 s for records that never come
    task.trigger_checkpoint(id, id, f.options(id));
    REQUIRE(f.responder->wait_for(static_cast<std::size_t>(id)));
  }
  // Idle at every trigger, with room for the barrier: all on the caller's thread, or none.
  CHECK(task.triggers_taken_on_caller() == (allowed ? 5u : 0u));
}

namespace {

// Passes records on; whether its (empty) snapshot may be taken on any thread is up to the test.
class pass_through final : public stream_operator {
 public:
  explicit pass_through(bool any_thread) : any_thread_(any_thread) {}
  result<void> process(const record& r, record_output& out) override {
    out.emit(r);
    return success();
  }
  bool snapshot_on_any_thread() const override { return any_thread_; }

 private:
  bool any_thread_;
};

std::shared_ptr<operator_factory> pass_through_factory() {
  return with_and_without_any_thread<pass_through>("pass");
}

// A started two-input pass_through task writing into one local channel the test reads.
struct running_two_inputs {
  std::shared_ptr<local_channel> in0 = std::make_shared<local_channel>(8);
  std::shared_ptr<local_channel> in1 = std::make_shared<local_channel>(8);
  std::shared_ptr<local_channel> out = std::make_shared<local_channel>(8);
  std::shared_ptr<task_wakeup> wakeup = std::make_shared<task_wakeup>();
  std::unique_ptr<stream_task> task;

  running_two_inputs(task_fixture& f, bool any_thread, checkpointing_mode mode,
                     std::chrono::milliseconds idle_recheck = std::chrono::seconds(1)) {
    out->set_wakeup(wakeup);
    auto c = f.config(make_vertex(any_thread ? "pass_any_thread" : "pass"),
                      operator_role::transform);
    c.operators = pass_through_factory();
    c.inputs = {in0, in1};
    c.outputs.push_back({partitioning::forward, 128, {out}});
    c.mode = mode;
    c.idle_recheck = idle_recheck;
    task = std::make_unique<stream_task>(std::move(c));
    task->start();
    REQUIRE(f.listener->wait_for_state(execution_state::running));
  }
};

}  // namespace

TEST_CASE("stream task: an idle task aligns, forwards, snapshots and acknowledges a barrier on "
          "the thread that delivers it") {
  const bool allowed = GENERATE(false, true);
  CAPTURE(allowed);
  task_fixture f;
  running_two_inputs t(f, allowed, checkpointing_mode::exactly_once);
  auto& task = *t.task;
  for (checkpoint_id id = 1; id <= 3; ++id) {
    REQUIRE(task.idle_after_turn());
    REQUIRE(t.in0->send({checkpoint_barrier{id, id, f.options(id)}}));
    REQUIRE(task.idle_after_turn());
    REQUIRE(t.in1->send({checkpoint_barrier{id, id, f.options(id)}}));
    if (allowed) {
      // Done before send() returned, here: no wake-up of the task thread was needed.
      CHECK(f.responder->acks().size() == static_cast<std::size_t>(id));
      CHECK(t.out->queued_batches() == 1);
    }
    REQUIRE(f.responder->wait_for(static_cast<std::size_t>(id)));
    auto forwarded = take_until(*t.out, *t.wakeup, [](const auto& g) { return !g.empty(); });
    REQUIRE(forwarded.size() == 1);
    CHECK(is_barrier(forwarded[0], id));
    // Records between checkpoints go through the task thread.
    REQUIRE(t.in0->send({record{0, 2 * id, 0, {}}}));
    REQUIRE(t.in1->send({record{0, 2 * id + 1, 0, {}}}));
    auto records = take_until(*t.out, *t.wakeup, [](const auto& g) { return g.size() >= 2; });
    CHECK(records.size() == 2);
  }
  CHECK(task.barriers_taken_on_caller() == (allowed ? 6u : 0u));
  for (const auto& ack : f.responder->acks()) CHECK(ack.state.handles.empty());
  CHECK(f.responder->declines().empty());
  REQUIRE(t.in0->send({end_of_input{}}));
  REQUIRE(t.in1->send({end_of_input{}}));
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

TEST_CASE("stream task: records held by an alignment that ends on the delivering thread go on "
          "without waiting for another wake-up") {
  task_fixture f;
  // An idle task looks again by itself only after an hour: a missed wake-up shows below.
  running_two_inputs t(f, true, checkpointing_mode::exactly_once, std::chrono::hours(1));
  auto& task = *t.task;
  REQUIRE(task.idle_after_turn());
  REQUIRE(t.in0->send({checkpoint_barrier{1, 1, f.options(1)}}));  // input 0 now blocked
  REQUIRE(task.barriers_taken_on_caller() == 1);
  // Its task thread wakes for the record, finds input 0 blocked, takes the record into the
  // input's cursor only to count it as held, and waits again.
  REQUIRE(t.in0->send({record{0, 5, 0, {}}}));
  for (int i = 0; i < 10'000 && t.in0->queued_batches() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a state, bounded
  REQUIRE(t.in0->queued_batches() == 0);
  REQUIRE(task.idle_after_turn());
  // The alignment ends here, on this thread; record 5 must go on now, not in an hour.
  REQUIRE(t.in1->send({checkpoint_barrier{1, 1, f.options(1)}}));
  REQUIRE(task.barriers_taken_on_caller() == 2);
  REQUIRE(f.responder->wait_for(1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto got = take_until(*t.out, *t.wakeup, [&](const auto& g) {
    return g.size() >= 2 || std::chrono::steady_clock::now() > deadline;
  });
  REQUIRE(got.size() == 2);
  CHECK(is_barrier(got[0], 1));
  CHECK(std::get<record>(got[1]).seq == 5);
  task.cancel();
  task.join();
}

TEST_CASE("stream task: a barrier behind records keeps its place, whichever thread takes it") {
  const auto mode = GENERATE(checkpointing_mode::exactly_once, checkpointing_mode::at_least_once);
  CAPTURE(static_cast<int>(mode));
  task_fixture f;
  running_two_inputs t(f, true, mode);
  auto& task = *t.task;
  for (checkpoint_id id = 1; id <= 20; ++id) {
    // Records queued ahead of the barrier on both inputs, the task thread maybe still busy
    // with them when the barriers arrive: the barriers must come out after them.
    REQUIRE(t.in0->send({record{0, 10 * id, 0, {}}}));
    REQUIRE(t.in0->send({checkpoint_barrier{id, id, f.options(id)}}));
    REQUIRE(t.in1->send({record{0, 10 * id + 1, 0, {}}}));
    REQUIRE(t.in1->send({checkpoint_barrier{id, id, f.options(id)}}));
    REQUIRE(t.in0->send({record{0, 10 * id + 2, 0, {}}}));
    auto got = take_until(*t.out, *t.wakeup, [](const auto& g) { return g.size() >= 4; });
    REQUIRE(got.size() == 4);
    // Where each came out: records 0 and 1 were ahead of the barrier on their inputs. Record 2
    // was behind input 0's barrier: exactly once it waits for the alignment, at least once it
    // may overtake.
    std::map<std::int64_t, std::size_t> at;
    std::optional<std::size_t> barrier_at;
    for (std::size_t k = 0; k < got.size(); ++k) {
      if (is_barrier(got[k], id)) barrier_at = k;
      else at[std::get<record>(got[k]).seq] = k;
    }
    REQUIRE(barrier_at);
    REQUIRE(at.size() == 3);
    CHECK(at.at(10 * id) < *barrier_at);
    CHECK(at.at(10 * id + 1) < *barrier_at);
    if (mode == checkpointing_mode::exactly_once) CHECK(at.at(10 * id + 2) > *barrier_at);
    REQUIRE(f.responder->wait_for(static_cast<std::size_t>(id)));
  }
  CHECK(f.responder->declines().empty());
  task.cancel();
  task.join();
}

TEST_CASE("task mailbox: only a sole trigger is handed out for a trigger's thread to run") {
  task_mailbox mailbox(std::make_shared<task_wakeup>());
  CHECK_FALSE(mailbox.take_sole_trigger());  // empty

  REQUIRE(mailbox.post_without_wakeup(trigger_message{1, 0, {}}));
  auto one = mailbox.take_sole_trigger();
  REQUIRE(one);
  CHECK(one->id == 1);
  CHECK(mailbox.empty());

  // Two triggers (an earlier one left to the task thread): neither, both stay in order. The
  // second barrier might not fit where the first did, and the caller must never wait.
  REQUIRE(mailbox.post_without_wakeup(trigger_message{2, 0, {}}));
  REQUIRE(mailbox.post_without_wakeup(trigger_message{3, 0, {}}));
  CHECK_FALSE(mailbox.take_sole_trigger());
  auto both = mailbox.take_all();
  REQUIRE(both.size() == 2);
  CHECK(std::get<trigger_message>(both[0]).id == 2);
  CHECK(std::get<trigger_message>(both[1]).id == 3);

  // Anything else alone is the task thread's too.
  REQUIRE(mailbox.post_without_wakeup(abort_message{4, 3}));
  CHECK_FALSE(mailbox.take_sole_trigger());
  CHECK(mailbox.take_all().size() == 1);
}

namespace {

// An input whose batches went missing on the way (a network channel that saw a sequence gap).
class lost_batches_input final : public input_channel {
 public:
  std::optional<element_batch> try_take() override { return std::nullopt; }
  void set_wakeup(std::shared_ptr<task_wakeup>) override {}
  void cancel() override {}
  std::optional<std::string> broken() const override {
    return std::string("batch 9 arrived where 7 was due");
  }
};

}  // namespace

TEST_CASE("stream task: an input that lost batches fails the task with the reason") {
  task_fixture f;
  auto out = std::make_shared<local_channel>(8);
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {std::make_shared<lost_batches_input>()};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::failed));
  task.join();
  CHECK_THAT(f.listener->failure(), Catch::Contains("batch 9 arrived where 7 was due"));
}

namespace {

// An output whose consumer's worker is gone (a network channel whose connection closed).
class lost_consumer_output final : public output_channel {
 public:
  bool send(element_batch) override {
    throw channel_failure("the connection to its consumer's worker closed");
  }
  void cancel() override {}
};

}  // namespace

TEST_CASE("stream task: an output whose consumer is lost fails the task with the channel's "
          "reason as it stands") {
  task_fixture f;
  auto in = std::make_shared<local_channel>(8);
  element_batch batch{record{1, 0, 1, {}}, end_of_input{}};
  REQUIRE(in->send(std::move(batch)));
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {in};
  c.outputs.push_back({partitioning::forward, 128, {std::make_shared<lost_consumer_output>()}});
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::failed));
  task.join();
  CHECK(f.listener->failure() == "the connection to its consumer's worker closed");
}

namespace {

// An ack's handles where the coordinator resolves them: shared ones in the job's shared folder
// (the checkpoint folder's parent), the others in the checkpoint's folder.
subtask_state resolved(const subtask_state& acked, const std::string& checkpoint_folder) {
  subtask_state out = acked;
  const std::filesystem::path folder(checkpoint_folder);
  for (auto& h : out.handles) {
    if (h.is_inline()) continue;
    h.path = ((h.is_shared() ? folder.parent_path() / "shared" : folder) / h.path).string();
  }
  return out;
}

std::size_t handles_with(const checkpoint_ack& ack, handle_sharing sharing) {
  std::size_t n = 0;
  for (const auto& h : ack.state.handles) n += h.sharing == sharing ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("stream task: rocksdb incremental checkpoints name confirmed files again and restore "
          "from them; a torn shared file fails the restore naming it") {
  task_fixture f;
  const auto local = f.dir.path() / "local";
  auto keyed_config = [&](std::shared_ptr<local_channel> in) {
    auto c = f.config(make_vertex("keyed_sum"), operator_role::keyed);
    c.inputs = {std::move(in)};
    c.state_backend = state_backend_kind::rocksdb;
    c.incremental_checkpoints = true;
    c.local_state_dir = local;
    return c;
  };
  constexpr std::uint64_t keys = 3'000;
  subtask_state second_state;
  {
    auto in = std::make_shared<local_channel>(64);
    stream_task task(keyed_config(in));
    task.start();
    std::vector<stream_element> batch;
    for (std::uint64_t k = 0; k < keys; ++k)
      batch.push_back(record{k, static_cast<std::int64_t>(k), static_cast<std::int64_t>(k), {}});
    batch.push_back(checkpoint_barrier{1, 1, f.options(1)});
    REQUIRE(in->send(std::move(batch)));
    REQUIRE(f.responder->wait_for(1));
    const checkpoint_ack first = f.responder->acks().at(0);
    CHECK(handles_with(first, handle_sharing::shared_new) > 0);
    CHECK(handles_with(first, handle_sharing::shared_reused) == 0);

    // Confirmed before the next barrier is sent: whether the task handled the notification
    // already or finds it still in its mailbox at the barrier, its files are named again.
    task.notify_checkpoint_complete(1, 0);
    REQUIRE(in->send({record{7, 0, 1000, {}}, checkpoint_barrier{2, 2, f.options(2)}}));
    REQUIRE(f.responder->wait_for(2));
    const checkpoint_ack second = f.responder->acks().at(1);
    CHECK(handles_with(second, handle_sharing::shared_reused) > 0);
    CHECK(second.state.state_size > 0);
    second_state = resolved(second.state, f.options(2).target_location);
    task.cancel();
    task.join();
  }

  // Restored from checkpoint 2, into rocksdb and into the heap: key 7 holds 7 + 1000, every
  // other key k holds k.
  for (const auto backend : {state_backend_kind::rocksdb, state_backend_kind::hashmap}) {
    INFO("restored into " << to_string(backend));
    auto in = std::make_shared<local_channel>(64);
    auto out = std::make_shared<local_channel>(64);
    auto wakeup = std::make_shared<task_wakeup>();
    out->set_wakeup(wakeup);
    auto c = keyed_config(in);
    c.state_backend = backend;
    c.attempt.attempt = 1;
    c.outputs.push_back({partitioning::forward, 128, {out}});
    c.restore_checkpoint = 2;
    c.restore_states[0] = second_state;
    stream_task task(std::move(c));
    task.start();
    REQUIRE(in->send({record{7, 0, 1, {}}, record{8, 0, 1, {}}, end_of_input{}}));
    auto got = take_until(*out, *wakeup, has_end);
    REQUIRE(got.size() == 3);
    CHECK(std::get<record>(got[0]).value == 7 + 1000 + 1);
    CHECK(std::get<record>(got[1]).value == 8 + 1);
    task.join();
  }
  // The heap's scratch folders went with the restore.
  const bool scratch_left =
      std::filesystem::exists(local / "restore") && !std::filesystem::is_empty(local / "restore");
  CHECK_FALSE(scratch_left);

  // A shared file cut short: the restore fails, naming it.
  std::string victim;
  for (const auto& h : second_state.handles)
    if (h.is_shared()) victim = h.path;
  REQUIRE_FALSE(victim.empty());
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) - 1);
  task_fixture g;
  auto in = std::make_shared<local_channel>(4);
  auto c = keyed_config(in);
  c.listener = g.listener;
  c.attempt.attempt = 2;
  c.restore_checkpoint = 2;
  c.restore_states[0] = second_state;
  stream_task task(std::move(c));
  task.start();
  REQUIRE(g.listener->wait_for_state(execution_state::failed));
  task.join();
  CHECK_THAT(g.listener->failure(), Catch::Contains("checkpoint 2"));
  CHECK_THAT(g.listener->failure(), Catch::Contains(victim));
}

TEST_CASE("stream task: a deferred keyed state streams into its state file: nothing when empty, "
          "inline when small, a file when large, declined without a location") {
  const auto backend = GENERATE(state_backend_kind::rocksdb, state_backend_kind::hashmap);
  INFO(to_string(backend));
  task_fixture f;
  auto in = std::make_shared<local_channel>(64);
  auto c = f.config(make_vertex("keyed_sum"), operator_role::keyed);
  c.inputs = {in};
  c.state_backend = backend;
  c.local_state_dir = f.dir.path() / "local";
  c.inline_state_max_bytes = 4096;
  stream_task task(std::move(c));
  task.start();
  const auto files_in = [&](checkpoint_id id) {
    std::size_t n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(f.options(id).target_location, ec)) {
      (void)e;
      ++n;
    }
    return n;
  };
  const auto sums = [&](const checkpoint_ack& ack, checkpoint_id id) {
    REQUIRE(ack.state.handles.size() == 1);
    auto s = state_file::read(in_folder(ack.state.handles[0], f.options(id).target_location));
    REQUIRE(s);
    std::map<std::uint64_t, std::int64_t> out;
    for (const auto& [group, state] : s->keyed.key_groups)
      for (const auto& [key, bytes] : state.values.at("sum")) out[key] = *decode_int64_state(bytes);
    return out;
  };

  // Empty: no state, no file.
  std::filesystem::create_directories(f.options(1).target_location);
  REQUIRE(in->send({checkpoint_barrier{1, 1, f.options(1)}}));
  REQUIRE(f.responder->wait_for(1));
  CHECK(f.responder->acks().at(0).state.handles.empty());
  CHECK(files_in(1) == 0);

  // Three keys: inline.
  REQUIRE(in->send({record{1, 0, 10, {}}, record{2, 0, 20, {}}, record{3, 0, 30, {}},
                    checkpoint_barrier{2, 2, f.options(2)}}));
  REQUIRE(f.responder->wait_for(2));
  const checkpoint_ack small = f.responder->acks().at(1);
  REQUIRE(small.state.handles.size() == 1);
  CHECK(small.state.handles[0].is_inline());
  CHECK(sums(small, 2) == std::map<std::uint64_t, std::int64_t>{{1, 10}, {2, 20}, {3, 30}});
  CHECK(files_in(2) == 0);

  // 3000 keys: far over the inline limit (and deferred on the heap too): a file.
  std::vector<stream_element> batch;
  std::map<std::uint64_t, std::int64_t> expected{{1, 10}, {2, 20}, {3, 30}};
  for (std::uint64_t k = 100; k < 3100; ++k) {
    batch.push_back(record{k, 0, static_cast<std::int64_t>(k), {}});
    expected[k] = static_cast<std::int64_t>(k);
  }
  batch.push_back(checkpoint_barrier{3, 3, f.options(3)});
  REQUIRE(in->send(std::move(batch)));
  REQUIRE(f.responder->wait_for(3));
  const checkpoint_ack large = f.responder->acks().at(2);
  REQUIRE(large.state.handles.size() == 1);
  CHECK_FALSE(large.state.handles[0].is_inline());
  CHECK(large.state.state_size == large.state.handles[0].size);
  CHECK(sums(large, 3) == expected);
  CHECK(files_in(3) == 1);  // the state file, no temporary one left

  // No location for a state that does not go inline: declined, saying so.
  REQUIRE(in->send({checkpoint_barrier{4, 4, checkpoint_options{}}}));
  REQUIRE(f.responder->wait_for(3, 1));
  const checkpoint_decline declined = f.responder->declines().at(0);
  CHECK(declined.id == 4);
  CHECK(declined.reason == checkpoint_failure_reason::checkpoint_declined);
  CHECK(declined.message == "the barrier names no location for state files");
  task.cancel();
  task.join();
}

TEST_CASE("stream task: a backpressured source takes a checkpoint and keeps its order; a cancel "
          "ends it while its output stays full") {
  task_fixture f;
  // Its output takes one batch, which nobody takes: the source is soon backpressured, with
  // the batch after it in its gate's backlog.
  auto out = std::make_shared<local_channel>(1);
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto c = f.config(make_vertex("sequence_source", {{"count", "100000"}, {"keys", "2"}}),
                    operator_role::source);
  c.outputs.push_back({partitioning::forward, 128, {out}});
  c.batch_size = 8;
  // A missed wake-up would show: it looks again by itself only after an hour.
  c.idle_recheck = std::chrono::hours(1);
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::running));
  for (int rounds = 0; rounds < 10'000 && out->queued_batches() == 0; ++rounds) {
    const auto seen = wakeup->generation();
    if (out->queued_batches() == 0)
      wakeup->wait(seen, std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
  }
  REQUIRE(out->queued_batches() == 1);
  // It waits for room, not in a send: a trigger is handled (on its thread: the caller's would
  // have to wait for room), the barrier behind the records it emitted.
  REQUIRE(task.idle_after_turn());
  task.trigger_checkpoint(1, 1, f.options(1));
  REQUIRE(f.responder->wait_for(1));
  CHECK(task.triggers_taken_on_caller() == 0);
  CHECK(out->queued_batches() == 1);  // nothing was taken: the barrier waits in the backlog
  const std::int64_t offset = snapshot_offset(f, f.responder->acks().at(0));

  // Taking releases the backlog, in order: the records up to the snapshot's offset, the
  // barrier, then the records after it; none lost, none twice.
  auto got = take_until(*out, *wakeup, [&](const auto& g) {
    return static_cast<std::int64_t>(g.size()) >= offset + 1 + 100;
  });
  REQUIRE(static_cast<std::int64_t>(got.size()) >= offset + 1 + 100);
  std::int64_t records = 0;
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(got.size()); ++k) {
    if (k == offset) {
      CHECK(is_barrier(got[static_cast<std::size_t>(k)], 1));
      continue;
    }
    const auto* r = std::get_if<record>(&got[static_cast<std::size_t>(k)]);
    REQUIRE(r != nullptr);
    CHECK(r->seq == records);
    ++records;
  }

  // Backpressured again (nobody takes): a cancel ends it.
  for (int rounds = 0; rounds < 10'000 && out->queued_batches() == 0; ++rounds) {
    const auto seen = wakeup->generation();
    if (out->queued_batches() == 0)
      wakeup->wait(seen, std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
  }
  REQUIRE(task.idle_after_turn());
  task.cancel();
  REQUIRE(f.listener->wait_for_state(execution_state::canceled));
  task.join();
}

TEST_CASE("stream task: a backpressured task serves its mailbox, passes every record in order "
          "once the consumer takes again, and ends with its end of input") {
  task_fixture f;
  auto in = std::make_shared<local_channel>(4);
  auto out = std::make_shared<local_channel>(1);
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto gate = std::make_shared<held_operator_gate>();
  gate->release();  // never holds: only its completions are of use here
  auto c = f.config(make_vertex("held_listening_map"), operator_role::transform);
  c.operators = held_factory(gate);
  c.inputs = {in};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  c.batch_size = 3;
  c.idle_recheck = std::chrono::hours(1);
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::running));

  // Fills its input and output: the producer here (this thread) is backpressured too.
  constexpr std::int64_t total = 600;
  std::thread producer([&] {
    for (std::int64_t first = 0; first < total; first += 5) {
      element_batch b;
      for (std::int64_t s = first; s < first + 5; ++s) b.push_back(record{0, s, 0, {}});
      if (!in->send(std::move(b))) return;
    }
    (void)in->send({end_of_input{}});
  });
  // A failed REQUIRE must not leave the producer thread running.
  struct stop_producer {
    local_channel& in;
    std::thread& producer;
    ~stop_producer() {
      if (!producer.joinable()) return;
      in.cancel();
      producer.join();
    }
  } stop{*in, producer};
  // The task took what fits its output and a backlog, then stopped taking: the input fills.
  const auto backpressured = [&] {
    return in->queued_batches() == in->capacity() && out->queued_batches() == 1;
  };
  for (int rounds = 0; rounds < 10'000 && !backpressured(); ++rounds)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a state, bounded
  REQUIRE(backpressured());
  // A completion goes through the mailbox of a listening operator: handled while backpressured.
  REQUIRE(task.idle_after_turn());
  task.notify_checkpoint_complete(3, 3);
  bool notified = false;
  for (int rounds = 0; rounds < 10'000 && !notified; ++rounds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a state, bounded
    std::lock_guard lock(gate->mutex);
    notified = gate->completions == std::vector<checkpoint_id>{3};
  }
  CHECK(notified);
  CHECK(out->queued_batches() == 1);

  auto got = take_until(*out, *wakeup, has_end);
  producer.join();
  REQUIRE(has_end(got));
  got.pop_back();
  REQUIRE(got.size() == static_cast<std::size_t>(total));
  for (std::int64_t s = 0; s < total; ++s)
    CHECK(std::get<record>(got[static_cast<std::size_t>(s)]).seq == s);
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

TEST_CASE("stream task: a task backpressured on its last batches is cancelled at once") {
  task_fixture f;
  auto in = std::make_shared<local_channel>(4);
  auto out = std::make_shared<local_channel>(1);
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {in};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  c.batch_size = 1;
  c.idle_recheck = std::chrono::hours(1);
  // Three records and the end: the first goes out, the rest and the end of input wait.
  REQUIRE(in->send({record{0, 0, 0, {}}, record{0, 1, 0, {}}, record{0, 2, 0, {}}}));
  REQUIRE(in->send({end_of_input{}}));
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::running));
  for (int rounds = 0; rounds < 10'000 && out->queued_batches() == 0; ++rounds)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a state, bounded
  REQUIRE(out->queued_batches() == 1);
  REQUIRE(task.idle_after_turn());
  CHECK(in->queued_batches() == 1);  // the end of input: not taken while backlogged
  CHECK_FALSE(task.done());
  task.cancel();
  REQUIRE(f.listener->wait_for_state(execution_state::canceled));
  task.join();
}

TEST_CASE("stream task: a barrier goes on as a batch of its own, after the records before it") {
  task_fixture f;
  auto in = std::make_shared<local_channel>(4);
  auto out = std::make_shared<local_channel>(8);
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto c = f.config(make_vertex("map_identity"), operator_role::transform);
  c.inputs = {in};
  c.outputs.push_back({partitioning::forward, 128, {out}});
  c.batch_size = 8;
  REQUIRE(in->send({record{0, 0, 0, {}}, record{0, 1, 0, {}}, checkpoint_barrier{1, 1, f.options(1)},
                    record{0, 2, 0, {}}, end_of_input{}}));
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
  std::vector<element_batch> batches;
  while (auto b = out->try_take()) batches.push_back(std::move(*b));
  REQUIRE(batches.size() == 4);
  CHECK(batches[0] == element_batch{record{0, 0, 0, {}}, record{0, 1, 0, {}}});
  REQUIRE(is_single_barrier(batches[1]));
  CHECK(std::get<checkpoint_barrier>(batches[1].front()).id == 1);
  CHECK(batches[2] == element_batch{record{0, 2, 0, {}}});
  CHECK(batches[3] == element_batch{end_of_input{}});
  REQUIRE(f.responder->wait_for(1));
}
