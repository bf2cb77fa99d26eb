// Durability under a crash at any point: every step of a durable write (the checkpoint's
// `_metadata` and the id counter's reservations) is interrupted in turn, as a killed coordinator
// would leave it, and the restart path (job_master::load_durable_state) must always find an
// intact latest completed checkpoint and hand out ids never handed out before.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <string>

#include "engine/checkpoint/checkpoint_id_counter.hpp"
#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/jobmaster/job_master.hpp"
#include "graph/stream_environment.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;
namespace fs = std::filesystem;
using write_step = checkpoint_storage::write_step;
using namespace std::chrono_literals;

namespace {

job_graph small_job() {
  stream_environment env;
  env.enable_checkpointing(10ms);
  env.add_source("sequence_source", {{"count", "10"}}).add_sink("print_sink");
  return env.build_job_graph();
}

// Clears the injector at the end of a test, whatever happens.
struct injector_guard {
  ~injector_guard() { checkpoint_storage::set_write_fault_injector(nullptr); }
};

// Counts durable writes and stops the one numbered `crash_at` (0-based, over every step of
// every write) at its step, as if the process died there.
struct crash_plan {
  std::int64_t crash_at = -1;
  std::int64_t steps_seen = 0;
  bool crashed = false;
  std::string crashed_file;
  write_step crashed_step = write_step::create_folders;

  void arm() {
    checkpoint_storage::set_write_fault_injector([this](const fs::path& file, write_step step) {
      if (crashed) return true;  // a dead process writes nothing more
      if (steps_seen++ != crash_at) return false;
      crashed = true;
      crashed_file = file.filename().string();
      crashed_step = step;
      return true;
    });
  }
};

// A subtask's state file as a task writes it: the handle carries its size and CRC-32C.
state_handle write_state_file(const fs::path& dir, const std::string& name,
                              const std::string& bytes) {
  fs::create_directories(dir);
  const fs::path file = dir / name;
  std::ofstream(file, std::ios::binary) << bytes;
  return state_handle{file.string(), bytes.size(), crc32c(bytes)};
}

completed_checkpoint make_checkpoint(const checkpoint_storage& storage, const job_id& job,
                                     checkpoint_id id) {
  completed_checkpoint c;
  c.job = job;
  c.id = id;
  c.trigger_timestamp_us = 1'000'000 * id;
  c.completion_timestamp_us = c.trigger_timestamp_us + 500;
  c.location = storage.checkpoint_dir(id).string();
  const std::string state = "offset=" + std::to_string(id * 1000);
  c.subtask_states[{0, 0}] =
      subtask_state{{write_state_file(c.location, "0-0", state)}, state.size()};
  c.master_states["hook"] = "chk " + std::to_string(id);
  return c;
}

// What a restarted coordinator finds: the latest checkpoint must be one that was completed,
// byte for byte, with every state file intact; the counter must be readable.
struct restart_view {
  std::optional<completed_checkpoint> latest;
  checkpoint_id next_id = 0;
};

// How the coordinator writes a checkpoint's metadata.
enum class write_way {
  in_one_go,  // write_metadata without a prepared file: temp, fsync, rename, fsync folder
  prepared,   // a savepoint's: the folder and an empty `_metadata` first, fsynced at the end
  logged,     // a periodic checkpoint's: `_metadata` unsynced, the metadata log's append
};

const char* name_of(write_way w) {
  switch (w) {
    case write_way::in_one_go: return "metadata written in one go";
    case write_way::prepared: return "metadata into a prepared folder";
    case write_way::logged: return "metadata logged";
  }
  return "?";
}

// The coordinator's part of one checkpoint after its id: prepared, the way the coordinator
// does it (the folder and an empty `_metadata` first, then the tasks' state, then the
// metadata into the open file), or written in one go.
result<completed_checkpoint> complete_checkpoint(checkpoint_storage& storage,
                                                 const job_id& job, checkpoint_id id,
                                                 write_way way) {
  if (way == write_way::in_one_go) {
    completed_checkpoint c = make_checkpoint(storage, job, id);
    if (auto r = storage.write_metadata(c); !r) return r.err();
    return c;
  }
  auto file = checkpoint_storage::prepare_location(
      storage.checkpoint_dir(id), {.folder_premade = false, .logged = way == write_way::logged});
  if (!file) return file.err();
  completed_checkpoint c = make_checkpoint(storage, job, id);
  if (auto r = storage.write_metadata(c, std::move(file).value()); !r) return r.err();
  return c;
}

restart_view restart(const fs::path& state_dir, const job_graph& graph) {
  auto state = job_master::load_durable_state(state_dir, graph, std::nullopt);
  INFO((state ? std::string() : state.err().message));
  REQUIRE(state);
  restart_view view;
  if (!state->checkpoints.empty()) view.latest = state->checkpoints.back();
  view.next_id = state->id_counter->peek_next();
  return view;
}

}  // namespace

TEST_CASE(
    "a crash at any step of any durable write leaves an intact latest checkpoint and ids "
    "that never repeat") {
  injector_guard guard;
  const job_graph graph = small_job();
  const write_way way = GENERATE(write_way::in_one_go, write_way::prepared, write_way::logged);
  const bool prepared = way != write_way::in_one_go;
  INFO(name_of(way));
  constexpr checkpoint_id checkpoints = 5;
  // A small reservation block, so the counter's own writes fall between the checkpoints'.
  constexpr std::int64_t block = 2;

  // One clean run first, to count the steps: every one of them is then a crash point.
  std::int64_t total_steps = 0;
  {
    temp_folder dir;
    crash_plan counting;
    counting.arm();
    checkpoint_storage storage(dir.path() / graph.id);
    auto counter = file_checkpoint_id_counter::open(storage.job_dir(), block);
    REQUIRE(counter);
    for (checkpoint_id i = 1; i <= checkpoints; ++i) {
      auto id = (*counter)->get_and_increment();
      REQUIRE(id);
      REQUIRE(complete_checkpoint(storage, graph.id, *id, way));
    }
    total_steps = counting.steps_seen;
    checkpoint_storage::set_write_fault_injector(nullptr);
  }
  // Metadata writes and counter writes, seven steps each; a prepared write renames nothing,
  // and a logged one syncs no folder either (its fsync_temp step is the log's append).
  const std::int64_t metadata_steps =
      checkpoint_storage::write_step_count - (prepared ? 1 : 0) - (way == write_way::logged);
  REQUIRE(total_steps >= checkpoints * metadata_steps +
                             (checkpoints / block) * checkpoint_storage::write_step_count);

  std::set<std::pair<std::string, int>> crash_points;
  for (std::int64_t crash_at = 0; crash_at < total_steps; ++crash_at) {
    temp_folder dir;
    const fs::path state_dir = dir.path();
    checkpoint_storage storage(state_dir / graph.id);
    crash_plan plan;
    plan.crash_at = crash_at;
    plan.arm();

    // The coordinator's part of each checkpoint: an id from the durable counter, then the
    // metadata; it stops at the first failure (the process died).
    std::set<checkpoint_id> handed_out;
    std::map<checkpoint_id, completed_checkpoint> completed;
    {
      auto counter = file_checkpoint_id_counter::open(storage.job_dir(), block);
      REQUIRE(counter);
      for (checkpoint_id i = 1; i <= checkpoints && !plan.crashed; ++i) {
        auto id = (*counter)->get_and_increment();
        if (!id) break;
        handed_out.insert(*id);
        auto c = complete_checkpoint(storage, graph.id, *id, way);
        if (!c) break;
        completed.emplace(c->id, *c);
      }
    }
    checkpoint_storage::set_write_fault_injector(nullptr);
    REQUIRE(plan.crashed);
    INFO("crash before step " << static_cast<int>(plan.crashed_step) << " of writing "
                              << plan.crashed_file << " (crash point " << crash_at << ")");
    crash_points.emplace(plan.crashed_file, static_cast<int>(plan.crashed_step));

    const restart_view view = restart(state_dir, graph);
    // The metadata being written when the process died counts once it is whole where it is
    // read: in one go, once its rename happened; prepared, once every byte was written (the
    // process died before the fsync; the machine did not). A later restore may use it.
    // Anything before must be invisible: an empty or torn `_metadata` is skipped.
    const bool torn_write_visible =
        plan.crashed_file == checkpoint_storage::metadata_file_name &&
        plan.crashed_step == (prepared ? write_step::fsync_temp : write_step::fsync_folder);
    if (completed.empty() && !torn_write_visible) {
      CHECK_FALSE(view.latest);
    } else {
      REQUIRE(view.latest);
      const checkpoint_id newest_written = completed.empty() ? 0 : completed.rbegin()->first;
      if (torn_write_visible) {
        // The crashed write had renamed its file: that checkpoint is the latest, whole.
        CHECK(view.latest->id == *handed_out.rbegin());
        CHECK(view.latest->id > newest_written);
        CHECK(view.latest->master_states.at("hook") == "chk " + std::to_string(view.latest->id));
      } else {
        CHECK(view.latest->id == newest_written);
        CHECK(*view.latest == completed.at(newest_written));
      }
      for (const auto& handle : view.latest->all_handles())
        CHECK(checkpoint_storage::verify_state(handle));
    }
    // Ids continue past everything handed out before the crash and past what is on disk.
    if (!handed_out.empty()) CHECK(view.next_id > *handed_out.rbegin());
    if (view.latest) CHECK(view.next_id > view.latest->id);

    // The restarted coordinator goes on: new ids, new checkpoints, none colliding.
    auto counter = file_checkpoint_id_counter::open(storage.job_dir(), block);
    REQUIRE(counter);
    for (int i = 0; i < 3; ++i) {
      auto id = (*counter)->get_and_increment();
      REQUIRE(id);
      CHECK(handed_out.insert(*id).second);
      REQUIRE(complete_checkpoint(storage, graph.id, *id, way));
    }
    const restart_view after = restart(state_dir, graph);
    REQUIRE(after.latest);
    CHECK(after.latest->id == *handed_out.rbegin());
  }
  // Every step of both kinds of file was a crash point at least once (a prepared metadata
  // write renames nothing; a logged one syncs no folder).
  for (int step = 0; step < checkpoint_storage::write_step_count; ++step) {
    const bool skipped =
        (prepared && step == static_cast<int>(write_step::rename)) ||
        (way == write_way::logged && step == static_cast<int>(write_step::fsync_folder));
    if (!skipped)
      CHECK(crash_points.contains({std::string(checkpoint_storage::metadata_file_name), step}));
    CHECK(crash_points.contains({file_checkpoint_id_counter::file_name, step}));
  }
}

TEST_CASE(
    "a crash of the machine that takes every unsynced metadata file still finds the latest "
    "logged checkpoint, whole") {
  const job_graph graph = small_job();
  temp_folder dir;
  std::vector<completed_checkpoint> completed;
  {
    checkpoint_storage storage(dir.path() / graph.id);
    auto counter = file_checkpoint_id_counter::open(storage.job_dir(), 2);
    REQUIRE(counter);
    for (int i = 0; i < 4; ++i) {
      auto id = (*counter)->get_and_increment();
      REQUIRE(id);
      auto c = complete_checkpoint(storage, graph.id, *id, write_way::logged);
      REQUIRE(c);
      completed.push_back(*c);
    }
  }
  // The page cache gone: every `_metadata` (never synced) empty, the state files (synced by
  // their writers) intact.
  for (const auto& c : completed) fs::resize_file(fs::path(c.location) / "_metadata", 0);
  const restart_view view = restart(dir.path(), graph);
  REQUIRE(view.latest);
  CHECK(*view.latest == completed.back());
  CHECK(view.next_id > completed.back().id);
  for (const auto& handle : view.latest->all_handles())
    CHECK(checkpoint_storage::verify_state(handle));
  // Recovery wrote the files back.
  CHECK(*checkpoint_storage::read_metadata(completed.back().location) == completed.back());
}

TEST_CASE("a crash while advancing the id counter past a savepoint never moves it back") {
  injector_guard guard;
  for (int step = 0; step < checkpoint_storage::write_step_count; ++step) {
    INFO("crash before step " << step);
    temp_folder dir;
    {
      auto counter = file_checkpoint_id_counter::open(dir.path(), 4);
      REQUIRE(counter);
      for (int i = 0; i < 3; ++i) REQUIRE((*counter)->get_and_increment());
      checkpoint_storage::set_write_fault_injector(
          [step](const fs::path&, write_step s) { return static_cast<int>(s) >= step; });
      CHECK_FALSE((*counter)->advance_to(100));
      checkpoint_storage::set_write_fault_injector(nullptr);
    }
    auto reopened = file_checkpoint_id_counter::open(dir.path(), 4);
    REQUIRE(reopened);
    // Ids 1..3 were handed out: whatever the crash left, the next id is past them.
    CHECK((*reopened)->peek_next() > 3);
    // Past the rename the advance is on disk; before it the old reservation stands.
    if (step >= static_cast<int>(write_step::fsync_folder))
      CHECK((*reopened)->peek_next() >= 100);
    else
      CHECK((*reopened)->peek_next() < 100);
  }
}

TEST_CASE("restart skips a torn or corrupt newest _metadata at every length and every byte") {
  temp_folder dir;
  const job_graph graph = small_job();
  checkpoint_storage storage(dir.path() / graph.id);
  const completed_checkpoint first = make_checkpoint(storage, graph.id, 1);
  const completed_checkpoint second = make_checkpoint(storage, graph.id, 2);
  REQUIRE(storage.write_metadata(first));
  REQUIRE(storage.write_metadata(second));
  const fs::path file = fs::path(second.location) / checkpoint_storage::metadata_file_name;
  const std::string whole = checkpoint_storage::encode_metadata(second);

  auto rewrite = [&](const std::string& bytes) {
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  };
  for (std::size_t length = 0; length < whole.size(); ++length) {
    INFO("torn at " << length << " of " << whole.size() << " bytes");
    rewrite(whole.substr(0, length));
    const restart_view view = restart(dir.path(), graph);
    REQUIRE(view.latest);
    CHECK(*view.latest == first);
    CHECK(view.next_id > 1);
    // An empty one is a checkpoint that never completed: its folder goes. A torn one stays,
    // named in a warning (it may be a completed checkpoint the disk damaged).
    CHECK(fs::exists(file) == (length > 0));
  }
  for (std::size_t at = 0; at < whole.size(); ++at) {
    INFO("byte " << at << " flipped");
    std::string corrupt = whole;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x5A);
    rewrite(corrupt);
    const restart_view view = restart(dir.path(), graph);
    REQUIRE(view.latest);
    CHECK(*view.latest == first);
  }
  rewrite(whole);
  const restart_view view = restart(dir.path(), graph);
  REQUIRE(view.latest);
  CHECK(*view.latest == second);
  CHECK(view.next_id > 2);
}
