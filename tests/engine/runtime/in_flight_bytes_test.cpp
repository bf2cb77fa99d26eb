// The byte bound of channels (checkpoint_config::max_in_flight_bytes): local_channel waits for
// room by bytes, a record larger than the bound passes alone, output_gate cuts batches at the
// bound, and buffer_debloater turns consumed bytes into a bound, stepped by a hand clock.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "engine/runtime/buffer_debloater.hpp"
#include "engine/runtime/byte_gauge.hpp"
#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/output_gate.hpp"

using namespace snapflow;

namespace {

const std::uint64_t one_record = approximate_bytes(record{0, 0, 0, {}});

element_batch records(std::int64_t first, std::size_t n, std::size_t payload = 0) {
  element_batch b;
  for (std::size_t i = 0; i < n; ++i)
    b.push_back(record{0, first + static_cast<std::int64_t>(i), 0, std::string(payload, 'x')});
  return b;
}

element_batch barrier_batch(checkpoint_id id) {
  return element_batch{checkpoint_barrier{id, 1, {}}};
}

}  // namespace

TEST_CASE("byte bound: a channel holds at most the bound's bytes of records") {
  local_channel c(100);  // the batch count never binds here
  auto room = std::make_shared<task_wakeup>();
  c.set_room_wakeup(room);
  c.set_max_in_flight_bytes(3 * one_record);
  CHECK(c.in_flight_bytes_bound() == 3 * one_record);

  auto two = records(0, 2);
  REQUIRE(c.try_send(two) == send_status::sent);
  CHECK(c.buffered_record_bytes() == 2 * one_record);
  auto next = records(2, 2);
  CHECK(c.try_send(next) == send_status::no_room);  // 4 records would be over
  CHECK(next.size() == 2);                          // kept by the caller
  auto single = records(4, 1);
  CHECK(c.try_send(single) == send_status::sent);   // exactly at the bound
  // A barrier adds no record bytes: it goes whatever the bytes queued.
  CHECK(c.can_send_now());
  auto barrier = barrier_batch(1);
  CHECK(c.try_send(barrier) == send_status::sent);

  const auto before = room->generation();
  REQUIRE(c.try_take().has_value());  // the two records leave: room for two more
  CHECK(room->generation() == before + 1);
  CHECK(c.try_send(next) == send_status::sent);
  CHECK(c.buffered_record_bytes() == 3 * one_record);
}

TEST_CASE("byte bound: a batch larger than the bound passes alone, never deadlocks") {
  local_channel c(100);
  c.set_max_in_flight_bytes(one_record);
  auto big = records(0, 1, 10'000);  // one record far over the bound
  REQUIRE(c.try_send(big) == send_status::sent);
  auto small = records(1, 1);
  CHECK(c.try_send(small) == send_status::no_room);
  REQUIRE(c.try_take().has_value());
  CHECK(c.try_send(small) == send_status::sent);
  // Blocking send of another oversized batch waits only for the channel to empty.
  REQUIRE(c.try_take().has_value());
  CHECK(c.send(records(2, 5)));  // five records, five times the bound, into an empty channel
  CHECK(c.buffered_record_bytes() == 5 * one_record);
}

TEST_CASE("byte bound: the consumer's announced bound applies when smaller, and a larger one "
          "wakes a waiting producer") {
  local_channel c(100);
  auto room = std::make_shared<task_wakeup>();
  c.set_room_wakeup(room);
  c.set_max_in_flight_bytes(10 * one_record);
  c.announce_in_flight_bytes(2 * one_record);
  CHECK(c.in_flight_bytes_bound() == 2 * one_record);
  auto two = records(0, 2);
  REQUIRE(c.try_send(two) == send_status::sent);
  auto more = records(2, 1);
  CHECK(c.try_send(more) == send_status::no_room);
  const auto before = room->generation();
  c.announce_in_flight_bytes(4 * one_record);
  CHECK(room->generation() > before);
  CHECK(c.try_send(more) == send_status::sent);
  // Never above the configured bound, and 0 goes back to it.
  c.announce_in_flight_bytes(50 * one_record);
  CHECK(c.in_flight_bytes_bound() == 10 * one_record);
  c.announce_in_flight_bytes(0);
  CHECK(c.in_flight_bytes_bound() == 10 * one_record);
}

TEST_CASE("byte bound: output_gate cuts batches before the bound, a larger record goes alone") {
  auto c = std::make_shared<local_channel>(1000);
  c->set_max_in_flight_bytes(3 * one_record);
  output_gate gate(partitioner(partitioning::forward, 1, 128, 0), {c}, 100);
  for (int i = 0; i < 7; ++i) REQUIRE(gate.emit(record{0, i, 0, {}}));
  REQUIRE(gate.emit(record{0, 7, 0, std::string(5000, 'x')}));
  REQUIRE(gate.emit(record{0, 8, 0, {}}));
  REQUIRE(gate.flush());
  std::vector<std::size_t> sizes;
  // The channel is far from full by count; the bytes hold it back: take as it goes.
  for (int rounds = 0; rounds < 20; ++rounds) {
    while (auto b = c->try_take()) sizes.push_back(b->size());
    REQUIRE(gate.drain());
    if (!gate.backlogged()) {
      while (auto b = c->try_take()) sizes.push_back(b->size());
      break;
    }
  }
  CHECK_FALSE(gate.backlogged());
  CHECK(sizes == std::vector<std::size_t>{3, 3, 1, 1, 1});
}

TEST_CASE("debloater: the bound follows consumed throughput times the target, per channel") {
  buffer_debloater::settings s;
  s.target_us = 1'000'000;
  s.max_bytes = 1'000'000;
  s.min_bytes = 4096;
  s.channels = 2;
  s.period_us = 200'000;
  s.window = 5;
  std::int64_t now = 5'000'000;
  buffer_debloater d(s, now);
  CHECK(d.bound() == 1'000'000);  // starts at the maximum

  // Nothing before a period is over.
  d.on_consumed(100'000);
  CHECK_FALSE(d.update(now + 199'999).has_value());
  // 100 KB in 200 ms: 500 KB/s, one second of it over two channels.
  now += 200'000;
  auto b = d.update(now);
  REQUIRE(b.has_value());
  CHECK(d.throughput() == 500'000);
  CHECK(*b == 250'000);

  // The same rate again: no change to announce.
  d.on_consumed(100'000);
  now += 200'000;
  CHECK_FALSE(d.update(now).has_value());

  // A small wobble (averaged over the window) stays under the threshold.
  d.on_consumed(120'000);
  now += 200'000;
  CHECK_FALSE(d.update(now).has_value());
  CHECK(d.bound() == 250'000);
}

TEST_CASE("debloater: a slow consumer shrinks the bound to the minimum, a fast one grows it to "
          "the maximum") {
  buffer_debloater::settings s;
  s.target_us = 1'000'000;
  s.max_bytes = 64 * 1024;
  s.min_bytes = 4096;
  s.channels = 4;
  s.period_us = 100'000;
  s.window = 3;
  std::int64_t now = 0;
  buffer_debloater d(s, now);
  std::optional<std::uint64_t> last;
  for (int i = 0; i < 3; ++i) {  // 1 KB per 100 ms: 10 KB/s, 2.5 KB per channel
    d.on_consumed(1000);
    now += s.period_us;
    if (auto b = d.update(now)) last = b;
  }
  REQUIRE(last.has_value());
  CHECK(*last == 4096);
  CHECK(d.bound() == 4096);
  last.reset();
  for (int i = 0; i < 3; ++i) {  // 1 MB per 100 ms
    d.on_consumed(1'000'000);
    now += s.period_us;
    if (auto b = d.update(now)) last = b;
  }
  REQUIRE(last.has_value());
  CHECK(*last == 64 * 1024);
}

TEST_CASE("debloater: time spent waiting for input does not count as consuming time") {
  buffer_debloater::settings s;
  s.target_us = 1'000'000;
  s.max_bytes = 10'000'000;
  s.channels = 1;
  s.period_us = 200'000;
  s.window = 1;
  std::int64_t now = 0;
  buffer_debloater d(s, now);
  // 50 ms busy with 50 KB, then 150 ms idle: 1 MB/s of active time, not 250 KB/s.
  d.on_consumed(50'000);
  now += 50'000;
  d.idle_begin(now);
  now += 150'000;
  d.idle_end(now);
  auto b = d.update(now);
  REQUIRE(b.has_value());
  CHECK(d.throughput() == 1'000'000);
  CHECK(*b == 1'000'000);
  // Idle a whole period: nothing learned, the bound stays.
  d.idle_begin(now);
  now += 200'000;
  CHECK_FALSE(d.update(now).has_value());
  now += 100'000;
  d.idle_end(now);
  // 100 ms of that period was idle too: 20 KB in the other 100 ms is 200 KB/s.
  d.on_consumed(20'000);
  now += 100'000;
  b = d.update(now);
  REQUIRE(b.has_value());
  CHECK(d.throughput() == 200'000);
  CHECK(*b == 200'000);
}
