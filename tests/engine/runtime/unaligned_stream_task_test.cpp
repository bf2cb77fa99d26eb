// One stream_task with two inputs and a backpressured output, wired to local channels the test
// drives: an unaligned checkpoint is taken at once, what its barrier overtook is persisted as
// channel state, and a restore replays it ahead of anything new.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/stream_task.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

struct unaligned_fixture {
  temp_folder dir;
  std::shared_ptr<recording_responder> responder = std::make_shared<recording_responder>();
  std::shared_ptr<recording_listener> listener = std::make_shared<recording_listener>();
  std::shared_ptr<snapshot_writer> writer = std::make_shared<snapshot_writer>(1);

  stream_task_config config(std::vector<std::shared_ptr<input_channel>> inputs,
                            std::shared_ptr<output_channel> out) {
    stream_task_config c;
    c.job = "job";
    c.vertex = make_vertex("map_identity");
    c.attempt = {{c.vertex.id, 0}, 0};
    c.role = operator_role::transform;
    c.responder = responder;
    c.listener = listener;
    c.writer = writer;
    c.inputs = std::move(inputs);
    c.outputs.push_back({partitioning::forward, 128, {std::move(out)}});
    c.batch_size = 4;
    c.idle_recheck = std::chrono::hours(1);  // every wake-up must come from the channels
    return c;
  }

  std::filesystem::path folder(checkpoint_id id) const {
    return dir.path() / ("chk-" + std::to_string(id));
  }

  checkpoint_barrier barrier(checkpoint_id id) const {
    checkpoint_barrier b{id, 10, {}};
    b.options.unaligned = true;
    b.options.target_location = folder(id).string();
    std::filesystem::create_directories(folder(id));
    return b;
  }

  // The state the acknowledgement of `id` names, read back.
  subtask_snapshot acked_state(checkpoint_id id) {
    REQUIRE(responder->wait_for(1));
    const checkpoint_ack ack = responder->acks().at(0);
    REQUIRE(ack.id == id);
    REQUIRE(ack.state.handles.size() == 1);
    state_handle h = ack.state.handles[0];
    h.path = (folder(id) / h.path).string();
    auto s = state_file::read(h);
    REQUIRE(s);
    return *s;
  }
};

element_batch records(std::int64_t first, std::int64_t n) {
  element_batch b;
  for (std::int64_t s = first; s < first + n; ++s) b.push_back(record{0, s, 0, {}});
  return b;
}

std::vector<std::int64_t> seqs_of(const persisted_channel& c) {
  std::vector<std::int64_t> out;
  for (const auto& r : c.records) out.push_back(r.seq);
  return out;
}

const persisted_channel* find_channel(const subtask_snapshot& s, channel_side side,
                                      std::uint32_t channel) {
  for (const auto& c : s.channels)
    if (c.side == side && c.channel == channel) return &c;
  return nullptr;
}

// Everything the consumer received, split at the barrier.
struct received {
  std::vector<std::int64_t> before_barrier;
  std::vector<std::int64_t> after_barrier;
  bool barrier = false;
  bool ended = false;
};

received drain(local_channel& out, task_wakeup& wakeup, std::size_t records_expected) {
  received r;
  for (int rounds = 0; rounds < 100'000 && !r.ended; ++rounds) {
    const auto seen = wakeup.generation();
    auto b = out.try_take();
    if (!b) {
      wakeup.wait(seen, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      continue;
    }
    for (auto& e : *b) {
      if (auto* rec = std::get_if<record>(&e))
        (r.barrier ? r.after_barrier : r.before_barrier).push_back(rec->seq);
      else if (std::holds_alternative<checkpoint_barrier>(e))
        r.barrier = true;
      else
        r.ended = true;
    }
    if (r.before_barrier.size() + r.after_barrier.size() > records_expected + 1000) break;
  }
  return r;
}

}  // namespace

TEST_CASE("unaligned stream task: barriers overtake a full pipeline, the snapshot is taken at "
          "once, and every record before them is persisted or delivered exactly once") {
  unaligned_fixture f;
  // Room for everything the test sends before the barriers: only the output is full.
  auto in0 = std::make_shared<local_channel>(16);
  auto in1 = std::make_shared<local_channel>(16);
  auto out = std::make_shared<local_channel>(1);
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  stream_task task(f.config({in0, in1}, out));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::running));

  // Before the barrier: 0..39 on input 0, 1000..1039 on input 1, more than the output takes.
  for (std::int64_t k = 0; k < 10; ++k) {
    REQUIRE(in0->send(records(k * 4, 4)));
    if (k < 8) REQUIRE(in1->send(records(1000 + k * 4, 4)));
  }
  const bool priority_on_both = GENERATE(true, false);
  // The task processed what its output and a backlog hold, then waits for room: the output
  // holds records (one batch of 4 in the channel, more in the backlog) when the barrier comes.
  for (int rounds = 0; rounds < 10'000 && task.records_out() <= 4; ++rounds)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a state, bounded
  REQUIRE(task.records_out() > 4);
  REQUIRE(task.idle_after_turn());
  REQUIRE(in0->send_priority({f.barrier(1)}));
  if (priority_on_both) {
    // Both barriers overtake: the ack comes while the output is still full.
    REQUIRE(in1->send_priority({f.barrier(1)}));
    REQUIRE(f.responder->wait_for(1));
    // Nothing was taken from the output meanwhile: the records it holds wait behind the barrier.
    CHECK(out->queued_batches() >= 1);
  }
  // Input 1's barrier, if in order, comes behind records the task processes (and persists)
  // once the consumer takes again; after both barriers come records of the next checkpoint.
  std::thread producer([&] {
    (void)in1->send(records(1032, 4));
    (void)in1->send(records(1036, 4));
    if (!priority_on_both) (void)in1->send({f.barrier(1)});
    (void)in1->send(records(2000, 4));
    (void)in1->send({end_of_input{}});
    (void)in0->send(records(3000, 4));
    (void)in0->send({end_of_input{}});
  });
  struct join_producer {
    std::thread& t;
    local_channel& a;
    local_channel& b;
    ~join_producer() {
      if (!t.joinable()) return;
      a.cancel();
      b.cancel();
      t.join();
    }
  } join{producer, *in0, *in1};
  const received got = drain(*out, *wakeup, 100);
  producer.join();
  REQUIRE(got.ended);
  REQUIRE(got.barrier);
  const subtask_snapshot s = f.acked_state(1);
  const checkpoint_ack ack = f.responder->acks().at(0);
  CHECK(ack.metrics.unaligned);
  CHECK(ack.metrics.persisted_data_bytes > 0);

  // Before the barriers: every record exactly once, either delivered ahead of the barrier or in
  // the channel state; none after the barriers is in it.
  std::multiset<std::int64_t> accounted(got.before_barrier.begin(), got.before_barrier.end());
  for (const auto& c : s.channels)
    for (const auto& r : c.records) accounted.insert(r.seq);
  std::multiset<std::int64_t> expected;
  for (std::int64_t q = 0; q < 40; ++q) expected.insert(q);
  const std::int64_t input1_before = priority_on_both ? 1032 : 1040;
  for (std::int64_t q = 1000; q < input1_before; ++q) expected.insert(q);
  CHECK(accounted == expected);
  // The output state is what the consumer received after the barrier, first, in order.
  for (const auto& c : s.channels)
    UNSCOPED_INFO("channel side " << static_cast<int>(c.side) << " gate " << c.gate << " channel "
                                  << c.channel << ": " << c.records.size() << " records");
  UNSCOPED_INFO("before barrier " << got.before_barrier.size() << ", after "
                                  << got.after_barrier.size());
  const persisted_channel* output = find_channel(s, channel_side::output, 0);
  REQUIRE(output != nullptr);
  const auto out_seqs = seqs_of(*output);
  REQUIRE(out_seqs.size() <= got.after_barrier.size());
  CHECK(std::equal(out_seqs.begin(), out_seqs.end(), got.after_barrier.begin()));
  // Input channel states keep their channel and order.
  for (const auto& c : s.channels) {
    const auto q = seqs_of(c);
    CHECK(std::is_sorted(q.begin(), q.end()));
  }
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

TEST_CASE("unaligned stream task: a restore replays output state first, then input state ahead "
          "of new input, and a checkpoint during the replay persists what is left") {
  unaligned_fixture f;
  // A hand-made channel state: the output held 1, 2; input 0 held 10, 11; input 1 held 20.
  subtask_snapshot s;
  s.operator_uid = "map_identity";
  s.subtask_index = 0;
  s.parallelism = 1;
  s.checkpoint = 5;
  s.channels.push_back({channel_side::output, 0, 0, {record{0, 1, 0, {}}, record{0, 2, 0, {}}}});
  s.channels.push_back({channel_side::input, 0, 0, {record{0, 10, 0, {}}, record{0, 11, 0, {}}}});
  s.channels.push_back({channel_side::input, 0, 1, {record{0, 20, 0, {}}}});
  std::filesystem::create_directories(f.folder(5));
  auto handle = state_file::write(f.folder(5) / state_file::file_name("map_identity", 0, 0), s);
  REQUIRE(handle);

  auto in0 = std::make_shared<local_channel>(8);
  auto in1 = std::make_shared<local_channel>(8);
  auto out = std::make_shared<local_channel>(64);
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto c = f.config({in0, in1}, out);
  c.input_addresses = {{0, 0}, {0, 1}};
  c.restore_checkpoint = 5;
  c.restore_states[0].handles.push_back(*handle);
  // New input is already queued: the replay still comes first.
  REQUIRE(in0->send(records(100, 2)));
  REQUIRE(in1->send(records(200, 2)));
  REQUIRE(in0->send({end_of_input{}}));
  REQUIRE(in1->send({end_of_input{}}));
  stream_task task(std::move(c));
  task.start();
  const received got = drain(*out, *wakeup, 9);
  REQUIRE(got.ended);
  REQUIRE(got.before_barrier.size() == 9);
  // The output state first, in order.
  CHECK(got.before_barrier[0] == 1);
  CHECK(got.before_barrier[1] == 2);
  // Each input's replay ahead of its new records.
  const auto at = [&](std::int64_t q) {
    return std::find(got.before_barrier.begin(), got.before_barrier.end(), q) -
           got.before_barrier.begin();
  };
  CHECK(at(10) < at(11));
  CHECK(at(11) < at(100));
  CHECK(at(20) < at(200));
  std::multiset<std::int64_t> all(got.before_barrier.begin(), got.before_barrier.end());
  CHECK(all == std::multiset<std::int64_t>{1, 2, 10, 11, 20, 100, 101, 200, 201});
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

TEST_CASE("unaligned stream task: a checkpoint taken while channel state is replayed persists "
          "the records not replayed yet") {
  unaligned_fixture f;
  subtask_snapshot s;
  s.operator_uid = "map_identity";
  s.subtask_index = 0;
  s.parallelism = 1;
  s.checkpoint = 5;
  persisted_channel in{channel_side::input, 0, 0, {}};
  for (std::int64_t q = 0; q < 40; ++q) in.records.push_back(record{0, q, 0, {}});
  s.channels.push_back(in);
  std::filesystem::create_directories(f.folder(5));
  auto handle = state_file::write(f.folder(5) / state_file::file_name("map_identity", 0, 0), s);
  REQUIRE(handle);

  auto in0 = std::make_shared<local_channel>(8);
  auto out = std::make_shared<local_channel>(1);  // fills at once: the replay stalls
  auto wakeup = std::make_shared<task_wakeup>();
  out->set_wakeup(wakeup);
  auto c = f.config({in0}, out);
  c.restore_checkpoint = 5;
  c.restore_states[0].handles.push_back(*handle);
  stream_task task(std::move(c));
  task.start();
  REQUIRE(f.listener->wait_for_state(execution_state::running));
  REQUIRE(in0->send_priority({f.barrier(6)}));
  REQUIRE(f.responder->wait_for(1));
  // Checkpoint 6 completes while most of the old state waits: it holds exactly what is left.
  const subtask_snapshot taken = f.acked_state(6);
  REQUIRE(in0->send({end_of_input{}}));
  const received got = drain(*out, *wakeup, 40);
  REQUIRE(got.ended);
  std::multiset<std::int64_t> accounted(got.before_barrier.begin(), got.before_barrier.end());
  for (const auto& ch : taken.channels)
    for (const auto& r : ch.records) accounted.insert(r.seq);
  std::multiset<std::int64_t> expected;
  for (std::int64_t q = 0; q < 40; ++q) expected.insert(q);
  CHECK(accounted == expected);
  CHECK_FALSE(taken.channels.empty());
  // Nothing is lost afterwards either: every record reaches the consumer once.
  std::multiset<std::int64_t> delivered(got.before_barrier.begin(), got.before_barrier.end());
  delivered.insert(got.after_barrier.begin(), got.after_barrier.end());
  CHECK(delivered == expected);
  REQUIRE(f.listener->wait_for_state(execution_state::finished));
  task.join();
}

// Seeded interleavings on the real task: how much each input holds before its barrier, whether
// each barrier overtakes (priority) or comes in order, the output's room, how the consumer
// drains, and whether the checkpoint starts aligned with a timeout. Whatever the schedule,
// every record before the barriers is delivered ahead of the barrier or persisted, once.
// SNAPFLOW_UNALIGNED_SEED=<seed> runs one seed.
TEST_CASE("unaligned stream task: seeded interleavings of overtaking and in-order barriers, "
          "with and without an aligned timeout, keep every record exactly once") {
  std::vector<std::uint64_t> seeds;
  if (const char* one = std::getenv("SNAPFLOW_UNALIGNED_SEED"))
    seeds.push_back(std::strtoull(one, nullptr, 10));
  else
    for (std::uint64_t s = 1; s <= 24; ++s) seeds.push_back(s);
  for (const std::uint64_t seed : seeds) {
    INFO("seed " << seed << " (replay with SNAPFLOW_UNALIGNED_SEED=" << seed << ")");
    std::mt19937_64 rng(seed);
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    unaligned_fixture f;
    const std::size_t n_inputs = static_cast<std::size_t>(pick(1, 3));
    std::vector<std::shared_ptr<local_channel>> ins;
    std::vector<std::shared_ptr<input_channel>> as_inputs;
    for (std::size_t i = 0; i < n_inputs; ++i) {
      ins.push_back(std::make_shared<local_channel>(64));
      as_inputs.push_back(ins.back());
    }
    auto out = std::make_shared<local_channel>(static_cast<std::size_t>(pick(1, 3)));
    auto wakeup = std::make_shared<task_wakeup>();
    out->set_wakeup(wakeup);
    stream_task task(f.config(as_inputs, out));
    task.start();
    REQUIRE(f.listener->wait_for_state(execution_state::running));

    checkpoint_barrier b = f.barrier(1);
    if (pick(0, 1) == 1) b.options.aligned_timeout_ms = pick(1, 3);
    std::multiset<std::int64_t> expected;
    std::vector<int> before(n_inputs), after(n_inputs);
    std::vector<bool> priority(n_inputs);
    for (std::size_t i = 0; i < n_inputs; ++i) {
      before[i] = pick(0, 12);
      after[i] = pick(0, 4);
      // An aligned checkpoint's barriers come in order; once unaligned, upstream sends them
      // ahead.
      priority[i] = b.options.aligned_timeout_ms == 0 && pick(0, 1) == 1;
    }
    std::thread producer([&] {
      for (std::size_t i = 0; i < n_inputs; ++i)
        for (int k = 0; k < before[i]; ++k)
          (void)ins[i]->send(records(static_cast<std::int64_t>(i) * 100'000 + k * 4, 4));
      std::vector<std::size_t> order(n_inputs);
      for (std::size_t i = 0; i < n_inputs; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t i : order) {
        if (priority[i])
          (void)ins[i]->send_priority({b});
        else
          (void)ins[i]->send({b});
      }
      for (std::size_t i = 0; i < n_inputs; ++i) {
        for (int k = 0; k < after[i]; ++k)
          (void)ins[i]->send(records(static_cast<std::int64_t>(i) * 100'000 + 50'000 + k * 4, 4));
        (void)ins[i]->send({end_of_input{}});
      }
    });
    for (std::size_t i = 0; i < n_inputs; ++i)
      for (std::int64_t q = 0; q < before[i] * 4; ++q)
        expected.insert(static_cast<std::int64_t>(i) * 100'000 + q);
    // The consumer starts late, or at once: the output is full or not when barriers come.
    if (pick(0, 1) == 1) std::this_thread::sleep_for(std::chrono::milliseconds(pick(1, 20)));
    std::size_t total = 0;
    for (std::size_t i = 0; i < n_inputs; ++i)
      total += static_cast<std::size_t>((before[i] + after[i]) * 4);
    const received got = drain(*out, *wakeup, total);
    producer.join();
    REQUIRE(got.ended);
    REQUIRE(got.barrier);
    REQUIRE(f.responder->wait_for(1));
    const checkpoint_ack ack = f.responder->acks().at(0);
    std::multiset<std::int64_t> accounted(got.before_barrier.begin(), got.before_barrier.end());
    if (!ack.state.handles.empty()) {
      const subtask_snapshot s = f.acked_state(1);
      for (const auto& c : s.channels)
        for (const auto& r : c.records) accounted.insert(r.seq);
    }
    CHECK(accounted == expected);
    // And nothing is lost or doubled on the way: every record reaches the consumer once.
    CHECK(got.before_barrier.size() + got.after_barrier.size() == total);
    REQUIRE(f.listener->wait_for_state(execution_state::finished));
    task.join();
  }
}
