// The coordinator's Asio driver: the periodic trigger and timeouts as coroutines on a manual
// clock, disk work on an "I/O executor" (the same io_context here, so every step is
// deterministic), real files in a temporary folder.
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <asio/io_context.hpp>

#include "engine/checkpoint/checkpoint_coordinator.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/checkpoint/metadata_log.hpp"
#include "tests/engine/coordinator/coordinator_harness.hpp"
#include "tests/engine/test_gateway.hpp"

using namespace snapflow;
using namespace snapflow::test;
using namespace std::chrono_literals;

namespace {

class value_hook : public master_hook {
 public:
  std::string name() const override { return "offsets"; }
  void snapshot(checkpoint_id id, std::int64_t, std::function<void(result<std::string>)> done) override {
    done("offset-at-" + std::to_string(id));
  }
  result<void> restore(checkpoint_id, std::string_view) override { return success(); }
};

// An I/O pool that runs its work last in, first out, when told to. The coordinator's real pool
// has several threads, so work whose order matters (a folder's creation before its discard)
// must be ordered by the coordinator itself; a one-thread FIFO pool would hide it if not.
class lifo_pool {
 public:
  class executor {
   public:
    explicit executor(lifo_pool& pool) : pool_(&pool) {}
    template <typename F>
    void execute(F f) const {
      auto work = std::make_shared<F>(std::move(f));
      pool_->work_.emplace_back([work] { (*work)(); });
    }
    asio::execution_context& query(asio::execution::context_t) const noexcept {
      return pool_->context_;
    }
    static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
      return asio::execution::blocking.never;
    }
    executor require(asio::execution::blocking_t::never_t) const { return *this; }
    bool operator==(const executor& other) const noexcept { return pool_ == other.pool_; }
    bool operator!=(const executor& other) const noexcept { return pool_ != other.pool_; }

   private:
    lifo_pool* pool_;
  };

  executor get_executor() { return executor(*this); }
  std::size_t queued() const { return work_.size(); }
  // Runs what is queued, newest first, including what that work queues meanwhile.
  std::size_t run_newest_first() {
    std::size_t ran = 0;
    while (!work_.empty()) {
      auto work = std::move(work_.back());
      work_.pop_back();
      work();
      ++ran;
    }
    return ran;
  }

 private:
  asio::io_context context_;
  std::vector<std::function<void()>> work_;
};

struct driver_fixture {
  asio::io_context io;
  // With own_pool, the I/O executor is this second context, polled apart from `io`, so a test
  // can tell work done on the event thread from work done on the pool.
  asio::io_context pool;
  bool own_pool = false;
  manual_clock clock;
  temp_dir dir;
  std::vector<std::unique_ptr<execution_vertex>> vertices;
  std::shared_ptr<recording_gateway> gateway = std::make_shared<recording_gateway>();
  std::shared_ptr<completed_checkpoint_store> store;
  std::shared_ptr<checkpoint_id_counter> ids = std::make_shared<in_memory_checkpoint_id_counter>();
  std::shared_ptr<checkpoint_coordinator> coordinator;
  job_id job = "feedfacefeedfacefeedfacefeedface";
  bool auto_ack = true;
  int job_failures = 0;

  explicit driver_fixture(checkpoint_config config,
                          std::vector<std::shared_ptr<master_hook>> hooks = {},
                          std::optional<metadata_write_placement::options> placement = {},
                          std::optional<asio::any_io_executor> pool_executor = {},
                          std::optional<metadata_write_placement::options> location_placement = {})
      : own_pool(placement.has_value()) {
    for (std::uint32_t i = 0; i < 2; ++i)
      vertices.push_back(std::make_unique<execution_vertex>(subtask_id{0, i}, 2, "source"));
    for (std::uint32_t i = 0; i < 2; ++i)
      vertices.push_back(std::make_unique<execution_vertex>(subtask_id{1, i}, 2, "sink"));
    for (auto& v : vertices) v->set_state(execution_state::running);
    store = std::make_shared<completed_checkpoint_store>(config.retained);
    checkpoint_coordinator_setup s;
    s.job = job;
    s.config = config;
    s.tasks_to_trigger = {vertices[0].get(), vertices[1].get()};
    for (auto& v : vertices) {
      s.tasks_to_acknowledge.push_back(v.get());
      s.tasks_to_confirm.push_back(v.get());
    }
    s.job_dir = dir.path / job;
    s.hooks = std::make_shared<master_hook_registry>();
    for (auto& h : hooks) REQUIRE(s.hooks->add(h));
    s.id_counter = ids;
    s.store = store;
    s.stats = std::make_shared<checkpoint_stats_tracker>(10, config);
    s.failure_manager = std::make_shared<checkpoint_failure_manager>(
        config.tolerable_failures,
        checkpoint_failure_manager::callbacks{
            [this](const std::string&) { ++job_failures; },
            [this](const std::string&, const execution_attempt_id&) { ++job_failures; }});
    coordinator = std::make_shared<checkpoint_coordinator>(
        io.get_executor(),
        pool_executor ? *pool_executor
                      : (own_pool ? pool.get_executor() : io.get_executor()),
        std::move(s),
        gateway, placement.value_or(metadata_write_placement::options{}), location_placement);
    // A stub task runtime: once both sources saw the trigger, every subtask writes a state
    // file into the checkpoint folder and acks.
    gateway->on_trigger = [this](const recording_gateway::trigger& t) {
      if (!auto_ack || t.attempt.subtask.index != 1) return;
      asio::post(io, [this, t] { ack_all(t.id, t.options.target_location); });
    };
  }

  void ack_all(checkpoint_id id, const std::string& location) {
    for (auto& v : vertices) {
      auto path = std::filesystem::path(location) /
                  ("state-" + std::to_string(v->id().vertex) + "-" + std::to_string(v->id().index));
      std::filesystem::create_directories(path.parent_path());
      std::string bytes = "state of " + path.filename().string();
      std::ofstream(path) << bytes;
      checkpoint_ack ack{job, v->current_attempt(), id, {}, {}};
      // Named relative to the checkpoint's folder, as a task names it.
      ack.state.handles.push_back({path.filename().string(), bytes.size(), crc32c(bytes)});
      ack.state.state_size = bytes.size();
      coordinator->receive_ack(ack);
    }
  }

  void poll() {
    for (int i = 0; i < 10; ++i) {
      io.restart();
      pool.restart();
      const std::size_t ran = io.poll() + (own_pool ? pool.poll() : 0);
      if (ran == 0) return;
    }
  }
  // The event thread only: whatever was posted to the pool stays there.
  void poll_event_thread() {
    for (int i = 0; i < 10; ++i) {
      io.restart();
      if (io.poll() == 0) return;
    }
  }
  void advance(std::chrono::microseconds by) {
    clock.advance(by);
    poll();
  }
  // Periodic ticks, a millisecond at a time, until checkpoint `id` completed (bounded: a test
  // whose checkpoints stop completing fails here instead of spinning).
  void complete_through(checkpoint_id id) {
    for (int ms = 0; ms < 10'000 && coordinator->core().latest_completed_id() < id; ++ms)
      advance(std::chrono::milliseconds(1));
    REQUIRE(coordinator->core().latest_completed_id() >= id);
  }
};

// Runs what the pool holds, newest first, and what that posts back: the aborted checkpoint's
// folder must be gone (its discard ran after its creation) and nothing kept for it.
void run_pool_then_check_gone(lifo_pool& pool, driver_fixture& f, const std::string& location) {
  pool.run_newest_first();
  f.poll();
  CHECK_FALSE(std::filesystem::exists(location));
  CHECK(f.coordinator->prepared_locations() == 0);
}

checkpoint_config periodic(std::chrono::milliseconds interval) {
  checkpoint_config c;
  c.interval = interval;
  c.timeout = 1s;
  return c;
}

}  // namespace

TEST_CASE("driver: periodic checkpoints complete durably and notify every subtask") {
  driver_fixture f(periodic(10ms));
  f.coordinator->start_checkpoint_scheduler();
  for (int i = 0; i < 35; ++i) f.advance(1ms);
  const checkpoint_id latest = f.coordinator->core().latest_completed_id();
  REQUIRE(latest >= 3);
  auto from_disk = checkpoint_storage::read_metadata(f.store->latest()->location);
  REQUIRE(from_disk);
  CHECK(from_disk->id == latest);
  CHECK(from_disk->subtask_states.size() == 4);
  for (const auto& [_, state] : from_disk->subtask_states)
    for (const auto& h : state.handles) CHECK(checkpoint_storage::verify_state(h));
  CHECK(f.gateway->completes.size() == 4 * static_cast<std::size_t>(latest));
  CHECK(f.coordinator->core().stats().counts().completed == latest);
  CHECK(f.coordinator->armed_timeouts() == 0);
}

TEST_CASE("driver: with retained 1 the first checkpoint's folder is deleted once the second completes") {
  driver_fixture f(periodic(10ms));
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE(f.store->latest());
  const auto first = std::filesystem::path(f.store->latest()->location);
  CHECK(std::filesystem::exists(first / "_metadata"));
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE(f.store->latest()->id == 2);
  CHECK_FALSE(std::filesystem::exists(first));
  CHECK(std::filesystem::exists(std::filesystem::path(f.store->latest()->location) / "_metadata"));
}

TEST_CASE("driver: a checkpoint nobody acks expires through its timeout coroutine") {
  driver_fixture f(periodic(10ms));
  f.auto_ack = false;
  std::optional<request_finished> outcome;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual, {},
                                    [&](const request_finished& r) { outcome = r; });
  f.poll();
  CHECK(f.coordinator->armed_timeouts() == 1);
  f.advance(999ms);
  CHECK_FALSE(outcome);
  f.advance(1ms);
  REQUIRE(outcome);
  CHECK(outcome->failure == checkpoint_failure_reason::checkpoint_expired);
  CHECK(f.coordinator->armed_timeouts() == 0);
  CHECK(f.gateway->aborts.size() == 4);
  CHECK(f.job_failures == 1);
}

TEST_CASE("driver: master hooks run off the event thread and their state is in the metadata") {
  driver_fixture f(periodic(10ms), {std::make_shared<value_hook>()});
  std::optional<request_finished> outcome;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual, {},
                                    [&](const request_finished& r) { outcome = r; });
  CHECK(f.gateway->triggers.empty());  // hooks first
  f.poll();
  REQUIRE(outcome);
  CHECK_FALSE(outcome->failure);
  auto meta = checkpoint_storage::read_metadata(outcome->location);
  REQUIRE(meta);
  CHECK(meta->master_states.at("offsets") == "offset-at-1");
}

// Folder creations always on the pool (a placement whose writes are never fast enough).
metadata_write_placement::options pool_only() {
  metadata_write_placement::options o;
  o.inline_max = std::chrono::microseconds(0);
  return o;
}

TEST_CASE("driver: after a run of fast metadata writes on the pool, the next one is inline") {
  metadata_write_placement::options placement;
  placement.inline_max = std::chrono::hours(1);  // every real write counts as fast
  placement.window = 2;
  driver_fixture f(periodic(10ms), {}, placement, {}, pool_only());
  for (checkpoint_id id = 1; id <= 2; ++id) {
    f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
    f.poll_event_thread();
    CHECK(f.coordinator->core().latest_completed_id() == id - 1);  // waits for the pool
    f.poll();
    REQUIRE(f.coordinator->core().latest_completed_id() == id);
  }
  CHECK(f.coordinator->inline_metadata_writes() == 0);

  // The third: its folder is created on the pool as its triggers go out, before any ack.
  f.auto_ack = false;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll_event_thread();
  REQUIRE(f.gateway->triggers.size() == 2 * 3);
  const std::string location = f.gateway->triggers.back().options.target_location;
  // (Its folder may be there already, made with an earlier one's: location_premaker.)
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(location) / "_metadata"));
  f.poll();
  CHECK(std::filesystem::exists(std::filesystem::path(location) / "_metadata"));
  CHECK(f.coordinator->core().latest_completed_id() == 2);

  f.ack_all(3, location);
  f.poll_event_thread();
  REQUIRE(f.coordinator->core().latest_completed_id() == 3);  // the pool never ran
  CHECK(f.coordinator->inline_metadata_writes() == 1);
  CHECK(f.gateway->completes.size() == 4 * 3);  // notified in the same turn
  auto meta = checkpoint_storage::read_metadata(f.store->latest()->location);
  REQUIRE(meta);
  CHECK(meta->id == 3);
  CHECK(meta->subtask_states.size() == 4);
}

TEST_CASE("driver: after a run of fast folder creations, the next folder is created on the event "
          "thread once its triggers went out") {
  metadata_write_placement::options placement;
  placement.inline_max = std::chrono::hours(1);  // every real write counts as fast
  placement.window = 2;
  driver_fixture f(periodic(10ms), {}, placement);
  for (checkpoint_id id = 1; id <= 2; ++id) {
    f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
    f.poll_event_thread();
    CHECK(f.coordinator->core().latest_completed_id() == id - 1);  // the folder: on the pool
    f.poll();
    REQUIRE(f.coordinator->core().latest_completed_id() == id);
  }
  CHECK(f.coordinator->inline_location_creations() == 0);

  f.auto_ack = false;
  std::optional<bool> existed_at_flush;
  f.gateway->on_flush = [&] {
    if (f.gateway->triggers.size() != 2 * 3 || existed_at_flush) return;
    const auto& options = f.gateway->triggers.back().options;
    existed_at_flush =
        std::filesystem::exists(std::filesystem::path(options.target_location) / "_metadata");
  };
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll_event_thread();  // no pool
  REQUIRE(f.gateway->triggers.size() == 2 * 3);
  const std::string location = f.gateway->triggers.back().options.target_location;
  REQUIRE(existed_at_flush.has_value());
  CHECK_FALSE(*existed_at_flush);  // the triggers first
  CHECK(std::filesystem::is_directory(location));
  CHECK(f.coordinator->inline_location_creations() == 1);
  CHECK(f.coordinator->prepared_locations() == 1);

  f.ack_all(3, location);
  f.poll_event_thread();
  REQUIRE(f.coordinator->core().latest_completed_id() == 3);  // the pool never ran
  CHECK(f.coordinator->inline_metadata_writes() == 1);
  auto meta = checkpoint_storage::read_metadata(f.store->latest()->location);
  REQUIRE(meta);
  CHECK(meta->id == 3);
}

namespace {
// Fast creations count from the first one, so a folder may be prepared ahead at once.
metadata_write_placement::options fast_placement() {
  metadata_write_placement::options placement;
  placement.inline_max = std::chrono::hours(1);
  placement.window = 1;
  return placement;
}

// A prepared folder: an empty `_metadata`, which is not a checkpoint.
bool prepared_only(const std::string& dir) {
  const std::filesystem::path p(dir);
  return std::filesystem::is_directory(p) && std::filesystem::exists(p / "_metadata") &&
         std::filesystem::file_size(p / "_metadata") == 0 &&
         !checkpoint_storage::read_metadata(p).ok();
}
}  // namespace

TEST_CASE("driver: between periodic checkpoints the next one's folder is prepared, and its "
          "trigger takes it") {
  driver_fixture f(periodic(10ms), {}, fast_placement());
  f.coordinator->start_checkpoint_scheduler();
  // The first checkpoint prepares its own folder; once it completed, the second's is made.
  f.complete_through(1);
  const std::string second = f.coordinator->core().checkpoint_location(2);
  CHECK(prepared_only(second));
  CHECK(f.coordinator->locations_prepared_ahead() == 0);
  // Nothing of it is a checkpoint yet.
  CHECK(checkpoint_storage(f.dir.path / f.job).recover().checkpoints.size() == 1);

  f.complete_through(3);
  CHECK(f.coordinator->locations_prepared_ahead() == 2);
  auto meta = checkpoint_storage::read_metadata(f.coordinator->core().checkpoint_location(3));
  REQUIRE(meta);
  CHECK(meta->id == 3);
  CHECK(meta->subtask_states.size() == 4);
  const std::string fourth = f.coordinator->core().checkpoint_location(4);
  CHECK(prepared_only(fourth));
  // Stopped, the guess stays for the next start, whose first checkpoint takes it.
  f.coordinator->stop_checkpoint_scheduler();
  for (int i = 0; i < 30; ++i) f.advance(1ms);
  CHECK(prepared_only(fourth));
  f.coordinator->start_checkpoint_scheduler();
  f.complete_through(4);
  CHECK(f.coordinator->locations_prepared_ahead() == 3);
  auto fourth_meta = checkpoint_storage::read_metadata(fourth);
  REQUIRE(fourth_meta);
  CHECK(fourth_meta->id == 4);
  // Shut down, the guess goes.
  const std::string fifth = f.coordinator->core().checkpoint_location(5);
  CHECK(prepared_only(fifth));
  f.coordinator->shutdown(job_status::canceled);
  f.poll();
  CHECK_FALSE(std::filesystem::exists(fifth));
}

TEST_CASE("driver: checkpoint folders made in a batch ahead of their ids are gone after "
          "shutdown") {
  driver_fixture f(periodic(10ms));
  f.coordinator->start_checkpoint_scheduler();
  f.complete_through(3);
  // The first checkpoint's preparation made the folders of the next ids with its own.
  const auto job_dir = f.dir.path / f.job;
  const checkpoint_id batch_end = checkpoint_coordinator::location_batch;
  CHECK(std::filesystem::is_directory(f.coordinator->core().checkpoint_location(batch_end)));
  f.coordinator->shutdown(job_status::failed);  // a failed job keeps its retained checkpoint
  f.poll();
  std::size_t folders = 0;
  for (const auto& entry : std::filesystem::directory_iterator(job_dir)) {
    ++folders;
    CAPTURE(entry.path());
    CHECK(checkpoint_storage::read_metadata(entry.path()).ok());  // no empty folder left
  }
  CHECK(folders == 1);
}

TEST_CASE("driver: prepared periodic checkpoints are logged, and shutdown leaves the retained "
          "one standing on its own") {
  driver_fixture f(periodic(10ms), {}, fast_placement());
  f.coordinator->start_checkpoint_scheduler();
  f.complete_through(4);
  const auto job_dir = f.dir.path / f.job;
  // Checkpoints whose folder was prepared before completion went through the job's log (the
  // first ones may complete before their preparation ran and are written in one go).
  const auto logged = metadata_log::scan(job_dir).records;
  REQUIRE_FALSE(logged.empty());
  const checkpoint_id latest = f.coordinator->core().latest_completed_id();
  CHECK(logged.back().id == latest);
  auto from_log = checkpoint_storage::decode_metadata(logged.back().metadata);
  REQUIRE(from_log);
  auto from_file =
      checkpoint_storage::read_metadata(f.coordinator->core().checkpoint_location(latest));
  REQUIRE(from_file);
  from_log->location = from_file->location;
  CHECK(*from_log == *from_file);

  f.coordinator->shutdown(job_status::failed);  // a failed job keeps its retained checkpoint
  f.poll();
  // Its `_metadata` was synced and the log, no longer needed, removed.
  for (const auto& entry : std::filesystem::directory_iterator(job_dir))
    CHECK_FALSE(metadata_log::segment_number(entry.path().filename().string()));
  auto retained = checkpoint_storage(job_dir).recover();
  REQUIRE(retained.checkpoints.size() == 1);
  CHECK(retained.checkpoints[0].id == latest);
  CHECK(retained.repaired.empty());
}

TEST_CASE("driver: a folder prepared ahead that another checkpoint's id took is removed") {
  driver_fixture f(periodic(10ms), {}, fast_placement());
  f.coordinator->start_checkpoint_scheduler();
  f.complete_through(1);
  const std::string guessed = f.coordinator->core().checkpoint_location(2);
  REQUIRE(prepared_only(guessed));
  // A savepoint takes id 2 (its folder is elsewhere): the guess was wrong.
  std::optional<request_finished> savepoint;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::savepoint,
                                    (f.dir.path / "savepoints").string(),
                                    [&](const request_finished& r) { savepoint = r; });
  f.poll();
  REQUIRE(savepoint);
  REQUIRE(savepoint->id);
  CHECK(*savepoint->id == 2);
  CHECK_FALSE(std::filesystem::exists(guessed));
  // The periodic checkpoints go on with the next ids, and their folders are prepared again.
  f.complete_through(4);
  CHECK(f.coordinator->locations_prepared_ahead() >= 1);
  auto meta = checkpoint_storage::read_metadata(f.coordinator->core().checkpoint_location(4));
  REQUIRE(meta);
  CHECK(meta->id == 4);
  f.coordinator->shutdown(job_status::canceled);
  f.poll();
  CHECK_FALSE(std::filesystem::exists(f.coordinator->core().checkpoint_location(5)));
}

TEST_CASE("driver: a folder whose preparation ahead failed is tried once, and its trigger "
          "prepares it again") {
  driver_fixture f(periodic(10ms), {}, fast_placement());
  struct clear_injector {
    ~clear_injector() { checkpoint_storage::set_write_fault_injector(nullptr); }
  } guard;
  const std::string second = f.coordinator->core().checkpoint_location(2);
  int attempts = 0;
  checkpoint_storage::set_write_fault_injector(
      [&](const std::filesystem::path& file, checkpoint_storage::write_step step) {
        if (file.parent_path() != std::filesystem::path(second) ||
            step != checkpoint_storage::write_step::create_folders)
          return false;
        return ++attempts == 1;  // only the first preparation of chk-2 fails
      });
  f.coordinator->start_checkpoint_scheduler();
  f.complete_through(1);
  CHECK(attempts == 1);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(second) / "_metadata"));
  // Runs while nothing is pending do not try again.
  for (int i = 0; i < 3; ++i)
    f.coordinator->abort_pending_checkpoints(checkpoint_failure_reason::checkpoint_declined,
                                             "nothing is pending");
  f.poll();
  CHECK(attempts == 1);
  f.complete_through(3);
  CHECK(attempts == 2);  // checkpoint 2's trigger prepared it
  CHECK(f.coordinator->core().stats().counts().failed == 0);
  CHECK(f.coordinator->locations_prepared_ahead() == 1);  // only checkpoint 3's
  auto meta = checkpoint_storage::read_metadata(f.coordinator->core().checkpoint_location(3));
  REQUIRE(meta);
  CHECK(meta->id == 3);
}

TEST_CASE("driver: an empty _metadata a crash left in the next checkpoint's folder is taken "
          "over") {
  // A coordinator killed between two checkpoints leaves the next id's folder prepared; a
  // restarted counter may hand that id out again (it resumes at its reserved limit).
  driver_fixture f(periodic(10ms), {}, fast_placement());
  for (checkpoint_id id = 1; id <= 2; ++id) {
    const std::filesystem::path dir = f.coordinator->core().checkpoint_location(id);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "_metadata").flush();
  }
  f.coordinator->start_checkpoint_scheduler();
  f.complete_through(3);
  CHECK(f.coordinator->core().stats().counts().failed == 0);
  auto meta = checkpoint_storage::read_metadata(f.coordinator->core().checkpoint_location(3));
  REQUIRE(meta);
  CHECK(meta->id == 3);
  CHECK(f.coordinator->locations_prepared_ahead() == 2);  // 2 and 3
}

TEST_CASE("driver: a checkpoint whose folder was prepared ahead and that expires leaves no "
          "folder") {
  driver_fixture f(periodic(10ms), {}, fast_placement());
  f.coordinator->start_checkpoint_scheduler();
  f.complete_through(1);
  const std::string second = f.coordinator->core().checkpoint_location(2);
  REQUIRE(prepared_only(second));
  f.auto_ack = false;
  while (f.gateway->triggers.empty() || f.gateway->triggers.back().id < 2) f.advance(1ms);
  CHECK(f.coordinator->locations_prepared_ahead() == 1);
  CHECK(f.coordinator->prepared_locations() == 1);
  f.advance(1s);  // expires
  CHECK(f.coordinator->core().stats().counts().failed >= 1);
  f.poll();
  CHECK_FALSE(std::filesystem::exists(second));
  f.coordinator->shutdown(job_status::canceled);
  f.poll();
  for (checkpoint_id id = 2; id <= f.coordinator->core().stats().counts().failed + 2; ++id)
    CHECK_FALSE(std::filesystem::exists(f.coordinator->core().checkpoint_location(id)));
}

TEST_CASE("driver: a metadata write never goes inline before its folder's creation ended") {
  metadata_write_placement::options placement;
  placement.inline_max = std::chrono::hours(1);
  placement.window = 1;
  driver_fixture f(periodic(10ms), {}, placement, {}, pool_only());
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE(f.coordinator->core().latest_completed_id() == 1);  // fills the window

  // The acks come before the pool created the folder: the write queues behind the creation.
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll_event_thread();
  CHECK(f.coordinator->core().latest_completed_id() == 1);
  CHECK(f.coordinator->inline_metadata_writes() == 0);
  f.poll();
  REQUIRE(f.coordinator->core().latest_completed_id() == 2);
  CHECK(f.coordinator->inline_metadata_writes() == 0);
  auto meta = checkpoint_storage::read_metadata(f.store->latest()->location);
  REQUIRE(meta);
  CHECK(meta->id == 2);
}

TEST_CASE("driver: the triggers go out before any pool work of the same run is posted") {
  // Waking a pool thread costs the event thread tens of microseconds on a small machine, so the
  // folder's creation is posted only after the gateway's flush sent the triggers.
  metadata_write_placement::options placement;
  driver_fixture f(periodic(10ms), {}, placement);
  f.auto_ack = false;
  std::size_t pool_work_at_flush = 0;
  std::size_t triggers_at_flush = 0;
  f.gateway->on_flush = [&] {
    triggers_at_flush = f.gateway->triggers.size();
    f.pool.restart();
    pool_work_at_flush += f.pool.poll();
  };
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll_event_thread();
  REQUIRE(f.gateway->triggers.size() == 2);
  CHECK(triggers_at_flush == 2);
  CHECK(pool_work_at_flush == 0);
  // The creation was posted right after, and runs on the pool.
  const std::string location = f.gateway->triggers.back().options.target_location;
  CHECK_FALSE(std::filesystem::exists(location));
  f.gateway->on_flush = nullptr;
  f.pool.restart();
  CHECK(f.pool.poll() > 0);
  CHECK(std::filesystem::is_directory(location));
}

// The pool here is one thread, which runs posts in order anyway; with several threads the
// coordinator's ordered_work_queue is what keeps the discard behind the creation.
TEST_CASE("driver: an aborted checkpoint's folder is removed even when its creation ran late") {
  metadata_write_placement::options placement;
  driver_fixture f(periodic(10ms), {}, placement);
  f.auto_ack = false;
  std::vector<std::string> locations;
  for (int i = 0; i < 5; ++i) {
    f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
    f.poll_event_thread();  // the folder's creation waits on the pool
    locations.push_back(f.gateway->triggers.back().options.target_location);
    CHECK_FALSE(std::filesystem::exists(std::filesystem::path(locations.back()) / "_metadata"));
    f.clock.advance(1s);  // expires: the timeout coroutine runs on the event thread only
    f.poll_event_thread();
    CHECK(f.coordinator->core().stats().counts().failed == i + 1);
    f.poll();  // the late creation, then the discard that was queued behind it
    CHECK_FALSE(std::filesystem::exists(locations.back()));
  }
  CHECK(f.coordinator->core().stats().counts().failed == 5);
  CHECK(f.coordinator->prepared_locations() == 0);  // nothing kept for aborted checkpoints
}

TEST_CASE("driver: an expired checkpoint's discard waits for its folder's creation on any pool") {
  // The discard is posted while the creation has not run. A pool that takes the newest work
  // first would run a discard posted beside the creation before it, and leave the folder.
  lifo_pool pool;
  driver_fixture f(periodic(10ms), {}, std::nullopt, asio::any_io_executor(pool.get_executor()));
  f.auto_ack = false;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  const std::string location = f.gateway->triggers.back().options.target_location;
  REQUIRE(pool.queued() == 1);  // the creation, not run yet
  f.clock.advance(1s);          // expires on the event thread: the discard is posted
  f.poll();
  CHECK(f.coordinator->core().stats().counts().failed == 1);
  run_pool_then_check_gone(pool, f, location);
}

TEST_CASE("driver: a checkpoint declined in the run that triggered it leaves no folder") {
  // The decline comes back while the coordinator is still performing the trigger's actions
  // (a task runtime that answers at once), so the abort's discard is found in the same run as
  // the folder's creation, and must still run after it.
  lifo_pool pool;
  driver_fixture f(periodic(10ms), {}, std::nullopt, asio::any_io_executor(pool.get_executor()));
  f.auto_ack = false;
  f.gateway->on_trigger = [&](const recording_gateway::trigger& t) {
    if (t.attempt.subtask.index != 0) return;
    f.coordinator->receive_decline(checkpoint_decline{
        f.job, t.attempt, t.id, checkpoint_failure_reason::checkpoint_declined, "no"});
  };
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE_FALSE(f.gateway->triggers.empty());
  const std::string location = f.gateway->triggers.back().options.target_location;
  CHECK(f.coordinator->core().stats().counts().failed == 1);
  run_pool_then_check_gone(pool, f, location);
}

TEST_CASE("driver: a state file written after its checkpoint was aborted leaves no folder for "
          "long") {
  driver_fixture f(periodic(10ms));
  // A folder from before this coordinator (a checkpoint a previous run kept): not its own.
  REQUIRE(f.ids->advance_to(5));
  const auto earlier = f.dir.path / f.job / "chk-2";
  std::filesystem::create_directories(earlier);
  std::ofstream(earlier / "state-0-0") << "kept";
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE(f.store->latest());
  const checkpoint_id completed = f.store->latest()->id;
  CHECK(f.coordinator->orphan_sweeps() == 1);  // the first completion sweeps

  f.auto_ack = false;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  const auto aborted = std::filesystem::path(f.gateway->triggers.back().options.target_location);
  f.advance(1s);  // expires: its folder is removed
  REQUIRE(f.coordinator->core().stats().counts().failed == 1);
  REQUIRE_FALSE(std::filesystem::exists(aborted));
  // The task's writer ran late: it creates the folder again for its state file.
  std::filesystem::create_directories(aborted);
  std::ofstream(aborted / "state-1-0") << "late";

  // The next completion within the sweep interval leaves it; the first one after it removes it.
  f.auto_ack = true;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  CHECK(f.coordinator->orphan_sweeps() == 1);
  CHECK(std::filesystem::exists(aborted));
  f.clock.advance(std::chrono::microseconds(checkpoint_coordinator::orphan_sweep_interval_us));
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  CHECK(f.coordinator->orphan_sweeps() == 2);
  CHECK_FALSE(std::filesystem::exists(aborted));
  // What the store retains and what came before this coordinator stay.
  CHECK(std::filesystem::exists(std::filesystem::path(f.store->latest()->location) / "_metadata"));
  CHECK(f.store->latest()->id > completed);
  CHECK(std::filesystem::exists(earlier / "state-0-0"));
}

TEST_CASE("driver: a callback that throws ends its run whole, and the next run is not refused") {
  driver_fixture f(periodic(10ms));
  bool throw_once = true;
  f.coordinator->add_completion_listener([&](checkpoint_id) {
    if (std::exchange(throw_once, false)) throw std::runtime_error("listener failed");
  });
  int flushes = 0;
  f.gateway->on_flush = [&] { ++flushes; };
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  CHECK_THROWS_WITH(f.poll(), "listener failed");
  CHECK(f.coordinator->core().latest_completed_id() == 1);
  const int flushes_after_throw = flushes;
  CHECK(flushes_after_throw > 0);
  // The coordinator still runs its actions: the next checkpoint triggers, completes and
  // notifies, and the first one's folder, subsumed, is discarded on the pool as usual.
  const auto completes_before = f.gateway->completes.size();
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  CHECK(f.coordinator->core().latest_completed_id() == 2);
  CHECK(f.gateway->completes.size() > completes_before);
  CHECK(flushes > flushes_after_throw);
}

TEST_CASE("driver: with inline writes off, every metadata write waits for the pool") {
  metadata_write_placement::options placement;
  placement.inline_max = std::chrono::microseconds(0);
  driver_fixture f(periodic(10ms), {}, placement);
  for (checkpoint_id id = 1; id <= 4; ++id) {
    f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
    f.poll_event_thread();
    CHECK(f.coordinator->core().latest_completed_id() == id - 1);
    f.poll();
    REQUIRE(f.coordinator->core().latest_completed_id() == id);
  }
  CHECK(f.coordinator->inline_metadata_writes() == 0);
}

TEST_CASE("driver: start, stop, start: ids increase, timestamps never go back, nothing while stopped") {
  driver_fixture f(periodic(10ms));
  f.coordinator->start_checkpoint_scheduler();
  for (int i = 0; i < 25; ++i) f.advance(1ms);
  const auto ticks = f.coordinator->periodic_ticks();
  const auto triggers = f.gateway->triggers.size();
  REQUIRE(ticks >= 2);
  f.coordinator->stop_checkpoint_scheduler();
  for (int i = 0; i < 50; ++i) f.advance(1ms);
  CHECK(f.coordinator->periodic_ticks() == ticks);
  CHECK(f.gateway->triggers.size() == triggers);
  f.coordinator->start_checkpoint_scheduler();
  for (int i = 0; i < 25; ++i) f.advance(1ms);
  CHECK(f.coordinator->periodic_ticks() > ticks);
  for (std::size_t i = 1; i < f.gateway->triggers.size(); ++i) {
    CHECK(f.gateway->triggers[i].id >= f.gateway->triggers[i - 1].id);
    CHECK(f.gateway->triggers[i].timestamp_us >= f.gateway->triggers[i - 1].timestamp_us);
  }
}

TEST_CASE("driver: set_interval changes the period of a running trigger") {
  driver_fixture f(periodic(100ms));
  f.coordinator->start_checkpoint_scheduler();
  for (int i = 0; i < 100; ++i) f.advance(1ms);
  const auto ticks = f.coordinator->periodic_ticks();
  f.coordinator->set_interval(5ms);
  for (int i = 0; i < 50; ++i) f.advance(1ms);
  CHECK(f.coordinator->periodic_ticks() >= ticks + 9);
}

TEST_CASE("driver: shutdown cancels timers and fails waiting requests") {
  driver_fixture f(periodic(10ms));
  f.auto_ack = false;
  std::optional<request_finished> outcome;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual, {},
                                    [&](const request_finished& r) { outcome = r; });
  f.poll();
  f.coordinator->shutdown(job_status::canceled);
  f.poll();
  REQUIRE(outcome);
  CHECK(outcome->failure == checkpoint_failure_reason::checkpoint_coordinator_shutdown);
  CHECK(f.coordinator->armed_timeouts() == 0);
}

// ---------------------------------------------------------------------------------------------
// State handles from workers are confined to their checkpoint's folder

namespace {

// Triggers checkpoint 1 by hand (no auto acks) and returns its folder.
std::string triggered_location(driver_fixture& f) {
  f.auto_ack = false;
  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE(f.gateway->triggers.size() == 2);
  return f.gateway->triggers.front().options.target_location;
}

checkpoint_ack ack_naming(driver_fixture& f, std::size_t vertex, const std::string& path) {
  checkpoint_ack ack{f.job, f.vertices[vertex]->current_attempt(), 1, {}, {}};
  ack.state.handles.push_back({path, 4, 0});
  ack.state.state_size = 4;
  return ack;
}

std::filesystem::path write_file(const std::filesystem::path& path) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << "keep";
  return path;
}

// The ack is refused, the checkpoint fails as declined saying why, and every file (the one it
// named included) is still there once all the discards ran.
void check_refused(driver_fixture& f, const std::string& named,
                   const std::vector<std::filesystem::path>& must_survive) {
  INFO("the handle names " << named);
  REQUIRE(f.coordinator->receive_ack(ack_naming(f, 0, named)) ==
          ack_outcome::refused_state_handle);
  f.poll();
  CHECK(f.coordinator->refused_state_handles() == 1);
  CHECK(f.coordinator->core().num_pending() == 0);
  const checkpoint_stats* stats = f.coordinator->core().stats().find(1);
  REQUIRE(stats != nullptr);
  REQUIRE(stats->failure_reason.has_value());
  CHECK(*stats->failure_reason == checkpoint_failure_reason::checkpoint_declined);
  CHECK_THAT(stats->failure_message, Catch::Contains("refused its state"));
  for (const auto& p : must_survive) CHECK(std::filesystem::exists(p));
  // Another subtask's ack after the abort changes nothing and removes nothing outside (once the
  // folder is gone, a link that was in it names nothing any more: a late ack to discard).
  const ack_outcome late = f.coordinator->receive_ack(ack_naming(f, 1, named));
  CHECK((late == ack_outcome::refused_state_handle || late == ack_outcome::late_discarded));
  f.poll();
  CHECK(f.coordinator->core().latest_completed_id() == 0);
  for (const auto& p : must_survive) CHECK(std::filesystem::exists(p));
}

}  // namespace

TEST_CASE("state handle: an absolute path is refused and the file it names is left alone") {
  driver_fixture f(periodic(100ms));
  triggered_location(f);
  const auto outside = write_file(f.dir.path / "outside" / "precious");
  check_refused(f, outside.string(), {outside});
}

TEST_CASE("state handle: a path climbing out of the checkpoint folder with '..' is refused") {
  driver_fixture f(periodic(100ms));
  triggered_location(f);
  const auto outside = write_file(f.dir.path / "precious");
  check_refused(f, "../../precious", {outside});
  CHECK_THAT(f.coordinator->core().stats().find(1)->failure_message, Catch::Contains(".."));
}

TEST_CASE("state handle: another job's state file is refused") {
  driver_fixture f(periodic(100ms));
  triggered_location(f);
  const auto other = write_file(f.dir.path / "0123456789abcdef0123456789abcdef" / "chk-1" / "s");
  check_refused(f, "../../0123456789abcdef0123456789abcdef/chk-1/s", {other});
}

TEST_CASE("state handle: a symlink inside the checkpoint folder that leads out is refused") {
  driver_fixture f(periodic(100ms));
  const std::string location = triggered_location(f);
  const auto outside = write_file(f.dir.path / "outside" / "precious");
  std::filesystem::create_directories(location);
  std::filesystem::create_symlink(outside, std::filesystem::path(location) / "state-link");
  std::filesystem::create_directory_symlink(outside.parent_path(),
                                            std::filesystem::path(location) / "dir-link");
  SECTION("the file itself") { check_refused(f, "state-link", {outside}); }
  SECTION("a folder on the way") { check_refused(f, "dir-link/precious", {outside}); }
}

TEST_CASE("keyed scope: an acknowledgement whose key groups lie outside its max parallelism is "
          "refused, and one inside is kept in the completed checkpoint") {
  driver_fixture f(periodic(100ms));
  triggered_location(f);
  checkpoint_ack bad{f.job, f.vertices[0]->current_attempt(), 1, {}, {}};
  bad.state.keyed = keyed_state_scope{128, 0, 128};
  REQUIRE(f.coordinator->receive_ack(bad) == ack_outcome::refused_state_handle);
  f.poll();
  CHECK(f.coordinator->refused_state_handles() == 1);
  const checkpoint_stats* stats = f.coordinator->core().stats().find(1);
  REQUIRE(stats != nullptr);
  CHECK_THAT(stats->failure_message, Catch::Contains("max parallelism 128"));

  f.coordinator->trigger_checkpoint(checkpoint_trigger_kind::manual);
  f.poll();
  REQUIRE(f.coordinator->core().num_pending() == 1);
  const checkpoint_id next = f.coordinator->core().pending_ids().back();
  for (std::size_t v = 0; v < f.vertices.size(); ++v) {
    checkpoint_ack ack{f.job, f.vertices[v]->current_attempt(), next, {}, {}};
    ack.state.keyed = keyed_state_scope{128, 0, 127};
    f.coordinator->receive_ack(ack);
  }
  f.poll();
  REQUIRE(f.coordinator->core().latest_completed_id() == next);
  for (const auto& [_, state] : f.coordinator->core().store().latest()->subtask_states)
    CHECK(state.keyed == keyed_state_scope{128, 0, 127});
}

TEST_CASE("state handle: a name inside the folder is kept as its path there, and discarded there") {
  driver_fixture f(periodic(100ms));
  const std::string location = triggered_location(f);
  std::filesystem::create_directories(location);
  f.ack_all(1, location);
  f.poll();
  REQUIRE(f.coordinator->core().latest_completed_id() == 1);
  CHECK(f.coordinator->refused_state_handles() == 0);
  const completed_checkpoint& c = *f.coordinator->core().store().latest();
  for (const state_handle& h : c.all_handles()) {
    CHECK(std::filesystem::path(h.path).parent_path() == std::filesystem::path(location));
    CHECK(std::filesystem::exists(h.path));
  }
}
