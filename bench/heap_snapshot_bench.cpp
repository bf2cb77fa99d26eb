// The hashmap backend's checkpoint cost on the task thread: the synchronous part of a
// copy-on-write snapshot beside the deep copy the backend used to take, at a given size of
// keyed state, and what the task copies when 1% of the keys change while a snapshot is alive.
//
//   heap_snapshot_bench [MiB ...]      (default: 64 1024)
//
// State: every key has a value ("sum") and a map ("words") of two 24-byte keys; its size is the
// payload (keys, values, map keys), which is also what copy_stats counts as copied bytes.
// The deep copy is of the neutral key_group_state layout, the very structure the backend held
// and copied per key group before. One subtask owning all 128 key groups.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "engine/state/key_groups.hpp"
#include "engine/state/heap_keyed_state_backend.hpp"

using namespace snapflow;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::uint32_t max_par = 128;
constexpr std::size_t payload_per_key = 16 + 8 + 2 * (24 + 8);

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

// CPU time of this thread: the share of a wall-clock timing this thread actually ran, on a
// machine where it may be descheduled.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// Has glibc do now the work free() left for later: merging freed small blocks and sorting the
// unsorted list, at most 10,000 blocks per large allocation, which would otherwise land in
// whatever allocates next (the next timing). Enough large allocations for a released
// snapshot of a few hundred thousand blocks.
void settle_allocator() {
  std::vector<void*> blocks(256);
  for (auto& b : blocks) {
    b = std::malloc(64 << 10);
    *static_cast<volatile char*>(b) = 1;
  }
  for (auto* b : blocks) std::free(b);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double rss_mib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return static_cast<double>(resident) * 4096.0 / (1024.0 * 1024.0);
}

std::string map_key(std::uint64_t key, char tag) {
  std::string s = "word-" + std::to_string(key) + "-";
  s.push_back(tag);
  s.resize(24, 'x');
  return s;
}

void write_key(heap_keyed_state_backend& b, std::uint64_t key, std::int64_t v) {
  b.set_current_key(key);
  b.set_value("sum", v);
  b.map_put("words", map_key(key, 'a'), v);
  b.map_put("words", map_key(key, 'b'), v + 1);
}

// The keys of 1% of the state, a different 1% each round.
void change_one_percent(heap_keyed_state_backend& b, std::uint64_t keys, std::uint64_t round) {
  for (std::uint64_t key = round % 100; key < keys; key += 100) {
    b.set_current_key(key);
    b.add_to_value("sum", 1);
    b.map_put("words", map_key(key, 'a'), static_cast<std::int64_t>(round));
  }
}

void run(std::size_t mib) {
  const std::uint64_t keys = (mib << 20) / payload_per_key;
  heap_keyed_state_backend b(max_par, key_groups::range_for_subtask(0, 1, max_par));
  auto start = clock_type::now();
  for (std::uint64_t key = 0; key < keys; ++key) write_key(b, key, static_cast<std::int64_t>(key));
  std::printf("\n== %zu MiB of keyed state: %llu keys, %zu entries (filled in %.0f ms, RSS %.0f MiB)\n",
              mib, static_cast<unsigned long long>(keys), b.num_entries(), ms_since(start),
              rss_mib());

  // The deep copy the synchronous part used to be. Past 256 MiB, key group by key group, each
  // copy dropped before the next (the old backend kept them all until the snapshot was
  // written): that keeps two copies of a large state out of memory, and favours the old way
  // (freed memory is reused instead of faulted in).
  const bool whole = mib <= 256;
  const int deep_reps = whole ? 15 : 5;
  std::vector<double> deep;
  {
    const double rss_before = rss_mib();
    auto neutral = b.snapshot_now();
    if (!neutral) std::abort();
    std::printf("the same state in the old layout (key_group_state): RSS +%.0f MiB\n",
                rss_mib() - rss_before);
    for (int i = 0; i < deep_reps; ++i) {
      settle_allocator();  // the previous copy's free() work, out of this timing
      double took = 0;
      if (whole) {
        start = clock_type::now();
        keyed_state_snapshot copy = *neutral;
        took = ms_since(start);
        if (copy.key_groups.size() != max_par) std::abort();
      } else {
        for (const auto& [group, state] : neutral->key_groups) {
          start = clock_type::now();
          key_group_state copy = state;
          took += ms_since(start);
          if (copy.empty()) std::abort();
        }
      }
      deep.push_back(took);
    }
  }
  std::printf("deep copy (old synchronous part%s), %d runs: p50 %.2f ms, p99 %.2f ms, copies %zu MiB\n",
              whole ? "" : ", summed over key groups", deep_reps, percentile(deep, 0.5),
              percentile(deep, 0.99), mib);

  // Back to back, caches warm: the synchronous part's floor.
  std::vector<double> warm;
  for (int i = 0; i < 200; ++i) {
    start = clock_type::now();
    keyed_snapshot_part part = b.snapshot();
    warm.push_back(ms_since(start) * 1000.0);
  }
  std::printf("cow synchronous part back to back, 200 runs: p50 %.1f us, p99 %.1f us\n",
              percentile(warm, 0.5), percentile(warm, 0.99));

  // Copy-on-write: snapshot, 1% of the keys change while it is alive, it is released (as the
  // snapshot writer does once it has materialised it).
  const int cow_reps = mib <= 256 ? 200 : 30;
  std::vector<double> sync, sync_cpu, writes_shared, writes_alone, copied, release;
  for (int i = 0; i < cow_reps; ++i) {
    const double cpu_start = thread_cpu_us();
    start = clock_type::now();
    keyed_snapshot_part part = b.snapshot();
    sync.push_back(ms_since(start) * 1000.0);
    sync_cpu.push_back(thread_cpu_us() - cpu_start);
    const auto before = b.copies();
    start = clock_type::now();
    change_one_percent(b, keys, static_cast<std::uint64_t>(i));
    writes_shared.push_back(ms_since(start));
    copied.push_back(static_cast<double>(b.copies().bytes_copied - before.bytes_copied));
    // Released as the snapshot writer does once it has materialised it, with the free() work
    // glibc defers to the next large allocation, which would otherwise land in the next
    // snapshot's timing.
    start = clock_type::now();
    part = {};
    settle_allocator();
    release.push_back(ms_since(start));
    start = clock_type::now();
    change_one_percent(b, keys, static_cast<std::uint64_t>(i) + 50);
    writes_alone.push_back(ms_since(start));
  }
  std::printf("cow synchronous part, %d runs: p50 %.1f us, p99 %.1f us wall; thread CPU p50 %.1f "
              "us, p99 %.1f us (%zu table references)\n",
              cow_reps, percentile(sync, 0.5), percentile(sync, 0.99), percentile(sync_cpu, 0.5),
              percentile(sync_cpu, 0.99), b.synchronous_snapshot_entries());
  std::printf("1%% of keys changed under a live snapshot: copied p50 %.2f MiB, p99 %.2f MiB "
              "(%.2f%% of the state); the deep copy copies it all\n",
              percentile(copied, 0.5) / (1 << 20), percentile(copied, 0.99) / (1 << 20),
              100.0 * percentile(copied, 0.5) / static_cast<double>(mib << 20));
  const double writes = 2.0 * static_cast<double>(keys / 100);
  std::printf("those writes (2 per key): p50 %.0f ns/write with a live snapshot, %.0f ns/write "
              "without\n",
              percentile(writes_shared, 0.5) * 1e6 / writes,
              percentile(writes_alone, 0.5) * 1e6 / writes);
  std::printf("releasing the snapshot afterwards (snapshot writer's thread in a job) with "
              "deferred free() work: p50 %.2f ms\n",
              percentile(release, 0.5));

  // The asynchronous part, for scale: materialising a snapshot into the neutral form.
  keyed_snapshot_part part = b.snapshot();
  start = clock_type::now();
  auto materialised = std::move(part).materialize();
  if (!materialised) std::abort();
  std::printf("materialise (asynchronous part, snapshot writer's thread), 1 run: %.0f ms\n",
              ms_since(start));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each size's lines as soon as they are known
  std::vector<std::size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(argv[i], &end, 10);
    if (!end || *end != '\0' || mib == 0 || mib > (1u << 16)) {
      std::fprintf(stderr, "usage: %s [MiB ...]  (sizes of keyed state, 1..65536)\n", argv[0]);
      return 2;
    }
    sizes.push_back(static_cast<std::size_t>(mib));
  }
  if (sizes.empty()) sizes = {64, 1024};
  for (auto mib : sizes) run(mib);
  return 0;
}
