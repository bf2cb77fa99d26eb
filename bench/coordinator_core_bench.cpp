// Acks per second through the sans-I/O coordinator core with stats on: one checkpoint over N
// subtasks, every subtask acks, the metadata write is confirmed, next checkpoint. Counts acks as
// items, so items_per_second is the figure to read.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "engine/checkpoint/checkpoint_coordinator_core.hpp"

using namespace snapflow;

namespace {

struct core_fixture {
  std::vector<std::unique_ptr<execution_vertex>> vertices;
  std::unique_ptr<checkpoint_coordinator_core> core;
  std::shared_ptr<checkpoint_id_counter> counter = std::make_shared<in_memory_checkpoint_id_counter>();
  job_id job = "0123456789abcdef0123456789abcdef";

  explicit core_fixture(std::uint32_t subtasks) {
    const std::uint32_t sources = std::max<std::uint32_t>(1, subtasks / 4);
    for (std::uint32_t i = 0; i < sources; ++i)
      vertices.push_back(std::make_unique<execution_vertex>(subtask_id{0, i}, sources, "source"));
    for (std::uint32_t i = 0; i < subtasks - sources; ++i)
      vertices.push_back(
          std::make_unique<execution_vertex>(subtask_id{1, i}, subtasks - sources, "op"));
    for (auto& v : vertices) v->set_state(execution_state::running);
    checkpoint_config config;
    config.interval = std::chrono::milliseconds(10);
    checkpoint_coordinator_setup s;
    s.job = job;
    s.config = config;
    for (std::uint32_t i = 0; i < sources; ++i) s.tasks_to_trigger.push_back(vertices[i].get());
    for (auto& v : vertices) {
      s.tasks_to_acknowledge.push_back(v.get());
      s.tasks_to_confirm.push_back(v.get());
    }
    s.job_dir = "bench-job";
    s.hooks = std::make_shared<master_hook_registry>();
    s.id_counter = counter;
    s.store = std::make_shared<completed_checkpoint_store>(1);
    s.stats = std::make_shared<checkpoint_stats_tracker>(10, config);
    s.failure_manager = std::make_shared<checkpoint_failure_manager>(
        0, checkpoint_failure_manager::callbacks{[](const std::string&) {},
                                                 [](const std::string&, const execution_attempt_id&) {}});
    core = std::make_unique<checkpoint_coordinator_core>(std::move(s));
  }

  // Runs the actions the way a driver would, answering id allocation at once.
  void pump(std::int64_t now) {
    while (core->has_actions())
      for (auto& a : core->take_actions())
        if (auto* alloc = std::get_if<allocate_checkpoint_id>(&a))
          core->on_checkpoint_id(alloc->request_id, counter->get_and_increment(), now);
  }
};

void BM_coordinator_acks(benchmark::State& state) {
  const auto subtasks = static_cast<std::uint32_t>(state.range(0));
  core_fixture f(subtasks);
  std::int64_t now = 1'000'000'000;
  // Pre-built acks: the benchmark measures the coordinator, not building messages.
  std::vector<checkpoint_ack> acks(f.vertices.size());
  for (std::size_t i = 0; i < f.vertices.size(); ++i) {
    acks[i].job = f.job;
    acks[i].attempt = f.vertices[i]->current_attempt();
    acks[i].state.state_size = 1024;
    acks[i].metrics = {50, 200, 10, 0};
  }
  std::int64_t processed = 0;
  for (auto _ : state) {
    f.core->request_checkpoint(checkpoint_trigger_kind::manual, ++now);
    f.pump(now);
    const checkpoint_id id = f.core->pending_ids().back();
    for (auto& ack : acks) {
      ack.id = id;
      benchmark::DoNotOptimize(f.core->on_ack(ack, ++now));
    }
    f.core->take_actions();  // the metadata write request
    f.core->on_metadata_written(id, success(), ++now);
    f.pump(now);
    f.core->take_actions();
    processed += static_cast<std::int64_t>(acks.size());
  }
  state.SetItemsProcessed(processed);
  state.counters["subtasks"] = subtasks;
}

}  // namespace

BENCHMARK(BM_coordinator_acks)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
