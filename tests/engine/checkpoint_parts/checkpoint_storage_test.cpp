#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <string>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_all(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
}

completed_checkpoint sample(const checkpoint_storage& storage, checkpoint_id id) {
  completed_checkpoint c;
  c.job = "a1b2c3d4e5f6";
  c.id = id;
  c.kind = checkpoint_trigger_kind::periodic;
  c.trigger_timestamp_us = 1'700'000'000'000'000 + id;
  c.completion_timestamp_us = c.trigger_timestamp_us + 1234;
  c.location = storage.checkpoint_dir(id).string();
  c.subtask_states[{1, 0}] = subtask_state{{{c.location + "/v1-0", 100, 0xDEADBEEFu}}, 100};
  c.subtask_states[{1, 1}] =
      subtask_state{{{c.location + "/v1-1a", 5, 1u}, {c.location + "/v1-1b", 7, 2u}}, 12};
  c.subtask_states[{2, 0}] = subtask_state{{}, 0};
  c.master_states["offsets"] = std::string("\0\x01\xFFtail", 7);
  c.master_states["empty"] = "";
  return c;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(needle) != std::string::npos; });
}

// A metadata frame around an arbitrary body, with a correct length and checksum.
std::string frame(const std::string& body) {
  std::string out(checkpoint_storage::metadata_magic);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(i == 0 ? 1 : 0));
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((body.size() >> (8 * i)) & 0xFF));
  out += body;
  const std::uint32_t crc = crc32c(out);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out;
}

// The metadata in `c.location` reads back as exactly `c`.
void check_reads_back(const completed_checkpoint& c) {
  auto read = checkpoint_storage::read_metadata(c.location);
  REQUIRE(read.ok());
  CHECK(*read == c);
}

}  // namespace

TEST_CASE("checkpoint storage names checkpoint and savepoint folders") {
  checkpoint_storage storage(fs::path("state") / "job-1");
  CHECK(storage.checkpoint_dir(42) == fs::path("state") / "job-1" / "chk-42");
  CHECK(checkpoint_storage::savepoint_dir("sp", "abcdef0123", 7) ==
        fs::path("sp") / "savepoint-abcdef-7");
  CHECK(checkpoint_storage::savepoint_dir("sp", "ab", 7) == fs::path("sp") / "savepoint-ab-7");
}

TEST_CASE("checkpoint storage writes metadata durably and reads it back unchanged") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "state" / "job");
  const completed_checkpoint c = sample(storage, 3);
  auto written = storage.write_metadata(c);
  INFO((written ? std::string() : written.err().message));
  REQUIRE(written.ok());
  CHECK(fs::exists(storage.checkpoint_dir(3) / "_metadata"));
  CHECK_FALSE(fs::exists(storage.checkpoint_dir(3) / "_metadata.tmp"));

  auto read = checkpoint_storage::read_metadata(storage.checkpoint_dir(3));
  INFO((read ? std::string() : read.err().message));
  REQUIRE(read.ok());
  CHECK(*read == c);

  // A savepoint elsewhere, rewritten in place.
  completed_checkpoint sp = sample(storage, 4);
  sp.kind = checkpoint_trigger_kind::savepoint;
  sp.location = checkpoint_storage::savepoint_dir(tmp.path() / "sp", sp.job, 4).string();
  REQUIRE(storage.write_metadata(sp).ok());
  sp.master_states["offsets"] = "changed";
  REQUIRE(storage.write_metadata(sp).ok());
  auto sp_read = checkpoint_storage::read_metadata(sp.location);
  REQUIRE(sp_read.ok());
  CHECK(*sp_read == sp);
  CHECK(sp_read->is_savepoint());
}

TEST_CASE("checkpoint storage writes the metadata into the file its preparation opened") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "state" / "job");
  const completed_checkpoint c = sample(storage, 5);
  auto prepared = checkpoint_storage::prepare_location(c.location);
  REQUIRE(prepared.ok());
  CHECK(prepared->is_open());
  CHECK(prepared->folder() == fs::path(c.location));
  // Prepared: the folder and an empty `_metadata`, which is not a checkpoint.
  CHECK(fs::is_directory(c.location));
  CHECK(fs::file_size(fs::path(c.location) / "_metadata") == 0);
  auto empty = checkpoint_storage::read_metadata(c.location);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.err().message.find("no metadata written") != std::string::npos);
  CHECK(storage.recover().checkpoints.empty());
  // A preparation never written (a crash between two checkpoints leaves one) is taken over by
  // the next preparation of that folder.
  prepared = prepared_metadata();
  prepared = checkpoint_storage::prepare_location(c.location);
  REQUIRE(prepared.ok());

  REQUIRE(storage.write_metadata(c, std::move(prepared).value()).ok());
  check_reads_back(c);
  CHECK_FALSE(fs::exists(fs::path(c.location) / "_metadata.tmp"));
  REQUIRE(storage.recover().checkpoints.size() == 1);
  // One with bytes in it is refused, and left as it was.
  auto refused_whole = checkpoint_storage::prepare_location(c.location);
  REQUIRE_FALSE(refused_whole.ok());
  CHECK(refused_whole.err().message.find("metadata file already") != std::string::npos);
  check_reads_back(c);  // left as it was

  // A folder removed after its preparation fails the write with the file named, and nothing
  // is created in its place.
  const completed_checkpoint gone = sample(storage, 6);
  auto gone_prepared = checkpoint_storage::prepare_location(gone.location);
  REQUIRE(gone_prepared.ok());
  fs::remove_all(gone.location);
  auto failed = storage.write_metadata(gone, std::move(gone_prepared).value());
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.err().message.find(gone.location) != std::string::npos);
  CHECK(failed.err().message.find("removed") != std::string::npos);
  CHECK_FALSE(fs::exists(gone.location));
  // The other way still creates what is missing.
  REQUIRE(storage.write_metadata(gone).ok());
  CHECK(fs::exists(fs::path(gone.location) / "_metadata"));

  // The write in one go replaces an empty prepared file (a preparation whose file the
  // coordinator dropped): atomically, by its rename.
  const completed_checkpoint replaced = sample(storage, 7);
  { REQUIRE(checkpoint_storage::prepare_location(replaced.location).ok()); }
  REQUIRE(storage.write_metadata(replaced).ok());
  check_reads_back(replaced);

  // A checkpoint that ends otherwise drops its prepared file; the discard removes the folder.
  const completed_checkpoint dropped = sample(storage, 8);
  {
    auto unused = checkpoint_storage::prepare_location(dropped.location);
    REQUIRE(unused.ok());
  }
  REQUIRE(checkpoint_storage::discard_location(dropped.location).ok());
  CHECK_FALSE(fs::exists(dropped.location));

  // A path where the folder cannot be: the preparation fails with it named.
  std::ofstream(tmp.path() / "state" / "job" / "not-a-folder") << "x";
  auto refused =
      checkpoint_storage::prepare_location(tmp.path() / "state" / "job" / "not-a-folder");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().message.find("not-a-folder") != std::string::npos);
}

TEST_CASE("checkpoint storage keeps inline states in _metadata and verifies them") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "state" / "job");
  completed_checkpoint c = sample(storage, 5);
  const std::string bytes("\0small\xFFstate", 13);
  state_handle inline_handle{"", bytes.size(), crc32c(bytes), bytes};
  c.subtask_states[{3, 0}] = subtask_state{{inline_handle}, bytes.size()};
  REQUIRE(storage.write_metadata(c).ok());
  auto read = checkpoint_storage::read_metadata(storage.checkpoint_dir(5));
  INFO((read ? std::string() : read.err().message));
  REQUIRE(read.ok());
  CHECK(*read == c);
  CHECK(checkpoint_storage::verify_state(inline_handle).ok());
  state_handle corrupt = inline_handle;
  corrupt.checksum ^= 1;
  CHECK_FALSE(checkpoint_storage::verify_state(corrupt).ok());
  // Discarding an inline state touches no file.
  CHECK(checkpoint_storage::discard_state({inline_handle}).ok());
}

TEST_CASE("checkpoint metadata refuses an inline handle that also names a path, or whose bytes are not bin") {
  checkpoint_storage storage("job");
  completed_checkpoint c = sample(storage, 6);
  c.subtask_states.clear();
  const std::string bytes("\0small\xFFstate", 13);
  c.subtask_states[{3, 0}] = subtask_state{{state_handle{"", bytes.size(), crc32c(bytes), bytes}},
                                           bytes.size()};
  const std::string good = checkpoint_storage::encode_metadata(c);
  REQUIRE(checkpoint_storage::decode_metadata(good).ok());
  // The body between the 24-byte header and the 4-byte checksum, patched and framed again.
  const std::string body = good.substr(24, good.size() - 28);
  const auto patched = [&](const std::string& from, const std::string& to) {
    const std::size_t at = body.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(body.find(from, at + 1) == std::string::npos);
    std::string out = body;
    out.replace(at, from.size(), to);
    return checkpoint_storage::decode_metadata(frame(out));
  };
  REQUIRE(patched("\xa5" "bytes", "\xa5" "bytes").ok());  // the patching itself keeps it valid

  // A handle map of 4 entries: a path before the bytes.
  auto both = patched(std::string("\x83\xa5" "bytes", 7), std::string("\x84\xa4path\xa1x\xa5" "bytes", 14));
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.err().message, Catch::Contains("a path or bytes, not both"));

  // The same 13 bytes as a str instead of a bin.
  auto as_str = patched(std::string("\xa5" "bytes\xc4\x0d", 8), std::string("\xa5" "bytes\xad", 7));
  REQUIRE_FALSE(as_str.ok());
  CHECK_THAT(as_str.err().message, Catch::Contains("field 'bytes' is missing or not bin"));
}

TEST_CASE("checkpoint metadata keeps a keyed subtask's max parallelism and key groups, and "
          "refuses a range outside it") {
  checkpoint_storage storage("job");
  completed_checkpoint c = sample(storage, 8);
  c.subtask_states.clear();
  c.subtask_states[{3, 0}] = subtask_state{{}, 0, keyed_state_scope{128, 0, 63}};
  c.subtask_states[{4, 0}] = subtask_state{{}, 0};  // not keyed: no scope, as in older files
  const std::string good = checkpoint_storage::encode_metadata(c);
  auto read = checkpoint_storage::decode_metadata(good);
  REQUIRE(read.ok());
  CHECK(*read == c);
  CHECK_FALSE(read->subtask_states.at({4, 0}).keyed.has_value());

  const std::string body = good.substr(24, good.size() - 28);
  const std::string scope("\x93\xcc\x80\x00\x3f", 5);  // [128, 0, 63]
  const auto with_scope = [&](const std::string& to) {
    std::string out = body;
    const std::size_t at = out.find(scope);
    REQUIRE(at != std::string::npos);
    out.replace(at, scope.size(), to);
    return checkpoint_storage::decode_metadata(frame(out));
  };
  REQUIRE(with_scope(scope).ok());
  for (const std::string& bad : {std::string("\x93\xcc\x80\x00\xcc\xc8", 6),  // last 200 >= 128
                                 std::string("\x93\xcc\x80\x10\x0f", 5),       // first > last
                                 std::string("\x93\x00\x00\x00", 4),            // max 0
                                 std::string("\x92\xcc\x80\x00", 4)}) {         // two entries
    auto refused = with_scope(bad);
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.err().message, Catch::Contains("key_groups"));
  }
}

TEST_CASE("checkpoint storage recover skips torn, corrupt and missing metadata with warnings") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "job");
  for (checkpoint_id id = 1; id <= 5; ++id)
    REQUIRE(storage.write_metadata(sample(storage, id)).ok());
  const auto meta = [&](checkpoint_id id) { return storage.checkpoint_dir(id) / "_metadata"; };

  const std::string two = read_all(meta(2));
  write_all(meta(2), two.substr(0, two.size() / 2));  // truncated
  std::string three = read_all(meta(3));
  three[three.size() / 2] = static_cast<char>(three[three.size() / 2] ^ 0x40);  // flipped bit
  write_all(meta(3), three);
  fs::remove(meta(4));  // in progress when the process died: a task's state file, no metadata
  write_all(storage.checkpoint_dir(4) / "state-1-0", "state");
  fs::create_directories(storage.checkpoint_dir(7));  // made ahead, never used: no warning
  // A copy of checkpoint 1's metadata in the wrong folder, and things recover must not mind.
  fs::create_directories(storage.checkpoint_dir(6));
  fs::copy_file(meta(1), meta(6));
  fs::create_directories(tmp.path() / "job" / "chk-x");
  write_all(tmp.path() / "job" / "checkpoint_id_counter", "not a checkpoint");
  fs::create_directories(tmp.path() / "job" / "shared");

  const auto recovered = storage.recover();
  std::vector<checkpoint_id> ids;
  for (const auto& c : recovered.checkpoints) ids.push_back(c.id);
  CHECK(ids == std::vector<checkpoint_id>{1, 5});
  CHECK(recovered.checkpoints[1] == sample(storage, 5));
  CHECK(recovered.warnings.size() == 5);
  CHECK(any_contains(recovered.warnings, "chk-2"));
  CHECK(any_contains(recovered.warnings, "chk-3"));
  CHECK(any_contains(recovered.warnings, "chk-4"));
  CHECK(any_contains(recovered.warnings, "chk-6"));
  CHECK(any_contains(recovered.warnings, "chk-x"));
  CHECK(any_contains(recovered.warnings, "checksum"));
  CHECK(recovered.empty_folders == std::vector<fs::path>{storage.checkpoint_dir(7)});
}

TEST_CASE("checkpoint storage recover of a missing job folder is empty") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "never-written");
  const auto recovered = storage.recover();
  CHECK(recovered.checkpoints.empty());
  CHECK(recovered.warnings.empty());
}

TEST_CASE("checkpoint metadata decoding refuses malformed input without throwing") {
  checkpoint_storage storage("job");
  const std::string good = checkpoint_storage::encode_metadata(sample(storage, 1));
  REQUIRE(checkpoint_storage::decode_metadata(good).ok());

  CHECK_FALSE(checkpoint_storage::decode_metadata("").ok());
  CHECK_FALSE(checkpoint_storage::decode_metadata(good.substr(0, 20)).ok());
  std::string magic = good;
  magic[0] = 'X';
  CHECK_FALSE(checkpoint_storage::decode_metadata(magic).ok());
  std::string version = good;
  version[12] = 2;
  CHECK_FALSE(checkpoint_storage::decode_metadata(version).ok());
  CHECK_FALSE(checkpoint_storage::decode_metadata(good + "x").ok());

  // Well framed, bad inside: the checksum passes, the body must still be checked.
  CHECK_FALSE(checkpoint_storage::decode_metadata(frame("\xc1")).ok());   // never-used byte
  CHECK_FALSE(checkpoint_storage::decode_metadata(frame("\x93\x01")).ok());  // truncated array
  CHECK_FALSE(checkpoint_storage::decode_metadata(frame("\x01")).ok());   // not a map
  CHECK_FALSE(checkpoint_storage::decode_metadata(frame("\x80")).ok());   // empty map
  // An array claiming 4 billion elements in a 5-byte body.
  CHECK_FALSE(checkpoint_storage::decode_metadata(frame("\xdd\xff\xff\xff\xff")).ok());
  // Every single-byte flip inside the body is caught by the checksum.
  for (std::size_t i = 24; i < good.size() - 4; i += 7) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    CHECK_FALSE(checkpoint_storage::decode_metadata(bad).ok());
  }
}

TEST_CASE("checkpoint storage discards folders and state files, missing ones included") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "job");
  REQUIRE(storage.write_metadata(sample(storage, 1)).ok());
  const fs::path dir = storage.checkpoint_dir(1);
  write_all(dir / "state-a", "a");
  REQUIRE(checkpoint_storage::discard_location(dir).ok());
  CHECK_FALSE(fs::exists(dir));
  CHECK(checkpoint_storage::discard_location(dir).ok());

  write_all(tmp.path() / "s1", "one");
  write_all(tmp.path() / "s2", "two");
  const std::vector<state_handle> handles = {{(tmp.path() / "s1").string(), 3, 0},
                                             {(tmp.path() / "s2").string(), 3, 0},
                                             {(tmp.path() / "gone").string(), 3, 0}};
  REQUIRE(checkpoint_storage::discard_state(handles).ok());
  CHECK_FALSE(fs::exists(tmp.path() / "s1"));
  CHECK_FALSE(fs::exists(tmp.path() / "s2"));
  CHECK(checkpoint_storage::discard_state(handles).ok());
}

TEST_CASE("checkpoint storage sweeps orphaned checkpoint folders in a range, keeping the rest") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "job");
  // A missing job folder: nothing to sweep, nothing failed.
  auto none = storage.sweep_orphans(1, 100, {});
  CHECK(none.removed.empty());
  CHECK(none.failures.empty());

  for (checkpoint_id id : {2, 3, 4, 5, 6, 9}) {
    fs::create_directories(storage.checkpoint_dir(id));
    write_all(storage.checkpoint_dir(id) / "state-0-0", "late");
  }
  fs::create_directories(tmp.path() / "job" / "chk-007");  // not a canonical name
  fs::create_directories(tmp.path() / "job" / "shared");
  write_all(tmp.path() / "job" / "chk-8", "a file, not a folder");
  write_all(tmp.path() / "job" / "checkpoint_id", "counter");

  // 2 is below the range (not this run's), 4 is kept, 9 above the range (not triggered yet).
  auto swept = storage.sweep_orphans(3, 8, {4});
  std::sort(swept.removed.begin(), swept.removed.end());
  CHECK(swept.removed == std::vector<checkpoint_id>{3, 5, 6});
  CHECK(swept.failures.empty());
  for (checkpoint_id id : {3, 5, 6}) CHECK_FALSE(fs::exists(storage.checkpoint_dir(id)));
  for (checkpoint_id id : {2, 4, 9}) CHECK(fs::exists(storage.checkpoint_dir(id) / "state-0-0"));
  CHECK(fs::exists(tmp.path() / "job" / "chk-007"));
  CHECK(fs::exists(tmp.path() / "job" / "shared"));
  CHECK(read_all(tmp.path() / "job" / "chk-8") == "a file, not a folder");
  CHECK(read_all(tmp.path() / "job" / "checkpoint_id") == "counter");
  CHECK(checkpoint_storage::checkpoint_folder_id("chk-12") == checkpoint_id{12});
  CHECK_FALSE(checkpoint_storage::checkpoint_folder_id("chk-012"));
  CHECK_FALSE(checkpoint_storage::checkpoint_folder_id("savepoint-a1b2c3-12"));
}

TEST_CASE("checkpoint storage verifies a state file's size and checksum") {
  temp_folder tmp;
  const fs::path file = tmp.path() / "state";
  std::string content(300'000, 'x');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 31);
  write_all(file, content);
  state_handle h{file.string(), content.size(), crc32c(content)};
  CHECK(checkpoint_storage::verify_state(h).ok());

  state_handle wrong_size = h;
  wrong_size.size += 1;
  CHECK_FALSE(checkpoint_storage::verify_state(wrong_size).ok());

  content[1000] = static_cast<char>(content[1000] ^ 1);
  write_all(file, content);
  auto corrupt = checkpoint_storage::verify_state(h);
  REQUIRE_FALSE(corrupt.ok());
  CHECK_THAT(corrupt.err().message, Catch::Contains("checksum"));

  state_handle missing{(tmp.path() / "missing").string(), 0, 0};
  CHECK_FALSE(checkpoint_storage::verify_state(missing).ok());
}

TEST_CASE("checkpoint metadata keeps which state files are shared, and refuses an unknown "
          "sharing or a shared inline state") {
  checkpoint_storage storage("job");
  completed_checkpoint c = sample(storage, 9);
  c.subtask_states.clear();
  c.subtask_states[{1, 0}] = subtask_state{
      {state_handle{"job/shared/a.sst", 10, 1u, std::nullopt, handle_sharing::shared_new},
       state_handle{"job/shared/b.sst", 20, 2u, std::nullopt, handle_sharing::shared_reused},
       state_handle{c.location + "/own", 5, 3u, std::nullopt}},
      35};
  const std::string good = checkpoint_storage::encode_metadata(c);
  auto read = checkpoint_storage::decode_metadata(good);
  REQUIRE(read.ok());
  CHECK(*read == c);

  const std::string body = good.substr(24, good.size() - 28);
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string out = body;
    const std::size_t at = out.find(from);
    REQUIRE(at != std::string::npos);
    out.replace(at, from.size(), to);
    return checkpoint_storage::decode_metadata(frame(out));
  };
  // Same length, so the map stays well formed: only the name is unknown.
  auto unknown = replaced("shared_new", "shared_old");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.err().message, Catch::Contains("sharing"));
}

TEST_CASE("checkpoint storage lists and removes the shared files no kept checkpoint names") {
  temp_folder tmp{"shared-sweep"};
  const fs::path job = tmp.path() / "job";
  const fs::path shared = job / checkpoint_storage::shared_folder_name;
  fs::create_directories(shared / "a-folder");
  for (const char* name : {"used.sst", "orphan.sst"}) write_all(shared / name, "x");
  write_all(tmp.path() / "outside.sst", "x");
  fs::create_symlink(tmp.path() / "outside.sst", shared / "link.sst");
  completed_checkpoint kept;
  kept.id = 4;
  kept.subtask_states[{1, 0}] = subtask_state{
      {state_handle{fs::absolute(shared / "used.sst").string(), 1, 0, std::nullopt,
                    handle_sharing::shared_reused}},
      1};
  const auto unused = checkpoint_storage::unreferenced_shared_files(job, {kept});
  REQUIRE(unused.size() == 1);
  CHECK(unused[0].filename() == "orphan.sst");
  CHECK(checkpoint_storage::remove_unreferenced_shared_files(job, {kept}).removed.size() == 1);
  CHECK_FALSE(fs::exists(shared / "orphan.sst"));
  CHECK(fs::exists(shared / "used.sst"));
  // Neither a folder nor a symlink (nor what it points to) is touched.
  CHECK(fs::exists(shared / "a-folder"));
  CHECK(fs::exists(tmp.path() / "outside.sst"));
  // No shared folder: nothing to list.
  CHECK(checkpoint_storage::unreferenced_shared_files(tmp.path() / "none", {}).empty());
}
