// engine/checkpoint/state_handle_confinement: what an acknowledgement may name, and what a
// discard may remove.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "engine/checkpoint/state_handle_confinement.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
namespace fs = std::filesystem;

namespace {

fs::path write_file(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "state";
  return p;
}

state_handle file_handle(const fs::path& p) { return state_handle{p.string(), 5, 0, std::nullopt}; }

}  // namespace

TEST_CASE("state handle confinement: relative names become paths inside the checkpoint folder") {
  testing::temp_folder tmp{"confine"};
  const fs::path chk = tmp.path() / "job" / "chk-1";
  subtask_state s;
  s.handles = {state_handle{"op-0", 5, 0, std::nullopt}, state_handle{"", 2, 0, "xy"}};
  REQUIRE(confine_state_handles(s, chk));
  CHECK(fs::path(s.handles[0].path) == fs::absolute(chk / "op-0").lexically_normal());
  CHECK(s.handles[1].path.empty());
}

TEST_CASE("state handle confinement: a refusal leaves the state as it came") {
  testing::temp_folder tmp{"confine"};
  subtask_state s;
  s.handles = {state_handle{"fine", 5, 0, std::nullopt}, state_handle{"../../etc", 5, 0, std::nullopt}};
  const subtask_state before = s;
  auto r = confine_state_handles(s, tmp.path() / "job" / "chk-1");
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("../../etc") != std::string::npos);
  CHECK(s == before);
  subtask_state no_folder;
  no_folder.handles = {state_handle{"a", 5, 0, std::nullopt}};
  CHECK_FALSE(confine_state_handles(no_folder, {}));
}

TEST_CASE("state handle confinement: a discard removes only what lies inside the job's folder") {
  testing::temp_folder tmp{"confine"};
  const fs::path job = tmp.path() / "job";
  const fs::path inside = write_file(job / "chk-3" / "op-0");
  const fs::path outside = write_file(tmp.path() / "elsewhere" / "precious");
  const fs::path sibling = write_file(tmp.path() / "job-other" / "chk-3" / "op-0");
  const fs::path climbing = job / "chk-3" / ".." / ".." / "elsewhere" / "precious";

  discard_inside(job, {file_handle(inside), file_handle(outside), file_handle(sibling),
                       file_handle(climbing)},
                 (job / "chk-3").string());
  CHECK_FALSE(fs::exists(inside));
  CHECK_FALSE(fs::exists(job / "chk-3"));
  CHECK(fs::exists(outside));
  CHECK(fs::exists(sibling));

  discard_inside(job, {}, (tmp.path() / "elsewhere").string());
  CHECK(fs::exists(outside));
  discard_inside(job, {}, (job / ".." / "job-other").string());
  CHECK(fs::exists(sibling));
}

TEST_CASE("state handle confinement: a shared handle resolves inside the job's shared folder, "
          "and a savepoint refuses one") {
  testing::temp_folder tmp{"confine"};
  const fs::path chk = tmp.path() / "job" / "chk-2";
  const fs::path shared = tmp.path() / "job" / "shared";
  subtask_state s;
  s.handles = {state_handle{"a.sst", 5, 0, std::nullopt, handle_sharing::shared_reused},
               state_handle{"own", 5, 0, std::nullopt}};
  subtask_state savepoint = s;
  REQUIRE(confine_state_handles(s, chk, shared));
  CHECK(fs::path(s.handles[0].path) == fs::absolute(shared / "a.sst").lexically_normal());
  CHECK(fs::path(s.handles[1].path) == fs::absolute(chk / "own").lexically_normal());

  auto refused = confine_state_handles(savepoint, tmp.path() / "savepoint-1");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.err().message, Catch::Contains("shared"));

  subtask_state climbing;
  climbing.handles = {state_handle{"../chk-1/own", 5, 0, std::nullopt, handle_sharing::shared_new}};
  CHECK_FALSE(confine_state_handles(climbing, chk, shared));
  subtask_state inline_shared;
  inline_shared.handles = {state_handle{"", 2, 0, "xy", handle_sharing::shared_new}};
  CHECK_FALSE(confine_state_handles(inline_shared, chk, shared));
}
