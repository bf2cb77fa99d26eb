// The worker's data plane: channels between subtasks of one worker are joined in memory with
// the same bound as network channels; channels to another worker still go over ZeroMQ, and a
// connection that closes breaks the channels it carried at both ends. Priority barriers overtake
// the batches a consumer has not taken, on both paths.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/snapshot_writer.hpp"
#include "engine/runtime/stream_task.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"
#include "transport/data/data_frame.hpp"
#include "transport/data/network_data_plane.hpp"

using namespace snapflow;
using namespace snapflow::data;
using namespace std::chrono_literals;

namespace {

channel_key key(std::uint32_t producer, std::uint32_t consumer, std::uint32_t attempt = 0) {
  return channel_key{"job-1", 1, producer, 2, consumer, attempt};
}

element_batch batch_of(std::int64_t first, std::size_t n) {
  element_batch b;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t seq = first + static_cast<std::int64_t>(i);
    b.emplace_back(record{static_cast<std::uint64_t>(seq % 7), seq, seq, {}});
  }
  return b;
}

std::shared_ptr<network_data_plane> make_plane(std::size_t capacity = 8) {
  data_plane_options o;
  o.channel_capacity_batches = capacity;
  auto plane = network_data_plane::create("tcp://127.0.0.1:*", o);
  REQUIRE(plane);
  return *plane;
}

// Takes one batch, waiting on the wakeup at most `within` (bounded, no sleeps).
std::optional<element_batch> take(input_channel& in, task_wakeup& wakeup,
                                  std::chrono::milliseconds within = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    const auto seen = wakeup.generation();
    if (auto b = in.try_take()) return b;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    wakeup.wait(seen, deadline);
  }
}

// Compares a taken batch with the one expected (Catch cannot decompose optional<vector<variant>>).
bool is(const std::optional<element_batch>& got, const element_batch& want) {
  return got.has_value() && *got == want;
}

// One channel between two workers' data planes (so over the network), its input's wake-up set.
struct network_channel {
  explicit network_channel(std::size_t capacity = 8)
      : producer_plane(make_plane(capacity)),
        consumer_plane(make_plane(capacity)),
        out(producer_plane->open_output(key(0, 0), consumer_plane->data_endpoint())),
        in(consumer_plane->open_input(key(0, 0), producer_plane->data_endpoint())) {
    in->set_wakeup(wakeup);
  }

  std::shared_ptr<network_data_plane> producer_plane, consumer_plane;
  std::shared_ptr<output_channel> out;
  std::shared_ptr<input_channel> in;
  std::shared_ptr<task_wakeup> wakeup = std::make_shared<task_wakeup>();
};

}  // namespace

TEST_CASE("channels between subtasks of one worker are joined in memory, whichever end opens "
          "first") {
  auto plane = make_plane();
  const std::string self = plane->data_endpoint();

  SECTION("producer first") {
    auto out = plane->open_output(key(0, 0), self);
    CHECK(plane->local_routes_waiting() == 1);
    auto in = plane->open_input(key(0, 0), self);
    CHECK(plane->local_routes_waiting() == 0);
    CHECK(dynamic_cast<local_channel*>(in.get()) != nullptr);
    REQUIRE(out->send(batch_of(0, 3)));
    CHECK(is(in->try_take(), batch_of(0, 3)));
  }
  SECTION("consumer first, and the data sent before the consumer task starts waits for it") {
    auto in = plane->open_input(key(1, 0), self);
    auto out = plane->open_output(key(1, 0), self);
    CHECK(plane->local_routes_waiting() == 0);
    REQUIRE(out->send(batch_of(10, 2)));
    REQUIRE(out->send(element_batch{end_of_input{}}));
    auto wakeup = std::make_shared<task_wakeup>();
    in->set_wakeup(wakeup);
    CHECK(is(take(*in, *wakeup), batch_of(10, 2)));
    CHECK(is(take(*in, *wakeup), element_batch{end_of_input{}}));
  }
  // Nothing went over the socket.
  CHECK(plane->counters().frames_received == 0);
}

TEST_CASE("an in-memory channel keeps the data plane's bound: the producer waits for the "
          "consumer") {
  constexpr std::size_t capacity = 2;
  auto plane = make_plane(capacity);
  const std::string self = plane->data_endpoint();
  auto out = plane->open_output(key(0, 0), self);
  auto in = plane->open_input(key(0, 0), self);
  auto* local = dynamic_cast<local_channel*>(in.get());
  REQUIRE(local != nullptr);
  CHECK(local->capacity() == capacity);
  auto wakeup = std::make_shared<task_wakeup>();
  in->set_wakeup(wakeup);

  constexpr int batches = 200;
  std::thread producer([&] {
    for (int i = 0; i < batches; ++i)
      if (!out->send(batch_of(i * 4, 4))) return;
  });
  int taken = 0;
  std::int64_t next_seq = 0;
  bool in_order = true;
  while (taken < batches) {
    auto b = take(*in, *wakeup);
    if (!b) break;
    for (const auto& e : *b) in_order = in_order && std::get<record>(e).seq == next_seq++;
    ++taken;
  }
  producer.join();
  CHECK(taken == batches);
  CHECK(in_order);
  CHECK(local->high_water_mark() <= capacity);
}

TEST_CASE("cancelling an in-memory channel wakes a producer blocked on a full buffer") {
  auto plane = make_plane(1);
  const std::string self = plane->data_endpoint();
  auto out = plane->open_output(key(0, 0), self);
  auto in = plane->open_input(key(0, 0), self);
  REQUIRE(out->send(batch_of(0, 1)));  // the buffer is full now
  std::atomic<bool> result{true};
  std::thread producer([&] { result = out->send(batch_of(1, 1)); });
  in->cancel();
  producer.join();
  CHECK_FALSE(result.load());
}

TEST_CASE("an end of an older attempt opened after the newer one gets a cancelled channel") {
  auto plane = make_plane();
  const std::string self = plane->data_endpoint();
  auto newer = plane->open_output(key(0, 0, 1), self);
  auto stale = plane->open_input(key(0, 0, 0), self);
  CHECK(dynamic_cast<local_channel&>(*stale).cancelled());
  auto in = plane->open_input(key(0, 0, 1), self);
  REQUIRE(newer->send(batch_of(0, 1)));
  CHECK(is(in->try_take(), batch_of(0, 1)));
}

TEST_CASE("a channel to another worker goes over the network") {
  network_channel c;
  CHECK(dynamic_cast<local_channel*>(c.in.get()) == nullptr);
  REQUIRE(c.out->send(batch_of(0, 5)));
  CHECK(is(take(*c.in, *c.wakeup), batch_of(0, 5)));
  CHECK(c.consumer_plane->counters().frames_received >= 1);
}

TEST_CASE("a batch longer than a frame may carry crosses the network as several frames, in "
          "order") {
  network_channel channel;
  auto& [producer_plane, consumer_plane, out, in, wakeup] = channel;
  const std::size_t n = 2 * max_elements_per_frame + 5;
  REQUIRE(out->send(batch_of(0, n)));
  element_batch got;
  int frames = 0;
  for (; frames < 64 && got.size() < n; ++frames) {
    // Generous: a frame of 16,384 elements decodes slowly under sanitizers.
    auto b = take(*in, *wakeup, 60s);
    REQUIRE(b.has_value());
    CHECK(b->size() <= max_elements_per_frame);
    got.insert(got.end(), b->begin(), b->end());
  }
  CHECK(frames >= 3);
  CHECK(got.size() == n);
  CHECK(is(got, batch_of(0, n)));
  CHECK(consumer_plane->counters().bad_frames == 0);
}

TEST_CASE("a batch over the frame size limit is split; an element that fits no frame fails the "
          "sender with the reason") {
  data_plane_options o;
  o.max_frame_bytes = 4096;
  auto producer_plane = network_data_plane::create("tcp://127.0.0.1:*", o);
  auto consumer_plane = network_data_plane::create("tcp://127.0.0.1:*", o);
  REQUIRE(producer_plane);
  REQUIRE(consumer_plane);
  auto out = (*producer_plane)->open_output(key(0, 0), (*consumer_plane)->data_endpoint());
  auto in = (*consumer_plane)->open_input(key(0, 0), (*producer_plane)->data_endpoint());
  auto wakeup = std::make_shared<task_wakeup>();
  in->set_wakeup(wakeup);

  // 8 records of 1,000 payload bytes: about 8 KB as one frame, so at least two frames.
  element_batch big;
  for (int i = 0; i < 8; ++i) big.emplace_back(record{1, i, i, std::string(1000, 'x')});
  REQUIRE(out->send(big));
  element_batch got;
  for (int frames = 0; frames < 8 && got.size() < big.size(); ++frames) {
    auto b = take(*in, *wakeup);
    REQUIRE(b.has_value());
    got.insert(got.end(), b->begin(), b->end());
  }
  CHECK(is(got, big));
  CHECK((*consumer_plane)->counters().frames_received >= 2);
  CHECK((*consumer_plane)->counters().bad_frames == 0);

  element_batch too_big;
  too_big.emplace_back(record{1, 9, 9, std::string(5000, 'y')});
  CHECK_THROWS_WITH(out->send(too_big),
                    Catch::Contains("over the frame limit of 4096 bytes"));
}

TEST_CASE("a trickle of batches gets a credit per half window, and a producer never waits for "
          "good on a credit that was held back") {
  const std::size_t capacity = GENERATE(1, 2, 3, 8);
  CAPTURE(capacity);
  network_channel channel(capacity);
  auto& [producer_plane, consumer_plane, out, in, wakeup] = channel;

  // One batch at a time, each taken before the next goes: a trickle.
  const std::int64_t trickle = 40;
  for (std::int64_t i = 0; i < trickle; ++i) {
    REQUIRE(out->send(batch_of(i, 1)));
    REQUIRE(is(take(*in, *wakeup), batch_of(i, 1)));
  }
  // At most one credit per half window (fewer when the I/O thread's turn covers more takes);
  // one per batch before credits were held back.
  const std::uint64_t half = std::max<std::size_t>(1, capacity / 2);
  CHECK(consumer_plane->counters().credits_sent <= trickle / half);

  // Bursts of a whole window and more, the consumer taking everything only once the producer
  // is stuck: each burst must get through, so a held-back credit never stalls the producer.
  std::atomic<std::int64_t> sent{trickle};
  std::thread producer([&] {
    for (std::int64_t i = trickle; i < trickle + 200; ++i) {
      if (!out->send(batch_of(i, 1))) return;
      sent = i + 1;
    }
  });
  std::int64_t next = trickle;
  for (int rounds = 0; rounds < 100'000 && next < trickle + 200; ++rounds) {
    auto b = take(*in, *wakeup, 10s);
    if (!b) break;
    REQUIRE(is(b, batch_of(next, 1)));
    ++next;
  }
  CHECK(next == trickle + 200);
  out->cancel();
  producer.join();
  CHECK(sent.load() == trickle + 200);
  // The producer reads credits only when its window is used up, yet never sent beyond it: the
  // consumer would have counted and dropped such a batch.
  CHECK(consumer_plane->counters().overflow_batches == 0);
}

TEST_CASE("a producer whose window is used up cannot send now, and can once the consumer took "
          "its batches") {
  const std::size_t capacity = 2;
  network_channel channel(capacity);
  auto& [producer_plane, consumer_plane, out, in, wakeup] = channel;

  REQUIRE(out->send(batch_of(0, 1)));
  REQUIRE(out->send(batch_of(1, 1)));
  // Nothing taken yet, so no credit can have come: the window is used up.
  CHECK_FALSE(out->can_send_now());
  REQUIRE(is(take(*in, *wakeup), batch_of(0, 1)));
  REQUIRE(is(take(*in, *wakeup), batch_of(1, 1)));
  // The credit for them travels back; the producer picks it up when it asks.
  bool free_again = false;
  for (int i = 0; i < 1000 && !free_again; ++i) {
    free_again = out->can_send_now();
    if (!free_again) std::this_thread::sleep_for(5ms);
  }
  CHECK(free_again);
  REQUIRE(out->send(batch_of(2, 1)));
  REQUIRE(is(take(*in, *wakeup), batch_of(2, 1)));
  CHECK(consumer_plane->counters().overflow_batches == 0);
}

namespace {

// One channel between two workers whose frame limits disagree: the consumer refuses frames over
// 4096 bytes, the producer sends up to 8192 (ZeroMQ lets up to twice the consumer's limit
// through, so the connection stays). A frame of a 5,000-byte record is lost on the way.
struct mismatched_limits {
  std::shared_ptr<network_data_plane> producer_plane = plane_with_limit(8192);
  std::shared_ptr<network_data_plane> consumer_plane = plane_with_limit(4096);
  std::shared_ptr<output_channel> out =
      producer_plane->open_output(key(0, 0), consumer_plane->data_endpoint());
  std::shared_ptr<input_channel> in =
      consumer_plane->open_input(key(0, 0), producer_plane->data_endpoint());
  std::shared_ptr<task_wakeup> wakeup = std::make_shared<task_wakeup>();

  mismatched_limits() { in->set_wakeup(wakeup); }

  static std::shared_ptr<network_data_plane> plane_with_limit(std::size_t max_frame_bytes) {
    data_plane_options o;
    o.max_frame_bytes = max_frame_bytes;
    auto plane = network_data_plane::create("tcp://127.0.0.1:*", o);
    REQUIRE(plane);
    return *plane;
  }

  static element_batch lost_batch(std::int64_t seq) {
    element_batch b;
    b.emplace_back(record{1, seq, 0, std::string(5000, 'x')});
    return b;
  }

  // Waits (bounded) until the input says it is broken, checking it delivers nothing meanwhile.
  std::optional<std::string> wait_broken() {
    std::optional<std::string> why;
    for (int rounds = 0; rounds < 10'000 && !why; ++rounds) {
      const auto seen = wakeup->generation();
      CHECK_FALSE(in->try_take().has_value());
      why = in->broken();
      if (!why) wakeup->wait(seen, std::chrono::steady_clock::now() + 10ms);
    }
    return why;
  }
};

}  // namespace

TEST_CASE("a credit held back goes anyway when the frames that would have released it were "
          "lost, and the loss breaks the channel") {
  mismatched_limits c;
  // 3 batches taken: under half the window (8), so their credit is held back.
  for (std::int64_t i = 0; i < 3; ++i) {
    REQUIRE(c.out->send(batch_of(i, 1)));
    REQUIRE(is(take(*c.in, *c.wakeup), batch_of(i, 1)));
  }
  // 5 frames the consumer refuses: the producer's window is used up, and nothing that arrives
  // will ever reach half a window past the last credit.
  for (std::int64_t i = 0; i < 5; ++i) REQUIRE(c.out->send(mismatched_limits::lost_batch(100 + i)));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (c.consumer_plane->counters().bad_frames < 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  REQUIRE(c.consumer_plane->counters().bad_frames == 5);

  // The held credit (3) reaches the producer: the next batch goes, not stalled for good.
  std::atomic<bool> sent{false};
  std::thread producer([&] { sent = c.out->send(batch_of(50, 1)); });
  // It arrives as batch 8 where 3 was due: the channel is broken, and delivers nothing more.
  const auto why = c.wait_broken();
  c.out->cancel();
  producer.join();
  CHECK(sent.load());
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("batch 8 arrived where 3 was due"));
  CHECK(c.consumer_plane->counters().sequence_gaps == 1);
}

TEST_CASE("batches before a loss are delivered, then the channel is broken") {
  mismatched_limits c;
  REQUIRE(c.out->send(batch_of(0, 2)));
  REQUIRE(c.out->send(mismatched_limits::lost_batch(2)));  // refused by the consumer
  REQUIRE(c.out->send(batch_of(3, 2)));                    // reveals the gap
  // The batch before the loss is taken first; only then does the channel say it is broken.
  auto first = take(*c.in, *c.wakeup);
  CHECK(is(first, batch_of(0, 2)));
  const auto why = c.wait_broken();
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("batch 2 arrived where 1 was due"));
}

namespace {

// Waits (bounded) until `in` says it is broken, taking (and returning) what it delivers first.
std::optional<std::string> wait_until_broken(input_channel& in, task_wakeup& wakeup,
                                             std::vector<element_batch>* taken = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto seen = wakeup.generation();
    if (auto b = in.try_take()) {
      if (taken != nullptr) taken->push_back(std::move(*b));
      continue;
    }
    if (auto why = in.broken()) return why;
    wakeup.wait(seen, std::chrono::steady_clock::now() + 10ms);
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a producer's connection that closes before its end of input breaks the channel, "
          "after what arrived before the close") {
  network_channel c;
  REQUIRE(c.out->send(batch_of(0, 3)));
  REQUIRE(c.out->send(batch_of(3, 3)));
  // Its worker dies: the kernel closes the socket, which is what dropping the channel does.
  c.out.reset();
  std::vector<element_batch> taken;
  const auto why = wait_until_broken(*c.in, *c.wakeup, &taken);
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("closed before its end of input"));
  CHECK_THAT(*why, Catch::Contains(c.producer_plane->data_endpoint()));
  // Nothing that arrived before the close is lost.
  REQUIRE(taken.size() == 2);
  CHECK(taken[0] == batch_of(0, 3));
  CHECK(taken[1] == batch_of(3, 3));
  const auto counters = c.consumer_plane->counters();
  CHECK(counters.connections_closed == 1);
  CHECK(counters.channels_lost == 1);
}

TEST_CASE("a connection that closes after the end of input breaks nothing") {
  network_channel c;
  element_batch last = batch_of(0, 2);
  last.emplace_back(end_of_input{});
  REQUIRE(c.out->send(last));
  CHECK(is(take(*c.in, *c.wakeup), last));
  c.out.reset();
  // The closure is counted once its event is read; the channel stays whole.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (c.consumer_plane->counters().connections_closed == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  REQUIRE(c.consumer_plane->counters().connections_closed == 1);
  // One more turn of the plane's thread (closures are applied a turn after they are read).
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(c.in->broken().has_value());
  CHECK(c.consumer_plane->counters().channels_lost == 0);
}

TEST_CASE("a producer's crash breaks only the channels its connections carried") {
  auto consumer_plane = make_plane();
  auto dying = make_plane();
  auto healthy = make_plane();
  auto dying_out = dying->open_output(key(0, 0), consumer_plane->data_endpoint());
  auto healthy_out = healthy->open_output(key(1, 0), consumer_plane->data_endpoint());
  auto dying_in = consumer_plane->open_input(key(0, 0), dying->data_endpoint());
  auto healthy_in = consumer_plane->open_input(key(1, 0), healthy->data_endpoint());
  auto dying_wakeup = std::make_shared<task_wakeup>();
  auto healthy_wakeup = std::make_shared<task_wakeup>();
  dying_in->set_wakeup(dying_wakeup);
  healthy_in->set_wakeup(healthy_wakeup);
  REQUIRE(dying_out->send(batch_of(0, 1)));
  REQUIRE(healthy_out->send(batch_of(10, 1)));
  CHECK(is(take(*dying_in, *dying_wakeup), batch_of(0, 1)));
  CHECK(is(take(*healthy_in, *healthy_wakeup), batch_of(10, 1)));
  // The whole producing worker goes: its channel and its data endpoint.
  dying_out.reset();
  dying.reset();
  REQUIRE(wait_until_broken(*dying_in, *dying_wakeup).has_value());
  // The other producer's channel carries on.
  REQUIRE(healthy_out->send(batch_of(11, 1)));
  CHECK(is(take(*healthy_in, *healthy_wakeup), batch_of(11, 1)));
  CHECK_FALSE(healthy_in->broken().has_value());
}

TEST_CASE("a producer waiting for credit from a consumer whose worker died fails with the "
          "reason, not at a timeout") {
  network_channel c(2);
  // The consumer takes nothing: two batches use up the window.
  REQUIRE(c.out->send(batch_of(0, 1)));
  REQUIRE(c.out->send(batch_of(1, 1)));
  // Both arrived, so the connection was made (a connection never made is retried, not lost).
  const auto arrived = std::chrono::steady_clock::now() + 10s;
  while (c.consumer_plane->counters().frames_received < 2 &&
         std::chrono::steady_clock::now() < arrived)
    std::this_thread::sleep_for(1ms);
  REQUIRE(c.consumer_plane->counters().frames_received == 2);
  std::atomic<bool> done{false};
  std::optional<std::string> failure;
  std::thread producer([&] {
    try {
      (void)c.out->send(batch_of(2, 1));
    } catch (const channel_failure& e) {
      failure = e.what();
    }
    done = true;
  });
  // The consuming worker dies: its channel and its data endpoint go.
  c.in.reset();
  c.consumer_plane.reset();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  if (!done.load()) c.out->cancel();  // so that a failing check does not hang the test
  producer.join();
  REQUIRE(failure.has_value());
  CHECK_THAT(*failure, Catch::Contains("the connection to its consumer's worker"));
  CHECK_THAT(*failure, Catch::Contains("closed"));
}

// Priority batches (output_channel::send_priority): barriers that overtake what the consumer
// has not taken, without credit.

namespace {

element_batch barrier_batch(checkpoint_id id) {
  checkpoint_barrier b;
  b.id = id;
  b.options.unaligned = true;
  return element_batch{b};
}

// Polls `condition` (bounded); the pause only paces the polling.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds within = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A DEALER that writes the data plane's frames by hand, as a producer in another process could.
struct raw_producer {
  explicit raw_producer(const std::string& endpoint) : socket(context, zmq::socket_type::dealer) {
    socket.set(zmq::sockopt::linger, 0);
    socket.connect(endpoint);
  }
  void send_bytes(const std::string& frame) {
    REQUIRE(socket.send(zmq::buffer(frame), zmq::send_flags::dontwait));
  }
  void send(const channel_key& k, std::uint64_t seq, element_batch batch, bool priority = false) {
    send_bytes(encode(data_frame{k, seq, std::move(batch), priority}));
  }
  zmq::context_t context{1};
  zmq::socket_t socket;
};

}  // namespace

TEST_CASE("a priority barrier reaches a consumer that takes nothing from a producer out of "
          "credit, and overtakes exactly the batches queued") {
  const std::size_t capacity = GENERATE(1, 2, 4);
  CAPTURE(capacity);
  network_channel c(capacity);
  for (std::size_t i = 0; i < capacity; ++i) REQUIRE(c.out->send(batch_of(10 * i, 3)));
  REQUIRE(eventually([&] { return c.consumer_plane->counters().frames_received == capacity; }));
  CHECK_FALSE(c.out->can_send_now());  // the window is used up: send() would wait
  CHECK_FALSE(c.in->has_priority_barrier());

  REQUIRE(c.out->send_priority(barrier_batch(7)));  // returns without any credit
  REQUIRE(eventually([&] { return c.in->has_priority_barrier(); }));
  auto found = c.in->take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->priority);
  CHECK(found->barrier == std::get<checkpoint_barrier>(barrier_batch(7).front()));
  REQUIRE(found->ahead.size() == capacity);
  for (std::size_t i = 0; i < capacity; ++i) CHECK(found->ahead[i] == batch_of(10 * i, 3));
  CHECK_FALSE(c.in->has_priority_barrier());
  CHECK_FALSE(c.in->take_first_barrier().has_value());

  // The batches it overtook are still there, in order.
  for (std::size_t i = 0; i < capacity; ++i) CHECK(is(c.in->try_take(), batch_of(10 * i, 3)));
  CHECK_FALSE(c.in->try_take().has_value());

  // The credit for them comes back (part of it may be held back a moment); the priority batch
  // neither took nor returned any: the producer has exactly one window again, no more.
  for (std::size_t i = 0; i < capacity; ++i) {
    REQUIRE(eventually([&] { return c.out->can_send_now(); }));
    REQUIRE(c.out->send(batch_of(100 + 10 * i, 1)));
  }
  CHECK_FALSE(c.out->can_send_now());
  for (std::size_t i = 0; i < capacity; ++i)
    CHECK(is(take(*c.in, *c.wakeup), batch_of(100 + 10 * i, 1)));
  const auto counters = c.consumer_plane->counters();
  CHECK(counters.overflow_batches == 0);
  CHECK(counters.priority_refused == 0);
  CHECK(counters.sequence_gaps == 0);
  CHECK(counters.bad_frames == 0);
}

TEST_CASE("a priority barrier the consumer does not look for comes out of try_take in its "
          "place, and the batches after it follow") {
  network_channel c(4);
  REQUIRE(c.out->send(batch_of(0, 1)));
  REQUIRE(c.out->send_priority(barrier_batch(1)));
  REQUIRE(c.out->send(batch_of(1, 1)));
  CHECK(is(take(*c.in, *c.wakeup), batch_of(0, 1)));
  CHECK(is(take(*c.in, *c.wakeup), barrier_batch(1)));
  CHECK(is(take(*c.in, *c.wakeup), batch_of(1, 1)));
  CHECK_FALSE(c.in->has_priority_barrier());
  CHECK(c.consumer_plane->counters().sequence_gaps == 0);
}

TEST_CASE("a barrier sent by send is found by take_first_barrier, and taking it returns its "
          "credit") {
  network_channel c(2);
  REQUIRE(c.out->send(batch_of(0, 2)));
  REQUIRE(c.out->send(barrier_batch(4)));
  CHECK_FALSE(c.out->can_send_now());
  REQUIRE(eventually([&] { return c.consumer_plane->counters().frames_received == 2; }));
  CHECK_FALSE(c.in->has_priority_barrier());
  // A frame is counted before it is delivered: look until the barrier is there (a look that
  // finds none takes nothing).
  std::optional<queued_barrier> found;
  REQUIRE(eventually([&] {
    found = c.in->take_first_barrier();
    return found.has_value();
  }));
  CHECK_FALSE(found->priority);
  CHECK(found->barrier.id == 4);
  REQUIRE(found->ahead.size() == 1);
  CHECK(found->ahead[0] == batch_of(0, 2));
  CHECK(is(c.in->try_take(), batch_of(0, 2)));
  CHECK_FALSE(c.in->try_take().has_value());
  // Both batches were taken, the barrier too: a whole window of credit.
  REQUIRE(eventually([&] { return c.out->can_send_now(); }));
  REQUIRE(c.out->send(batch_of(2, 1)));
  REQUIRE(eventually([&] { return c.out->can_send_now(); }));
  REQUIRE(c.out->send(batch_of(3, 1)));
  CHECK_FALSE(c.out->can_send_now());
  CHECK(is(take(*c.in, *c.wakeup), batch_of(2, 1)));
  CHECK(is(take(*c.in, *c.wakeup), batch_of(3, 1)));
}

TEST_CASE("a consumer keeps at most max_priority_batches priority batches per channel and "
          "refuses more, counted") {
  auto consumer_plane = make_plane(2);
  raw_producer producer(consumer_plane->data_endpoint());
  const auto n = static_cast<checkpoint_id>(max_priority_batches);

  SECTION("deployed consumer") {
    auto in = consumer_plane->open_input(key(0, 0), {"tcp://127.0.0.1:1"});
    producer.send(key(0, 0), 0, batch_of(0, 1));
    producer.send(key(0, 0), 1, batch_of(1, 1));
    for (checkpoint_id id = 1; id <= n + 1; ++id)
      producer.send(key(0, 0), 2, barrier_batch(id), true);
    REQUIRE(eventually([&] {
      return consumer_plane->counters().frames_received == static_cast<std::uint64_t>(n) + 3;
    }));
    CHECK(consumer_plane->counters().priority_refused == 1);
    CHECK(consumer_plane->counters().overflow_batches == 0);
    for (checkpoint_id id = 1; id <= n; ++id) {
      auto found = in->take_first_barrier();
      REQUIRE(found.has_value());
      CHECK(found->barrier.id == id);
      CHECK(found->ahead.size() == 2);
    }
    CHECK_FALSE(in->has_priority_barrier());
    CHECK_FALSE(in->take_first_barrier().has_value());
    // Room again: the next one is kept.
    producer.send(key(0, 0), 2, barrier_batch(n + 2), true);
    REQUIRE(eventually([&] { return in->has_priority_barrier(); }));
    CHECK(in->take_first_barrier()->barrier.id == n + 2);
  }
  SECTION("before the consumer is deployed") {
    producer.send(key(0, 0), 0, batch_of(0, 1));
    for (checkpoint_id id = 1; id <= n + 1; ++id)
      producer.send(key(0, 0), 1, barrier_batch(id), true);
    REQUIRE(eventually([&] {
      return consumer_plane->counters().frames_received == static_cast<std::uint64_t>(n) + 2;
    }));
    CHECK(consumer_plane->counters().priority_refused == 1);
    auto in = consumer_plane->open_input(key(0, 0), {"tcp://127.0.0.1:1"});
    CHECK(in->has_priority_barrier());
    auto found = in->take_first_barrier();
    REQUIRE(found.has_value());
    CHECK(found->barrier.id == 1);
    REQUIRE(found->ahead.size() == 1);
    CHECK(found->ahead[0] == batch_of(0, 1));
    CHECK(is(in->try_take(), batch_of(0, 1)));
    for (checkpoint_id id = 2; id <= n; ++id) CHECK(is(in->try_take(), barrier_batch(id)));
    CHECK_FALSE(in->try_take().has_value());
  }
  CHECK(consumer_plane->counters().sequence_gaps == 0);
}

TEST_CASE("a priority frame that is not a single barrier is refused as a bad frame, and breaks "
          "nothing") {
  auto consumer_plane = make_plane(4);
  auto in = consumer_plane->open_input(key(0, 0), {"tcp://127.0.0.1:1"});
  raw_producer producer(consumer_plane->data_endpoint());
  element_batch two_barriers = barrier_batch(1);
  two_barriers.push_back(barrier_batch(2).front());
  element_batch barrier_and_record = barrier_batch(3);
  barrier_and_record.push_back(record{1, 2, 3, {}});
  producer.send(key(0, 0), 0, two_barriers, true);
  producer.send(key(0, 0), 0, barrier_and_record, true);
  producer.send(key(0, 0), 0, batch_of(0, 1), true);
  producer.send(key(0, 0), 0, element_batch{end_of_input{}}, true);
  producer.send(key(0, 0), 0, element_batch{}, true);
  // Then the channel's first batch: priority frames take no sequence number, so no gap.
  producer.send(key(0, 0), 0, batch_of(5, 2));
  REQUIRE(eventually([&] { return consumer_plane->counters().frames_received == 6; }));
  auto wakeup = std::make_shared<task_wakeup>();
  in->set_wakeup(wakeup);
  CHECK(is(take(*in, *wakeup), batch_of(5, 2)));
  CHECK_FALSE(in->has_priority_barrier());
  CHECK_FALSE(in->broken().has_value());
  const auto counters = consumer_plane->counters();
  CHECK(counters.bad_frames == 5);
  CHECK(counters.sequence_gaps == 0);
  CHECK(counters.priority_refused == 0);
}

TEST_CASE("priority frames take no sequence number: a batch lost before one still shows as a "
          "gap") {
  auto consumer_plane = make_plane(4);
  auto in = consumer_plane->open_input(key(0, 0), {"tcp://127.0.0.1:1"});
  auto wakeup = std::make_shared<task_wakeup>();
  in->set_wakeup(wakeup);
  raw_producer producer(consumer_plane->data_endpoint());

  SECTION("in order: the priority batch carries the next batch's number") {
    producer.send(key(0, 0), 0, batch_of(0, 1));
    producer.send(key(0, 0), 1, barrier_batch(1), true);
    producer.send(key(0, 0), 1, batch_of(1, 1));
    producer.send(key(0, 0), 2, barrier_batch(2), true);
    producer.send(key(0, 0), 2, batch_of(2, 1));
    REQUIRE(eventually([&] { return consumer_plane->counters().frames_received == 5; }));
    auto found = in->take_first_barrier();
    REQUIRE(found.has_value());
    CHECK(found->barrier.id == 1);
    CHECK(found->ahead.size() == 1);
    CHECK(is(in->try_take(), batch_of(0, 1)));
    CHECK(is(in->try_take(), batch_of(1, 1)));
    CHECK(is(in->try_take(), barrier_batch(2)));
    CHECK(is(in->try_take(), batch_of(2, 1)));
    CHECK(consumer_plane->counters().sequence_gaps == 0);
    CHECK_FALSE(in->broken().has_value());
  }
  SECTION("batch 1 lost before a priority batch") {
    producer.send(key(0, 0), 0, batch_of(0, 1));
    producer.send(key(0, 0), 2, barrier_batch(1), true);
    const auto why = wait_until_broken(*in, *wakeup);
    REQUIRE(why.has_value());
    CHECK_THAT(*why, Catch::Contains("batch 2 arrived where 1 was due"));
    CHECK(consumer_plane->counters().sequence_gaps == 1);
    CHECK_FALSE(in->has_priority_barrier());
  }
}

TEST_CASE("a priority batch of an earlier attempt is dropped as stale") {
  auto consumer_plane = make_plane(4);
  auto in = consumer_plane->open_input(key(0, 0, 1), {"tcp://127.0.0.1:1"});
  raw_producer producer(consumer_plane->data_endpoint());
  producer.send(key(0, 0, 0), 0, barrier_batch(1), true);
  producer.send(key(0, 0, 1), 0, barrier_batch(2), true);
  REQUIRE(eventually([&] { return consumer_plane->counters().frames_received == 2; }));
  CHECK(consumer_plane->counters().stale_batches == 1);
  auto found = in->take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->barrier.id == 2);
  CHECK_FALSE(in->take_first_barrier().has_value());
}

TEST_CASE("in memory, a priority barrier overtakes a full channel as over the network") {
  constexpr std::size_t capacity = 2;
  auto plane = make_plane(capacity);
  const std::string self = plane->data_endpoint();
  auto out = plane->open_output(key(0, 0), self);
  auto in = plane->open_input(key(0, 0), self);
  REQUIRE(dynamic_cast<local_channel*>(in.get()) != nullptr);
  auto wakeup = std::make_shared<task_wakeup>();
  in->set_wakeup(wakeup);
  REQUIRE(out->send(batch_of(0, 2)));
  REQUIRE(out->send(batch_of(2, 2)));
  CHECK_FALSE(out->can_send_now());
  const auto seen = wakeup->generation();
  REQUIRE(out->send_priority(barrier_batch(3)));
  CHECK(wakeup->generation() != seen);
  CHECK(in->has_priority_barrier());
  auto found = in->take_first_barrier();
  REQUIRE(found.has_value());
  CHECK(found->priority);
  CHECK(found->barrier.id == 3);
  REQUIRE(found->ahead.size() == 2);
  CHECK(found->ahead[0] == batch_of(0, 2));
  CHECK(found->ahead[1] == batch_of(2, 2));
  CHECK_FALSE(out->can_send_now());  // the barrier freed no room
  CHECK(is(in->try_take(), batch_of(0, 2)));
  CHECK(is(in->try_take(), batch_of(2, 2)));
  CHECK(out->can_send_now());
  in->cancel();
  CHECK_FALSE(out->send_priority(barrier_batch(4)));
  CHECK(plane->counters().frames_received == 0);
}

TEST_CASE("send_priority on a cancelled network channel returns false; after its consumer's "
          "connection closed it fails with the reason") {
  network_channel c(2);
  REQUIRE(c.out->send(batch_of(0, 1)));
  REQUIRE(eventually([&] { return c.consumer_plane->counters().frames_received == 1; }));

  SECTION("cancelled") {
    c.out->cancel();
    CHECK_FALSE(c.out->send_priority(barrier_batch(1)));
  }
  SECTION("consumer gone") {
    c.in.reset();
    c.consumer_plane.reset();
    // The closure reaches the producer's monitor soon; send_priority then throws.
    bool failed = false;
    for (int i = 0; i < 10'000 && !failed; ++i) {
      try {
        (void)c.out->send_priority(barrier_batch(i + 1));
        std::this_thread::sleep_for(1ms);
      } catch (const channel_failure& e) {
        failed = true;
        CHECK_THAT(e.what(), Catch::Contains("the connection to its consumer's worker"));
      }
    }
    CHECK(failed);
  }
}

TEST_CASE("network output: try_send without credit keeps the batch, and the credit coming back "
          "wakes the producer") {
  network_channel c(2);
  auto producer = std::make_shared<task_wakeup>();
  c.out->set_room_wakeup(producer);
  element_batch first = batch_of(0, 1);
  element_batch second = batch_of(1, 1);
  REQUIRE(c.out->try_send(first) == send_status::sent);
  REQUIRE(c.out->try_send(second) == send_status::sent);
  element_batch third = batch_of(2, 1);
  const auto seen = producer->generation();
  REQUIRE(c.out->try_send(third) == send_status::no_room);  // the window is used up
  CHECK(third == batch_of(2, 1));                            // still the caller's
  // The consumer takes both: their credit wakes the producer, which never polls its socket.
  CHECK(is(take(*c.in, *c.wakeup), batch_of(0, 1)));
  CHECK(is(take(*c.in, *c.wakeup), batch_of(1, 1)));
  producer->wait(seen, std::chrono::steady_clock::now() + 10s);
  REQUIRE(producer->generation() != seen);
  // A wake-up may come before the credit itself (the socket heard something else first): the
  // producer tries again, which watches again.
  send_status s = send_status::no_room;
  for (int rounds = 0; rounds < 100 && s == send_status::no_room; ++rounds) {
    const auto before = producer->generation();
    s = c.out->try_send(third);
    if (s == send_status::no_room)
      producer->wait(before, std::chrono::steady_clock::now() + 10s);
  }
  REQUIRE(s == send_status::sent);
  CHECK(is(take(*c.in, *c.wakeup), batch_of(2, 1)));

  // Out of credit again: a cancel wakes the producer, and try_send says so.
  element_batch more = batch_of(3, 1);
  for (int rounds = 0; rounds < 100; ++rounds) {
    const auto r = c.out->try_send(more);
    if (r == send_status::no_room) break;
    REQUIRE(r == send_status::sent);
    more = batch_of(4 + rounds, 1);
  }
  const auto before_cancel = producer->generation();
  c.out->cancel();
  CHECK(producer->generation() != before_cancel);
  CHECK(c.out->try_send(more) == send_status::cancelled);
  CHECK(c.consumer_plane->counters().overflow_batches == 0);
}

TEST_CASE("network output: a source out of credit serves a trigger, goes on in order when the "
          "consumer takes again, and ends on cancel") {
  using namespace snapflow::runtime_test;
  network_channel c(2);
  temp_folder dir;
  auto responder = std::make_shared<recording_responder>();
  auto listener = std::make_shared<recording_listener>();
  stream_task_config config;
  config.job = "job";
  config.vertex = make_vertex("sequence_source", {{"count", "100000"}, {"keys", "2"}});
  config.attempt = {{config.vertex.id, 0}, 0};
  config.role = operator_role::source;
  config.responder = responder;
  config.listener = listener;
  config.writer = std::make_shared<snapshot_writer>(1);
  config.outputs.push_back({partitioning::forward, 128, {c.out}});
  config.batch_size = 4;
  // A wake-up the data plane missed would show: the task looks again by itself after an hour.
  config.idle_recheck = std::chrono::hours(1);
  stream_task task(std::move(config));
  task.start();
  REQUIRE(listener->wait_for_state(execution_state::running));
  // Nothing is taken: the window of two batches is soon used up.
  REQUIRE(eventually([&] { return c.consumer_plane->counters().frames_received == 2; }));
  REQUIRE(task.idle_after_turn());
  checkpoint_options options;
  options.target_location = (dir.path() / "chk-1").string();
  task.trigger_checkpoint(1, 1, options);
  REQUIRE(responder->wait_for(1));  // served while out of credit

  // Taking returns credit; the plane wakes the task, which goes on: records in order, the
  // barrier among them once.
  std::int64_t next = 0;
  int barriers = 0;
  while (next < 200) {
    auto b = take(*c.in, *c.wakeup);
    REQUIRE(b.has_value());
    for (const auto& e : *b) {
      if (std::holds_alternative<checkpoint_barrier>(e)) {
        REQUIRE(is_single_barrier(*b));
        ++barriers;
        continue;
      }
      CHECK(std::get<record>(e).seq == next);
      ++next;
    }
  }
  CHECK(barriers == 1);
  // Out of credit again: a cancel ends it.
  REQUIRE(task.idle_after_turn());
  task.cancel();
  REQUIRE(listener->wait_for_state(execution_state::canceled));
  task.join();
  CHECK(c.consumer_plane->counters().overflow_batches == 0);
}

TEST_CASE("network byte bound: the producer holds back a batch that would take the records its "
          "consumer holds over the bound, and goes on once they were taken") {
  network_channel c(100);  // the batch count never binds here
  const std::uint64_t one = approximate_bytes(record{0, 0, 0, {}});
  c.out->set_max_in_flight_bytes(3 * one);
  c.in->set_max_in_flight_bytes(3 * one);
  CHECK(c.out->in_flight_bytes_bound() == 3 * one);
  auto producer = std::make_shared<task_wakeup>();
  c.out->set_room_wakeup(producer);
  element_batch first = batch_of(0, 2);
  REQUIRE(c.out->try_send(first) == send_status::sent);
  element_batch second = batch_of(2, 2);
  CHECK(c.out->try_send(second) == send_status::no_room);  // 4 records would be over
  CHECK(second == batch_of(2, 2));
  CHECK(c.out->can_send_now());  // a barrier adds no record bytes
  CHECK(is(take(*c.in, *c.wakeup), batch_of(0, 2)));
  // Everything that arrived was taken: under a byte bound the credit goes at once.
  send_status s = send_status::no_room;
  for (int rounds = 0; rounds < 100 && s == send_status::no_room; ++rounds) {
    const auto before = producer->generation();
    s = c.out->try_send(second);
    if (s == send_status::no_room) producer->wait(before, std::chrono::steady_clock::now() + 10s);
  }
  REQUIRE(s == send_status::sent);
  CHECK(is(take(*c.in, *c.wakeup), batch_of(2, 2)));
  // A batch over the bound goes alone into an empty channel.
  element_batch big = batch_of(4, 10);
  s = send_status::no_room;
  for (int rounds = 0; rounds < 100 && s == send_status::no_room; ++rounds) {
    const auto before = producer->generation();
    s = c.out->try_send(big);
    if (s == send_status::no_room) producer->wait(before, std::chrono::steady_clock::now() + 10s);
  }
  REQUIRE(s == send_status::sent);
  CHECK(is(take(*c.in, *c.wakeup), batch_of(4, 10)));
  CHECK(c.consumer_plane->counters().overflow_batches == 0);
}

TEST_CASE("network byte bound: the consumer's announced bound reaches the producer in a credit") {
  network_channel c(100);
  const std::uint64_t one = approximate_bytes(record{0, 0, 0, {}});
  c.out->set_max_in_flight_bytes(100 * one);
  c.in->set_max_in_flight_bytes(100 * one);
  // The consumer learns its producer with the first frame; the announcement follows in a credit.
  REQUIRE(c.out->send(batch_of(0, 1)));
  REQUIRE(is(take(*c.in, *c.wakeup), batch_of(0, 1)));
  c.in->announce_in_flight_bytes(2 * one);
  // Under a byte bound the producer reads its credits before every batch with records.
  std::int64_t next = 1;
  CHECK(eventually([&] {
    element_batch b = batch_of(next, 1);
    if (c.out->try_send(b) == send_status::sent) ++next;
    while (c.in->try_take()) {
    }
    return c.out->in_flight_bytes_bound() == 2 * one;
  }));
  CHECK(c.consumer_plane->counters().overflow_batches == 0);
}
