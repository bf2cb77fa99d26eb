// Moving a snapshot into a new job's folder for CLAIM mode: what is linked where, the metadata
// the job's recovery reads, refusals that leave everything as it was, and crashes between the
// steps that always leave a complete copy.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include <sys/stat.h>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/checkpoint/snapshot_adoption.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
namespace fs = std::filesystem;

namespace {

// `_metadata` in one go, as a sealed job leaves it.
void write_metadata(const completed_checkpoint& c) {
  REQUIRE(checkpoint_storage::write_file_durably(fs::path(c.location) / "_metadata",
                                                 checkpoint_storage::encode_metadata(c)));
}

state_handle write_state(const fs::path& file, const std::string& bytes, handle_sharing sharing) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << bytes;
  state_handle h;
  h.path = file.string();
  h.size = bytes.size();
  h.checksum = crc32c(bytes);
  h.sharing = sharing;
  return h;
}

// chk-<id> of `old_job_dir` with one own file and the shared files named, as the coordinator
// writes it (absolute paths).
completed_checkpoint write_checkpoint(const fs::path& old_job_dir, checkpoint_id id,
                                      const std::vector<std::string>& shared_names) {
  completed_checkpoint c;
  c.job = "old-job";
  c.id = id;
  c.kind = checkpoint_trigger_kind::periodic;
  c.location = checkpoint_storage::checkpoint_dir(old_job_dir, id).string();
  subtask_state s;
  s.handles.push_back(write_state(fs::path(c.location) / "own-0", "own state " + std::to_string(id),
                                  handle_sharing::exclusive));
  for (const auto& name : shared_names)
    s.handles.push_back(write_state(old_job_dir / "shared" / name, "shared " + name,
                                    handle_sharing::shared_reused));
  state_handle inline_handle;
  inline_handle.inline_bytes = "tiny";
  inline_handle.size = 4;
  inline_handle.checksum = crc32c("tiny");
  s.handles.push_back(inline_handle);
  c.subtask_states[subtask_id{1, 0}] = s;
  write_metadata(c);
  return c;
}

completed_checkpoint write_savepoint(const fs::path& folder) {
  completed_checkpoint c;
  c.job = "old-job";
  c.id = 9;
  c.kind = checkpoint_trigger_kind::savepoint;
  c.location = folder.string();
  subtask_state s;
  s.handles.push_back(
      write_state(folder / "state-0", "savepoint state", handle_sharing::exclusive));
  c.subtask_states[subtask_id{1, 0}] = s;
  write_metadata(c);
  return c;
}

// Every file under `folder` with its bytes: what "unchanged" means.
std::map<fs::path, std::string> contents(const fs::path& folder) {
  std::map<fs::path, std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) {
      std::ifstream in(it->path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      out[it->path().lexically_relative(folder)] = text.str();
    }
  return out;
}

ino_t inode(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

// What the new job's recovery makes of its folder.
std::vector<completed_checkpoint> recovered(const fs::path& job_dir) {
  auto r = checkpoint_storage(job_dir).recover();
  INFO((r.warnings.empty() ? std::string() : r.warnings.front()));
  CHECK(r.warnings.empty());
  return r.checkpoints;
}

void check_restorable(const completed_checkpoint& c) {
  for (const state_handle& h : c.all_handles()) {
    if (h.is_inline()) continue;
    INFO(h.path);
    CHECK(checkpoint_storage::verify_state(h));
  }
}

}  // namespace

TEST_CASE("snapshot adoption: a retained incremental checkpoint with shared files") {
  testing::temp_folder state("adopt");
  const fs::path old_job = state.path() / "old-job", new_job = state.path() / "new-job";
  write_checkpoint(old_job, 3, {"a.sst", "b.sst"});
  const completed_checkpoint other = write_checkpoint(old_job, 4, {"b.sst"});
  const fs::path source = checkpoint_storage::checkpoint_dir(old_job, 3);

  auto adopted = snapshot_adoption::adopt(source, new_job, "new-job");
  REQUIRE(adopted);
  CHECK(adopted->job == "new-job");
  CHECK(adopted->id == 3);
  CHECK(adopted->location == checkpoint_storage::checkpoint_dir(new_job, 3).string());
  // Linked, not copied: one inode for both names.
  CHECK(inode(new_job / "shared" / "a.sst") == inode(old_job / "shared" / "a.sst"));
  CHECK(inode(new_job / "chk-3" / "own-0") == inode(source / "own-0"));
  for (const state_handle& h : adopted->all_handles())
    if (!h.is_inline())
      CHECK(fs::path(h.path).lexically_relative(new_job).begin()->string() !=
            "..");  // every file inside the new job's folder

  auto found = recovered(new_job);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == *adopted);
  check_restorable(found[0]);
  // The new job's sweep keeps every file its checkpoint names.
  CHECK(checkpoint_storage::unreferenced_shared_files(new_job, found).empty());

  // The source still there until released; the old job's other checkpoint whole after.
  CHECK(fs::exists(source / "_metadata"));
  REQUIRE(snapshot_adoption::release_source(source));
  CHECK_FALSE(fs::exists(source));
  check_restorable(other);
  auto old_left = checkpoint_storage(old_job).recover().checkpoints;
  REQUIRE(old_left.size() == 1);
  // a.sst was used by the claimed checkpoint only: the old job's sweep may drop its link now.
  CHECK(checkpoint_storage::unreferenced_shared_files(old_job, old_left) ==
        std::vector<fs::path>{fs::absolute(old_job / "shared" / "a.sst").lexically_normal()});
  check_restorable(recovered(new_job)[0]);
}

TEST_CASE("snapshot adoption: a savepoint becomes a subsumable checkpoint of the job") {
  testing::temp_folder state("adopt");
  const fs::path source = state.path() / "savepoints" / "savepoint-abc-9";
  write_savepoint(source);
  const fs::path new_job = state.path() / "new-job";
  auto adopted = snapshot_adoption::adopt(source, new_job, "new-job");
  REQUIRE(adopted);
  CHECK_FALSE(adopted->is_savepoint());
  CHECK_FALSE(fs::exists(new_job / "shared"));
  auto found = recovered(new_job);
  REQUIRE(found.size() == 1);
  CHECK(found[0].id == 9);
  CHECK_FALSE(found[0].is_savepoint());
  check_restorable(found[0]);
  REQUIRE(snapshot_adoption::release_source(source));
  CHECK_FALSE(fs::exists(source));
  check_restorable(recovered(new_job)[0]);
}

TEST_CASE("snapshot adoption: refusals leave the source and the job folder as they were") {
  testing::temp_folder state("adopt");
  const fs::path old_job = state.path() / "old-job", new_job = state.path() / "new-job";
  write_checkpoint(old_job, 3, {"a.sst"});
  const fs::path source = checkpoint_storage::checkpoint_dir(old_job, 3);
  const auto before = contents(old_job);
  const auto refused = [&](const fs::path& from, const std::string& why) {
    auto r = snapshot_adoption::adopt(from, new_job, "new-job");
    REQUIRE_FALSE(r);
    INFO(r.err().message);
    CHECK_THAT(r.err().message, Catch::Contains(why));
    CHECK(recovered(new_job).empty());
    CHECK(contents(new_job).empty());  // nothing linked or staged is left behind
  };

  SECTION("missing metadata") {
    fs::create_directories(state.path() / "other" / "chk-8");
    refused(state.path() / "other" / "chk-8", "chk-8");
  }
  SECTION("torn metadata") {
    const fs::path torn = state.path() / "other" / "chk-7";
    fs::create_directories(torn);
    std::string bytes;
    {
      std::ifstream in(source / "_metadata", std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      bytes = text.str();
    }
    std::ofstream(torn / "_metadata", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    refused(torn, "chk-7");
  }
  SECTION("a symlink as the source") {
    fs::create_directory_symlink(source, state.path() / "link");
    refused(state.path() / "link", "symlink");
  }
  SECTION("a symlink inside the folder, leading out") {
    fs::create_directories(state.path() / "elsewhere");
    fs::create_directory_symlink(state.path() / "elsewhere", source / "escape");
    refused(source, "escape");
    fs::remove(source / "escape");
  }
  SECTION("a shared file replaced by a symlink out") {
    std::ofstream(state.path() / "secret") << "secret";
    fs::remove(old_job / "shared" / "a.sst");
    fs::create_symlink(state.path() / "secret", old_job / "shared" / "a.sst");
    refused(source, "a.sst");
    fs::remove(old_job / "shared" / "a.sst");
    CHECK(fs::exists(state.path() / "secret"));
    return;  // the shared file is gone in this section
  }
  SECTION("metadata naming a file outside its folder") {
    completed_checkpoint c = *checkpoint_storage::read_metadata(source);
    std::ofstream(state.path() / "outside") << "x";
    c.subtask_states.begin()->second.handles[0].path = (state.path() / "outside").string();
    const fs::path hostile = old_job / "chk-5";
    c.id = 5;
    c.location = hostile.string();
    write_metadata(c);
    refused(hostile, "outside");
    fs::remove_all(hostile);
  }
  SECTION("the job folder already holds that checkpoint") {
    fs::create_directories(new_job / "chk-3");
    std::ofstream(new_job / "chk-3" / "mine") << "mine";
    auto r = snapshot_adoption::adopt(source, new_job, "new-job");
    REQUIRE_FALSE(r);
    CHECK(fs::exists(new_job / "chk-3" / "mine"));
  }
  SECTION("a source inside the job folder") {
    auto r = snapshot_adoption::adopt(source, old_job, "old-job");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("inside"));
  }
  CHECK(contents(old_job) == before);
}

TEST_CASE("snapshot adoption: a crash after any step leaves a complete copy, and a retry "
          "completes") {
  using step = snapshot_adoption::step;
  for (step stop : {step::shared_linked, step::folder_staged, step::metadata_rewritten,
                    step::synced, step::published}) {
    INFO("stopped after step " << static_cast<int>(stop));
    testing::temp_folder state("adopt");
    const fs::path old_job = state.path() / "old-job", new_job = state.path() / "new-job";
    write_checkpoint(old_job, 3, {"a.sst"});
    const fs::path source = checkpoint_storage::checkpoint_dir(old_job, 3);
    const auto before = contents(old_job);
    auto crashed = snapshot_adoption::adopt(source, new_job, "new-job",
                                            [stop](step s) { return s == stop; });
    REQUIRE_FALSE(crashed);
    // The source is whole and restorable, whatever the step.
    CHECK(contents(old_job) == before);
    auto source_read = checkpoint_storage::read_metadata(source);
    REQUIRE(source_read);
    check_restorable(*source_read);
    // The new job has the checkpoint whole, or not at all.
    auto found = recovered(new_job);
    CHECK(found.size() == (stop == step::published ? 1u : 0u));
    for (const auto& c : found) check_restorable(c);
    if (stop == step::published) continue;
    // The job's start sweeps what the interrupted adoption linked; the source keeps its files.
    checkpoint_storage::remove_unreferenced_shared_files(new_job, found);
    CHECK(contents(old_job) == before);
    // Submitting again adopts it from scratch.
    auto again = snapshot_adoption::adopt(source, new_job, "new-job");
    REQUIRE(again);
    REQUIRE(recovered(new_job).size() == 1);
    check_restorable(recovered(new_job)[0]);
  }
}

TEST_CASE("snapshot adoption: across file systems the files are copied, not linked") {
  std::error_code ec;
  struct stat shm {}, tmp {};
  if (!fs::is_directory("/dev/shm", ec) || ::stat("/dev/shm", &shm) != 0 ||
      ::stat(fs::temp_directory_path().c_str(), &tmp) != 0 || shm.st_dev == tmp.st_dev) {
    WARN("no second file system (/dev/shm) here: the copy fallback is not exercised");
    return;
  }
  testing::temp_folder other("adopt", "/dev/shm");
  testing::temp_folder state("adopt");
  const fs::path old_job = other.path() / "old-job", new_job = state.path() / "new-job";
  write_checkpoint(old_job, 3, {"a.sst"});
  const fs::path source = checkpoint_storage::checkpoint_dir(old_job, 3);
  auto adopted = snapshot_adoption::adopt(source, new_job, "new-job");
  REQUIRE(adopted);
  CHECK(inode(new_job / "chk-3" / "own-0") != inode(source / "own-0"));
  auto found = recovered(new_job);
  REQUIRE(found.size() == 1);
  REQUIRE(snapshot_adoption::release_source(source));
  check_restorable(found[0]);
}
