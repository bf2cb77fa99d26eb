// local_channel and output_gate: order, batching, backpressure, cancellation, and priority
// barriers (send_priority, take_first_barrier).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/output_gate.hpp"

using namespace snapflow;

namespace {

element_batch batch_of(std::int64_t first, std::size_t n) {
  element_batch b;
  for (std::size_t i = 0; i < n; ++i)
    b.push_back(record{0, first + static_cast<std::int64_t>(i), 0, {}});
  return b;
}

}  // namespace

TEST_CASE("local channel: batches arrive in order and wake the consumer") {
  local_channel c(4);
  auto wakeup = std::make_shared<task_wakeup>();
  c.set_wakeup(wakeup);
  const auto before = wakeup->generation();
  CHECK_FALSE(c.try_take().has_value());
  REQUIRE(c.send(batch_of(0, 3)));
  REQUIRE(c.send(batch_of(3, 2)));
  CHECK(wakeup->generation() == before + 2);
  auto first = c.try_take();
  REQUIRE(first.has_value());
  REQUIRE(first->size() == 3);
  CHECK(std::get<record>((*first)[0]).seq == 0);
  auto second = c.try_take();
  REQUIRE(second.has_value());
  CHECK(std::get<record>((*second)[1]).seq == 4);
  CHECK_FALSE(c.try_take().has_value());
}

TEST_CASE("backpressure: a slow consumer bounds what a fast producer has queued") {
  // The producer sends 200 batches into a channel of capacity 4; the consumer takes one at a
  // time. At every point the producer can be at most `capacity` batches ahead of the consumer,
  // and the channel never holds more than its capacity.
  constexpr std::size_t capacity = 4;
  constexpr int total = 200;
  local_channel c(capacity);
  auto wakeup = std::make_shared<task_wakeup>();
  c.set_wakeup(wakeup);
  std::atomic<int> sent{0};
  std::atomic<bool> send_failed{false};
  std::thread producer([&] {
    for (int i = 0; i < total; ++i) {
      if (!c.send(batch_of(i, 1))) send_failed = true;
      sent.fetch_add(1);
    }
  });
  int taken = 0;
  std::int64_t expected = 0;
  // Bounded: each round either takes a batch or waits for the producer's wakeup.
  for (int rounds = 0; taken < total && rounds < 100 * total; ++rounds) {
    const auto seen = wakeup->generation();
    auto b = c.try_take();
    if (!b) {
      wakeup->wait(seen, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      continue;
    }
    CHECK(std::get<record>(b->front()).seq == expected++);
    ++taken;
    // Sent counts a batch after send() returned, so it trails the queue by at most one.
    CHECK(sent.load() <= taken + static_cast<int>(capacity) + 1);
    CHECK(c.queued_batches() <= capacity);
  }
  producer.join();
  CHECK_FALSE(send_failed);
  CHECK(taken == total);
  CHECK(c.high_water_mark() <= capacity);
  CHECK(c.high_water_mark() >= 1);
}

TEST_CASE("backpressure: cancel wakes a producer blocked on a full channel") {
  local_channel c(1);
  REQUIRE(c.send(batch_of(0, 1)));
  std::atomic<bool> result{true};
  std::atomic<bool> returned{false};
  std::thread producer([&] {
    result = c.send(batch_of(1, 1));  // blocks: the channel is full
    returned = true;
  });
  c.cancel();
  producer.join();
  CHECK(returned);
  CHECK_FALSE(result);
  CHECK_FALSE(c.send(batch_of(2, 1)));
  CHECK_FALSE(c.try_take().has_value());
}

TEST_CASE("output gate: records are batched; a barrier flushes them and goes alone to every channel") {
  auto c0 = std::make_shared<local_channel>(16);
  auto c1 = std::make_shared<local_channel>(16);
  output_gate gate(partitioner(partitioning::rebalance, 2, 128, 1), {c0, c1}, 3);
  for (int i = 0; i < 4; ++i) REQUIRE(gate.emit(record{0, i, 0, {}}));
  // Rebalance from subtask 1 starts at channel 0: seq 0 and 2 go there, 1 and 3 to channel 1.
  CHECK(c0->queued_batches() == 0);  // nothing full yet
  checkpoint_barrier b;
  b.id = 1;
  REQUIRE(gate.broadcast(b));
  // The records first, in a batch of their own, then the barrier alone: a consumer finds it
  // with take_first_barrier.
  auto from0 = c0->try_take();
  auto from1 = c1->try_take();
  REQUIRE(from0.has_value());
  REQUIRE(from1.has_value());
  REQUIRE(from0->size() == 2);
  CHECK(std::get<record>((*from0)[0]).seq == 0);
  CHECK(std::get<record>((*from0)[1]).seq == 2);
  REQUIRE(from1->size() == 2);
  CHECK(std::get<record>((*from1)[0]).seq == 1);
  CHECK(std::get<record>((*from1)[1]).seq == 3);
  for (auto& c : {c0, c1}) {
    auto barrier = c->try_take();
    REQUIRE(barrier.has_value());
    CHECK(is_single_barrier(*barrier));
    CHECK(std::get<checkpoint_barrier>(barrier->front()).id == 1);
  }
  // With nothing pending, a barrier is the only batch sent.
  b.id = 2;
  REQUIRE(gate.broadcast(b));
  CHECK(c0->queued_batches() == 1);
  CHECK(c1->queued_batches() == 1);
  auto second = c0->take_first_barrier();
  REQUIRE(second.has_value());
  CHECK(second->barrier.id == 2);
  CHECK(second->ahead.empty());
  REQUIRE(c1->try_take().has_value());
  // A full batch goes out on its own.
  for (int i = 0; i < 6; ++i) REQUIRE(gate.emit(record{0, 10 + i, 0, {}}));
  CHECK(c0->queued_batches() == 1);
  CHECK(c1->queued_batches() == 1);
  REQUIRE(gate.emit(record{0, 99, 0, {}}));
  REQUIRE(gate.flush());
  CHECK(c0->queued_batches() + c1->queued_batches() == 3);
}

TEST_CASE("output gate: end of input goes alone, after the records") {
  auto c = std::make_shared<local_channel>(4);
  output_gate gate(partitioner(partitioning::forward, 1, 128, 0), {c}, 8);
  REQUIRE(gate.emit(record{0, 1, 0, {}}));
  REQUIRE(gate.broadcast(end_of_input{}));
  auto records = c->try_take();
  REQUIRE(records.has_value());
  REQUIRE(records->size() == 1);
  CHECK(std::get<record>(records->front()).seq == 1);
  auto end = c->try_take();
  REQUIRE(end.has_value());
  REQUIRE(end->size() == 1);
  CHECK(std::holds_alternative<end_of_input>(end->front()));
}

TEST_CASE("output gate: broadcast partitioning copies every record to every channel") {
  auto c0 = std::make_shared<local_channel>(4);
  auto c1 = std::make_shared<local_channel>(4);
  auto c2 = std::make_shared<local_channel>(4);
  output_gate gate(partitioner(partitioning::broadcast, 3, 128, 0), {c0, c1, c2}, 8);
  REQUIRE(gate.emit(record{1, 2, 3, "x"}));
  REQUIRE(gate.flush());
  for (auto& c : {c0, c1, c2}) {
    auto b = c->try_take();
    REQUIRE(b.has_value());
    REQUIRE(b->size() == 1);
    CHECK(std::get<record>(b->front()) == record{1, 2, 3, "x"});
  }
}

namespace {

// Compares a taken batch with the one expected (Catch cannot decompose optional<vector<variant>>).
bool is(const std::optional<element_batch>& got, const element_batch& want) {
  return got.has_value() && *got == want;
}

element_batch barrier_batch(checkpoint_id id) {
  checkpoint_barrier b;
  b.id = id;
  b.options.unaligned = true;
  return element_batch{b};
}

}  // namespace

TEST_CASE("local channel: a priority barrier gets into a full channel and is found behind the "
          "batches it overtakes") {
  constexpr std::size_t capacity = 3;
  local_channel c(capacity);
  auto wakeup = std::make_shared<task_wakeup>();
  c.set_wakeup(wakeup);
  for (std::size_t i = 0; i < capacity; ++i) REQUIRE(c.send(batch_of(10 * i, 2)));
  CHECK_FALSE(c.can_send_now());  // a producer would block
  CHECK_FALSE(c.has_priority_barrier());
  CHECK_FALSE(c.take_first_barrier().has_value());

  // On another thread, so that a send_priority that waited for room would fail the test (the
  // channel is cancelled after a bounded wait) rather than hang it.
  const auto before = wakeup->generation();
  std::atomic<bool> sent{false};
  std::thread producer([&] { sent = c.send_priority(barrier_batch(7)); });
  for (int i = 0; i < 10'000 && !c.has_priority_barrier(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool arrived = c.has_priority_barrier();
  if (!arrived) c.cancel();
  producer.join();
  REQUIRE(arrived);
  CHECK(sent.load());
  CHECK(wakeup->generation() == before + 1);
  CHECK(c.queued_batches() == capacity + 1);
  CHECK(c.high_water_mark() == capacity);  // priority batches stay out of the bound
  CHECK_FALSE(c.can_send_now());           // and do not take the room of a record batch

  auto found = c.take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->barrier.id == 7);
  CHECK(found->priority);
  REQUIRE(found->ahead.size() == capacity);
  for (std::size_t i = 0; i < capacity; ++i) CHECK(found->ahead[i] == batch_of(10 * i, 2));
  CHECK_FALSE(c.has_priority_barrier());
  CHECK_FALSE(c.take_first_barrier().has_value());
  // The copies are copies: the batches are still queued, in order.
  CHECK(c.queued_batches() == capacity);
  CHECK_FALSE(c.can_send_now());  // taking the priority barrier freed nothing
  for (std::size_t i = 0; i < capacity; ++i) {
    auto b = c.try_take();
    REQUIRE(b.has_value());
    CHECK(*b == batch_of(10 * i, 2));
  }
  CHECK_FALSE(c.try_take().has_value());
}

TEST_CASE("local channel: the batches after a priority barrier follow those before it") {
  local_channel c(4);
  REQUIRE(c.send(batch_of(0, 1)));
  REQUIRE(c.send(batch_of(1, 1)));
  REQUIRE(c.send_priority(barrier_batch(3)));
  REQUIRE(c.send(batch_of(2, 1)));
  REQUIRE(c.send(batch_of(3, 1)));
  CHECK_FALSE(c.can_send_now());  // 4 record batches: full, the barrier aside

  auto found = c.take_first_barrier();
  REQUIRE(found.has_value());
  REQUIRE(found->ahead.size() == 2);
  CHECK(found->ahead[0] == batch_of(0, 1));
  CHECK(found->ahead[1] == batch_of(1, 1));
  for (std::int64_t i = 0; i < 4; ++i) {
    auto b = c.try_take();
    REQUIRE(b.has_value());
    CHECK(*b == batch_of(i, 1));
  }
  CHECK_FALSE(c.try_take().has_value());
}

TEST_CASE("local channel: a priority barrier not taken by take_first_barrier comes out of "
          "try_take in its place") {
  local_channel c(1);
  REQUIRE(c.send(batch_of(0, 1)));
  REQUIRE(c.send_priority(barrier_batch(1)));
  REQUIRE(c.send_priority(barrier_batch(2)));
  CHECK(c.has_priority_barrier());
  CHECK(is(c.try_take(), batch_of(0, 1)));
  CHECK(c.can_send_now());  // the record batch freed its room; the barriers hold none
  CHECK(is(c.try_take(), barrier_batch(1)));
  CHECK(c.has_priority_barrier());
  // take_first_barrier finds the first one left, with nothing ahead of it.
  auto found = c.take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->barrier.id == 2);
  CHECK(found->ahead.empty());
  CHECK_FALSE(c.has_priority_barrier());
}

TEST_CASE("local channel: a blocked producer goes on when a record batch is taken, not when a "
          "priority barrier is") {
  local_channel c(1);
  REQUIRE(c.send(batch_of(0, 1)));  // full
  REQUIRE(c.send_priority(barrier_batch(5)));
  std::atomic<bool> sent{false};
  std::thread producer([&] { sent = c.send(batch_of(1, 1)); });
  auto found = c.take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->ahead.size() == 1);
  // Still full: the producer cannot have queued its batch (one record batch is queued, the
  // capacity is one).
  CHECK(c.queued_batches() == 1);
  CHECK_FALSE(c.can_send_now());
  CHECK(is(c.try_take(), batch_of(0, 1)));
  producer.join();  // released by that take
  CHECK(sent.load());
  CHECK(is(c.try_take(), batch_of(1, 1)));
  CHECK(c.high_water_mark() == 1);
}

TEST_CASE("local channel: take_first_barrier finds a barrier sent by send, and taking it frees "
          "its room") {
  local_channel c(2);
  REQUIRE(c.send(batch_of(0, 2)));
  REQUIRE(c.send(barrier_batch(9)));
  CHECK_FALSE(c.can_send_now());
  CHECK_FALSE(c.has_priority_barrier());  // sent by send: not a priority one
  auto found = c.take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->barrier.id == 9);
  CHECK_FALSE(found->priority);
  REQUIRE(found->ahead.size() == 1);
  CHECK(found->ahead[0] == batch_of(0, 2));
  CHECK(c.can_send_now());
  REQUIRE(c.send(batch_of(2, 1)));
  CHECK(is(c.try_take(), batch_of(0, 2)));
  CHECK(is(c.try_take(), batch_of(2, 1)));

  // A barrier at the end of a batch of records is not a batch of its own: not found.
  element_batch mixed = batch_of(3, 1);
  mixed.push_back(barrier_batch(10).front());
  REQUIRE(c.send(mixed));
  CHECK_FALSE(c.take_first_barrier().has_value());
  CHECK(is(c.try_take(), mixed));
}

TEST_CASE("local channel: a cancelled channel refuses priority barriers and forgets queued "
          "ones") {
  local_channel c(2);
  REQUIRE(c.send_priority(barrier_batch(1)));
  CHECK(c.has_priority_barrier());
  c.cancel();
  CHECK_FALSE(c.has_priority_barrier());
  CHECK_FALSE(c.send_priority(barrier_batch(2)));
  CHECK_FALSE(c.take_first_barrier().has_value());
}

TEST_CASE("local channel: priority barriers are counted in the buffered bytes while queued") {
  auto gauge = std::make_shared<byte_gauge>();
  {
    local_channel c(1);
    c.set_gauge(gauge);
    REQUIRE(c.send(batch_of(0, 4)));
    const auto records = gauge->current();
    REQUIRE(c.send_priority(barrier_batch(1)));
    REQUIRE(c.send_priority(barrier_batch(2)));
    CHECK(gauge->current() > records);
    REQUIRE(c.take_first_barrier().has_value());
    REQUIRE(c.try_take().has_value());
    CHECK(gauge->current() == approximate_bytes(barrier_batch(2)));
  }
  CHECK(gauge->current() == 0);  // what was left leaves with the channel
}

TEST_CASE("local channel: try_send says no_room when full, keeps the batch, and wakes the "
          "producer once room comes") {
  local_channel c(1);
  auto producer = std::make_shared<task_wakeup>();
  c.set_room_wakeup(producer);
  element_batch first = batch_of(0, 2);
  REQUIRE(c.try_send(first) == send_status::sent);
  element_batch second = batch_of(2, 2);
  const auto seen = producer->generation();
  REQUIRE(c.try_send(second) == send_status::no_room);
  CHECK(second == batch_of(2, 2));  // still the caller's, untouched
  CHECK(producer->generation() == seen);
  REQUIRE(c.try_take().has_value());
  CHECK(producer->generation() != seen);  // room came
  REQUIRE(c.try_send(second) == send_status::sent);
  // Without a no_room since, taking notifies nobody.
  const auto after = producer->generation();
  REQUIRE(c.try_take().has_value());
  CHECK(producer->generation() == after);
  // A cancel wakes the producer, and try_send says so from then on.
  element_batch third = batch_of(4, 1);
  REQUIRE(c.try_send(third) == send_status::sent);
  element_batch fourth = batch_of(5, 1);
  REQUIRE(c.try_send(fourth) == send_status::no_room);
  const auto before_cancel = producer->generation();
  c.cancel();
  CHECK(producer->generation() != before_cancel);
  CHECK(c.try_send(fourth) == send_status::cancelled);
}

namespace {

// The sequence numbers (records) and barrier ids (as -id) taken from `c` until it is empty.
std::vector<std::int64_t> take_all(local_channel& c) {
  std::vector<std::int64_t> out;
  while (auto b = c.try_take()) {
    for (const auto& e : *b) {
      if (const auto* r = std::get_if<record>(&e))
        out.push_back(r->seq);
      else
        out.push_back(-static_cast<std::int64_t>(std::get<checkpoint_barrier>(e).id));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("output gate: a full channel never blocks the gate; its backlog goes out in order, "
          "the barrier behind it") {
  // One thread does it all: with a send that waited for room this would never return.
  auto c0 = std::make_shared<local_channel>(1);
  auto c1 = std::make_shared<local_channel>(4);
  auto room = std::make_shared<task_wakeup>();
  c0->set_room_wakeup(room);
  c1->set_room_wakeup(room);
  output_gate gate(partitioner(partitioning::rebalance, 2, 128, 1), {c0, c1}, 2);
  // Rebalance from subtask 1: even seqs to channel 0, odd ones to channel 1.
  for (int i = 0; i < 12; ++i) REQUIRE(gate.emit(record{0, i, 0, {}}));
  CHECK(gate.backlogged());  // channel 0 took 1 batch of 3, channel 1 all 3
  CHECK(c0->queued_batches() == 1);
  CHECK(c1->queued_batches() == 3);
  CHECK_FALSE(gate.can_broadcast_now());
  checkpoint_barrier b;
  b.id = 7;
  REQUIRE(gate.broadcast(b));
  for (int i = 12; i < 16; ++i) REQUIRE(gate.emit(record{0, i, 0, {}}));
  REQUIRE(gate.flush());

  std::vector<std::int64_t> got0;
  std::vector<std::int64_t> got1 = take_all(*c1);
  for (int rounds = 0; rounds < 100 && gate.backlogged(); ++rounds) {
    const auto seen = room->generation();
    auto taken = take_all(*c0);
    got0.insert(got0.end(), taken.begin(), taken.end());
    if (!taken.empty()) CHECK(room->generation() != seen);  // the gate's no_room is answered
    REQUIRE(gate.drain());
    auto more = take_all(*c1);
    got1.insert(got1.end(), more.begin(), more.end());
  }
  CHECK_FALSE(gate.backlogged());
  auto rest = take_all(*c0);
  got0.insert(got0.end(), rest.begin(), rest.end());
  CHECK(got0 == std::vector<std::int64_t>{0, 2, 4, 6, 8, 10, -7, 12, 14});
  CHECK(got1 == std::vector<std::int64_t>{1, 3, 5, 7, 9, 11, -7, 13, 15});
  CHECK(gate.can_broadcast_now());
}

TEST_CASE("output gate: a cancelled channel fails emit, flush and drain") {
  auto c = std::make_shared<local_channel>(1);
  output_gate gate(partitioner(partitioning::forward, 1, 128, 0), {c}, 1);
  REQUIRE(gate.emit(record{0, 0, 0, {}}));
  REQUIRE(gate.emit(record{0, 1, 0, {}}));  // backlogged
  CHECK(gate.backlogged());
  c->cancel();
  CHECK_FALSE(gate.drain());
  auto d = std::make_shared<local_channel>(1);
  output_gate other(partitioner(partitioning::forward, 1, 128, 0), {d}, 1);
  d->cancel();
  CHECK_FALSE(other.emit(record{0, 0, 0, {}}));
}
