// The job's metadata log (engine/checkpoint/metadata_log.hpp) on its own, and the storage's
// use of it: a logged checkpoint whose unsynced `_metadata` a crash of the machine took is
// recovered from the log, byte for byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/checkpoint/metadata_log.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;
namespace fs = std::filesystem;

namespace {

// Overwrites `bytes.size()` bytes at `offset` (the file keeps its length).
void overwrite(const fs::path& file, std::uint64_t offset, const std::string& bytes) {
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<checkpoint_id> ids_of(const std::vector<metadata_log::record>& records) {
  std::vector<checkpoint_id> out;
  for (const auto& r : records) out.push_back(r.id);
  return out;
}

std::vector<fs::path> segment_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (metadata_log::segment_number(e.path().filename().string())) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

completed_checkpoint sample(const checkpoint_storage& storage, checkpoint_id id) {
  completed_checkpoint c;
  c.job = "a1b2c3d4e5f6";
  c.id = id;
  c.kind = checkpoint_trigger_kind::periodic;
  c.trigger_timestamp_us = 1'700'000'000'000'000 + id;
  c.completion_timestamp_us = c.trigger_timestamp_us + 1234;
  c.location = storage.checkpoint_dir(id).string();
  // Inline state only, as a small job's: the folder holds nothing but `_metadata`.
  state_handle inline_state;
  inline_state.inline_bytes = "offset=" + std::to_string(id);
  inline_state.size = inline_state.inline_bytes->size();
  inline_state.checksum = crc32c(*inline_state.inline_bytes);
  c.subtask_states[{0, 0}] = subtask_state{{inline_state}, inline_state.size};
  c.master_states["hook"] = "chk " + std::to_string(id);
  return c;
}

// A periodic checkpoint the coordinator's way: the folder premade, `_metadata` prepared
// logged, the metadata written into it and appended to the log.
completed_checkpoint complete_logged(const checkpoint_storage& storage, checkpoint_id id) {
  REQUIRE(checkpoint_storage::premake_locations({storage.checkpoint_dir(id)}).ok());
  auto file = checkpoint_storage::prepare_location(
      storage.checkpoint_dir(id), {.folder_premade = true, .logged = true});
  REQUIRE(file.ok());
  CHECK(file->logged());
  completed_checkpoint c = sample(storage, id);
  auto written = storage.write_metadata(c, std::move(file).value());
  INFO((written ? std::string() : written.err().message));
  REQUIRE(written.ok());
  return c;
}

}  // namespace

TEST_CASE("metadata log: appends come back in order, each on whole blocks of a zero-filled "
          "segment") {
  temp_folder tmp;
  metadata_log log(tmp.path(), 1);
  const std::string big(5000, 'x');  // two blocks
  REQUIRE(log.append(1, "one").ok());
  REQUIRE(log.append(2, big).ok());
  REQUIRE(log.append(3, std::string("\0three\0", 7)).ok());

  const auto files = segment_files(tmp.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename() == "_checkpoints-1.log");
  // Room for records_ahead records of the first one's size (one block), not 4 MiB.
  CHECK(fs::file_size(files[0]) == metadata_log::records_ahead * metadata_log::block_bytes);
  // Record 2 starts on the second block, record 3 on the fourth.
  const std::string bytes =
      checkpoint_storage::read_file(files[0], metadata_log::default_segment_bytes).value();
  CHECK(bytes.substr(0, 8) == "SFCKLOG1");
  CHECK(bytes.substr(metadata_log::block_bytes, 8) == "SFCKLOG1");
  CHECK(bytes.substr(3 * metadata_log::block_bytes, 8) == "SFCKLOG1");

  const auto scanned = metadata_log::scan(tmp.path());
  CHECK(scanned.warnings.empty());
  REQUIRE(ids_of(scanned.records) == std::vector<checkpoint_id>{1, 2, 3});
  CHECK(scanned.records[0].metadata == "one");
  CHECK(scanned.records[1].metadata == big);
  CHECK(scanned.records[2].metadata == std::string("\0three\0", 7));
  CHECK(metadata_log::find(tmp.path(), 2) == big);
  CHECK_FALSE(metadata_log::find(tmp.path(), 4));
}

TEST_CASE("metadata log: full segments give way to new ones, and old ones go once the newer "
          "hold `keep` records") {
  temp_folder tmp;
  // Two single-block records per segment.
  metadata_log log(tmp.path(), 3, 2 * metadata_log::block_bytes);
  for (checkpoint_id id = 1; id <= 7; ++id)
    REQUIRE(log.append(id, "metadata " + std::to_string(id)).ok());
  // Segments {1,2} {3,4} {5,6} {7}: {5,6} and {7} hold the newest three, so the others went
  // (after 5 was appended, {3,4} was still needed).
  const auto files = segment_files(tmp.path());
  CHECK(files.size() == 2);
  CHECK_FALSE(fs::exists(tmp.path() / "_checkpoints-1.log"));
  CHECK_FALSE(fs::exists(tmp.path() / "_checkpoints-2.log"));
  const auto scanned = metadata_log::scan(tmp.path());
  CHECK(ids_of(scanned.records) == std::vector<checkpoint_id>{5, 6, 7});

  // Room is known only in an open segment: {7} has one block left.
  CHECK(log.has_room(100));
  CHECK_FALSE(log.has_room(metadata_log::block_bytes));
  CHECK_FALSE(metadata_log(tmp.path(), 3).has_room(1));  // not opened yet

  // A record larger than a segment gets a segment of its own size.
  const std::string large(3 * metadata_log::block_bytes, 'L');
  REQUIRE(log.append(8, large).ok());
  CHECK(metadata_log::find(tmp.path(), 8) == large);
  CHECK(fs::file_size(log.segments().back()) == 4 * metadata_log::block_bytes);
}

TEST_CASE("metadata log: prepare makes the segment ahead of the appends, and a new one when "
          "little room is left") {
  temp_folder tmp;
  metadata_log log(tmp.path(), 1, 4 * metadata_log::block_bytes);
  CHECK_FALSE(log.has_room(1));
  REQUIRE(log.prepare(metadata_log::block_bytes).ok());
  CHECK(log.has_room(100));
  CHECK(segment_files(tmp.path()).size() == 1);
  REQUIRE(log.prepare(metadata_log::block_bytes).ok());  // room enough: nothing new
  CHECK(segment_files(tmp.path()).size() == 1);
  for (checkpoint_id id = 1; id <= 3; ++id) REQUIRE(log.append(id, "m").ok());
  // One block left: a headroom of two blocks needs a new segment.
  REQUIRE(log.prepare(2 * metadata_log::block_bytes).ok());
  CHECK(log.segments().back().filename() == "_checkpoints-2.log");
  REQUIRE(log.append(4, "m").ok());
  CHECK(ids_of(metadata_log::scan(tmp.path()).records) == std::vector<checkpoint_id>{4});
}

TEST_CASE("metadata log: a new log on the same folder starts its own segment and removes an "
          "earlier run's once it holds enough") {
  temp_folder tmp;
  {
    metadata_log first(tmp.path(), 2);
    REQUIRE(first.append(1, "a").ok());
    REQUIRE(first.append(2, "b").ok());
  }
  metadata_log second(tmp.path(), 2);
  REQUIRE(second.append(3, "c").ok());
  // The earlier segment still holds one of the newest two.
  CHECK(segment_files(tmp.path()).size() == 2);
  CHECK(ids_of(metadata_log::scan(tmp.path()).records) == std::vector<checkpoint_id>{1, 2, 3});
  REQUIRE(second.append(4, "d").ok());
  const auto files = segment_files(tmp.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename() == "_checkpoints-2.log");
  CHECK(ids_of(metadata_log::scan(tmp.path()).records) == std::vector<checkpoint_id>{3, 4});
}

TEST_CASE("metadata log: a torn last append is ignored quietly, damage before whole records "
          "is reported") {
  temp_folder tmp;
  metadata_log log(tmp.path(), 1);
  for (checkpoint_id id = 1; id <= 3; ++id)
    REQUIRE(log.append(id, "metadata " + std::to_string(id)).ok());
  const fs::path segment = segment_files(tmp.path()).at(0);

  SECTION("a torn append after the last record") {
    // A header whose payload is cut short, then zeros.
    overwrite(segment, 3 * metadata_log::block_bytes, "SFCKLOG1\x40\x00\x00\x00garbage");
    const auto scanned = metadata_log::scan(tmp.path());
    CHECK(ids_of(scanned.records) == std::vector<checkpoint_id>{1, 2, 3});
    CHECK(scanned.warnings.empty());
  }
  SECTION("a damaged record between whole ones") {
    overwrite(segment, metadata_log::block_bytes + metadata_log::header_bytes + 2, "X");
    const auto scanned = metadata_log::scan(tmp.path());
    CHECK(ids_of(scanned.records) == std::vector<checkpoint_id>{1, 3});
    REQUIRE(scanned.warnings.size() == 1);
    CHECK(scanned.warnings[0].find("damaged record at offset 4096") != std::string::npos);
  }
  SECTION("a file that only looks like a segment") {
    std::ofstream(tmp.path() / "_checkpoints-9.log") << "not a log";
    const auto scanned = metadata_log::scan(tmp.path());
    CHECK(ids_of(scanned.records) == std::vector<checkpoint_id>{1, 2, 3});
    CHECK(scanned.warnings.size() == 1);
  }
}

TEST_CASE("metadata log: a missing folder fails the append with its path, and a later append "
          "works once it exists") {
  temp_folder tmp;
  const fs::path dir = tmp.path() / "job";
  metadata_log log(dir, 1);
  auto failed = log.append(1, "a");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.err().message.find(dir.string()) != std::string::npos);
  CHECK(metadata_log::scan(dir).records.empty());
  fs::create_directories(dir);
  REQUIRE(log.append(2, "b").ok());
  CHECK(ids_of(metadata_log::scan(dir).records) == std::vector<checkpoint_id>{2});
  CHECK_FALSE(metadata_log::segment_number("_checkpoints-.log"));
  CHECK_FALSE(metadata_log::segment_number("_checkpoints-1x.log"));
  CHECK(metadata_log::segment_number("_checkpoints-12.log") == 12u);
}

TEST_CASE("checkpoint storage: a logged checkpoint whose metadata file a crash of the machine "
          "took is recovered from the log") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "job", 1);
  const completed_checkpoint c1 = complete_logged(storage, 1);
  const completed_checkpoint c2 = complete_logged(storage, 2);
  const completed_checkpoint c3 = complete_logged(storage, 3);
  // Written for readers of the folder, and logged.
  CHECK(*checkpoint_storage::read_metadata(c3.location) == c3);
  CHECK(ids_of(metadata_log::scan(storage.job_dir()).records) ==
        std::vector<checkpoint_id>{1, 2, 3});

  // What an unsynced file may look like after the machine died: empty, torn, or not there.
  const fs::path meta1 = fs::path(c1.location) / "_metadata";
  const fs::path meta2 = fs::path(c2.location) / "_metadata";
  const fs::path meta3 = fs::path(c3.location) / "_metadata";
  fs::resize_file(meta1, 0);
  fs::resize_file(meta2, fs::file_size(meta2) / 2);
  fs::remove(meta3);  // its folder is empty now: state inline

  // Reading a folder takes the log's copy.
  auto read = checkpoint_storage::read_metadata(c2.location);
  REQUIRE(read.ok());
  CHECK(*read == c2);

  auto recovered = storage.recover();
  CHECK(recovered.warnings.empty());
  CHECK(recovered.empty_folders.empty());
  REQUIRE(recovered.checkpoints.size() == 3);
  CHECK(recovered.checkpoints[0] == c1);
  CHECK(recovered.checkpoints[1] == c2);
  CHECK(recovered.checkpoints[2] == c3);
  std::vector<checkpoint_id> repaired = recovered.repaired;
  std::sort(repaired.begin(), repaired.end());
  CHECK(repaired == std::vector<checkpoint_id>{1, 2, 3});
  // The files are whole again, on their own.
  fs::remove_all(storage.job_dir() / "_checkpoints-1.log");
  for (const auto* c : {&c1, &c2, &c3})
    CHECK(*checkpoint_storage::read_metadata(c->location) == *c);
}

TEST_CASE("checkpoint storage: a discarded checkpoint's log record does not bring it back, and "
          "savepoints and writes in one go are not logged") {
  temp_folder tmp;
  checkpoint_storage storage(tmp.path() / "job", 1);
  const completed_checkpoint c1 = complete_logged(storage, 1);
  const completed_checkpoint c2 = complete_logged(storage, 2);
  REQUIRE(checkpoint_storage::discard_location(c1.location).ok());
  auto recovered = storage.recover();
  CHECK(recovered.warnings.empty());
  REQUIRE(recovered.checkpoints.size() == 1);
  CHECK(recovered.checkpoints[0] == c2);
  CHECK_FALSE(checkpoint_storage::read_metadata(c1.location).ok());

  // A folder removed between preparation and completion: no log record either.
  REQUIRE(checkpoint_storage::premake_locations({storage.checkpoint_dir(3)}).ok());
  auto file = checkpoint_storage::prepare_location(storage.checkpoint_dir(3),
                                                   {.folder_premade = true, .logged = true});
  REQUIRE(file.ok());
  REQUIRE(checkpoint_storage::discard_location(storage.checkpoint_dir(3)).ok());
  CHECK_FALSE(storage.write_metadata(sample(storage, 3), std::move(file).value()).ok());
  CHECK(ids_of(metadata_log::scan(storage.job_dir()).records) ==
        std::vector<checkpoint_id>{1, 2});

  // A savepoint elsewhere, prepared and written the self-contained way.
  temp_folder other;
  checkpoint_storage fresh(other.path() / "job", 1);
  completed_checkpoint sp = sample(fresh, 4);
  sp.kind = checkpoint_trigger_kind::savepoint;
  sp.location = checkpoint_storage::savepoint_dir(other.path() / "sp", sp.job, 4).string();
  auto sp_file = checkpoint_storage::prepare_location(sp.location);
  REQUIRE(sp_file.ok());
  CHECK_FALSE(sp_file->logged());
  REQUIRE(fresh.write_metadata(sp, std::move(sp_file).value()).ok());
  REQUIRE(fresh.write_metadata(sample(fresh, 5)).ok());
  CHECK(metadata_log::scan(fresh.job_dir()).records.empty());
  CHECK(*checkpoint_storage::read_metadata(sp.location) == sp);
}

TEST_CASE("metadata log: segments follow the size of the records, within their bounds") {
  temp_folder tmp;
  metadata_log log(tmp.path(), 1);
  // Kilobyte records: a segment of records_ahead blocks (256 KiB), not 4 MiB.
  REQUIRE(log.append(1, std::string(1000, 'k')).ok());
  CHECK(fs::file_size(log.segments().back()) ==
        metadata_log::records_ahead * metadata_log::block_bytes);
  // A record of 300 KiB does not fit what is left: its segment, for 64 of them, is bounded
  // by 4 MiB.
  REQUIRE(log.append(2, std::string(300 * 1024, 'm')).ok());
  CHECK(fs::file_size(log.segments().back()) == metadata_log::default_segment_bytes);
  // prepare() without a headroom asks room for two records of the latest size.
  CHECK(log.has_room(100 * 1024));
  CHECK(ids_of(metadata_log::scan(tmp.path()).records) == std::vector<checkpoint_id>{2});
}

TEST_CASE("metadata log: little free space makes small segments, a full disk smaller ones, and "
          "an append that cannot fit says how much it needs and where") {
  temp_folder tmp;
  SECTION("a segment takes at most an eighth of the free space") {
    metadata_log log(tmp.path(), 1);
    log.simulate_space(metadata_log::space_limit{80 * 1024, 1ull << 30});
    REQUIRE(log.append(1, "small").ok());
    // 80 KiB / 8 = 10 KiB, in whole blocks.
    CHECK(fs::file_size(log.segments().back()) == 3 * metadata_log::block_bytes);
  }
  SECTION("ENOSPC while the zeros are written: smaller and smaller, down to the record") {
    metadata_log log(tmp.path(), 1);
    log.simulate_space(metadata_log::space_limit{1ull << 30, 12 * 1024});
    REQUIRE(log.append(1, "small").ok());
    CHECK(fs::file_size(log.segments().back()) <= 12 * 1024);
    CHECK(segment_files(tmp.path()).size() == 1);  // the attempts that failed left nothing
    CHECK(metadata_log::find(tmp.path(), 1) == "small");
  }
  SECTION("not even the record fits: the error names the bytes needed and the folder") {
    metadata_log log(tmp.path(), 1);
    log.simulate_space(metadata_log::space_limit{1ull << 30, 0});
    auto r = log.append(7, std::string(5000, 'x'));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.err().message, Catch::Contains("not enough space in " + tmp.path().string()) &&
                                    Catch::Contains("checkpoint 7") &&
                                    Catch::Contains("8192 bytes needed"));
    CHECK(segment_files(tmp.path()).empty());
    // Room again: the next append works.
    log.simulate_space(std::nullopt);
    REQUIRE(log.append(8, "m").ok());
    CHECK(metadata_log::find(tmp.path(), 8) == "m");
  }
}

TEST_CASE("metadata log: a closed log takes no more appends and leaves no segment behind") {
  temp_folder tmp;
  metadata_log log(tmp.path(), 1);
  REQUIRE(log.append(1, "a").ok());
  REQUIRE(log.close().ok());
  CHECK(segment_files(tmp.path()).empty());
  // A metadata write still on its way when the job ended.
  auto late = log.append(2, "b");
  REQUIRE_FALSE(late.ok());
  CHECK_THAT(late.err().message, Catch::Contains("closed"));
  CHECK_FALSE(log.prepare().ok());
  CHECK(segment_files(tmp.path()).empty());
}
