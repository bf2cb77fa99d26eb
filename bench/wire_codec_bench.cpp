// What encoding and decoding the two messages of the checkpoint round trip cost (the
// endpoints spend CPU the raw ZeroMQ ping-pong does not). Beside each, as the same-run
// baseline, plain msgpack-c packing and unpacking a map of the same keys and values with no
// envelope checks: the ratio says what snapflow's codec adds (bounds pass, field lookup,
// conversion to structs). Then the data plane's frames: a batch of records and a barrier.
#include <benchmark/benchmark.h>

#include <string>

#include <msgpack.hpp>

#include "transport/data/data_frame.hpp"
#include "transport/envelope.hpp"
#include "transport/wire_conversions.hpp"

using namespace snapflow;
using snapflow::transport::to_wire;

namespace {

const job_id bench_job = "0123456789abcdef0123456789abcdef";
const execution_attempt_id bench_attempt{{3, 7}, 2};

wire::message trigger() {
  checkpoint_options o;
  o.target_location = "/var/lib/snapflow/checkpoints/0123456789abcdef0123456789abcdef/chk-12345";
  return to_wire(bench_job, bench_attempt, 12345, 1'700'000'000'000'000, o);
}

wire::message ack() {
  checkpoint_ack a;
  a.job = bench_job;
  a.attempt = bench_attempt;
  a.id = 12345;
  a.metrics.sync_duration_us = 12;
  a.metrics.async_duration_us = 3;
  a.metrics.alignment_duration_us = 40;
  return to_wire(a);
}

void BM_encode(benchmark::State& state, wire::message (*make)()) {
  const wire::message m = make();
  for (auto _ : state) benchmark::DoNotOptimize(wire::encode(m));
}

void BM_decode(benchmark::State& state, wire::message (*make)()) {
  const std::string frame = wire::encode(make());
  for (auto _ : state) {
    auto decoded = wire::decode(frame);
    if (!decoded) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(decoded);
  }
}

// The baseline: msgpack-c alone, a generic map of the frame's own keys and values.
void BM_plain_msgpack_pack(benchmark::State& state, wire::message (*make)()) {
  const std::string frame = wire::encode(make());
  const msgpack::object_handle handle = msgpack::unpack(frame.data(), frame.size());
  for (auto _ : state) {
    msgpack::sbuffer buffer;
    msgpack::pack(buffer, handle.get());
    benchmark::DoNotOptimize(buffer.data());
  }
}

void BM_plain_msgpack_unpack(benchmark::State& state, wire::message (*make)()) {
  const std::string frame = wire::encode(make());
  for (auto _ : state) {
    msgpack::object_handle handle = msgpack::unpack(frame.data(), frame.size());
    benchmark::DoNotOptimize(handle.get());
  }
}

// The data plane's frames: a batch of 64 records (the sender's usual batch under load) and a
// frame holding one barrier, which every checkpoint sends down every channel.
data::data_frame records_frame() {
  data::data_frame f;
  f.key = {bench_job, 2, 1, 3, 0, 0};
  f.seq = 991;
  for (int i = 0; i < 64; ++i)
    f.elements.push_back(record{static_cast<std::uint64_t>(i) * 7919, 100'000 + i,
                                      static_cast<std::int64_t>(i) * 3, "payload-text"});
  return f;
}

data::data_frame barrier_frame() {
  data::data_frame f;
  f.key = {bench_job, 2, 1, 3, 0, 0};
  f.seq = 992;
  checkpoint_barrier b;
  b.id = 12345;
  b.timestamp_us = 1'700'000'000'000'000;
  f.elements.push_back(b);
  return f;
}

void BM_data_decode(benchmark::State& state, data::data_frame (*make)()) {
  const std::string frame = data::encode(make());
  for (auto _ : state) {
    auto decoded = data::decode_data_frame(frame);
    if (!decoded.ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(decoded);
  }
}

void BM_data_encode(benchmark::State& state, data::data_frame (*make)()) {
  const data::data_frame f = make();
  for (auto _ : state) benchmark::DoNotOptimize(data::encode(f));
}

}  // namespace

BENCHMARK_CAPTURE(BM_encode, trigger, &trigger);
BENCHMARK_CAPTURE(BM_plain_msgpack_pack, trigger, &trigger);
BENCHMARK_CAPTURE(BM_decode, trigger, &trigger);
BENCHMARK_CAPTURE(BM_plain_msgpack_unpack, trigger, &trigger);
BENCHMARK_CAPTURE(BM_encode, ack, &ack);
BENCHMARK_CAPTURE(BM_plain_msgpack_pack, ack, &ack);
BENCHMARK_CAPTURE(BM_decode, ack, &ack);
BENCHMARK_CAPTURE(BM_plain_msgpack_unpack, ack, &ack);
BENCHMARK_CAPTURE(BM_data_encode, records_64, &records_frame);
BENCHMARK_CAPTURE(BM_data_decode, records_64, &records_frame);
BENCHMARK_CAPTURE(BM_data_encode, barrier, &barrier_frame);
BENCHMARK_CAPTURE(BM_data_decode, barrier, &barrier_frame);

BENCHMARK_MAIN();
