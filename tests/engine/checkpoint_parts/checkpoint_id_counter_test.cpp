#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "engine/checkpoint/checkpoint_id_counter.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;

namespace {

std::unique_ptr<file_checkpoint_id_counter> open_counter(const std::filesystem::path& folder,
                                                         std::int64_t block = 64) {
  auto counter = file_checkpoint_id_counter::open(folder, block);
  INFO((counter ? std::string() : counter.err().message));
  REQUIRE(counter.ok());
  return std::move(counter).value();
}

checkpoint_id next_id(checkpoint_id_counter& counter) {
  auto id = counter.get_and_increment();
  INFO((id ? std::string() : id.err().message));
  REQUIRE(id.ok());
  return *id;
}

std::string read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_all(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace

TEST_CASE("in-memory id counter starts at 1 and only moves forward") {
  in_memory_checkpoint_id_counter counter;
  CHECK(counter.peek_next() == 1);
  CHECK(counter.next_is_cheap());
  CHECK(next_id(counter) == 1);
  CHECK(next_id(counter) == 2);
  REQUIRE(counter.advance_to(10).ok());
  CHECK(next_id(counter) == 10);
  REQUIRE(counter.advance_to(3).ok());
  CHECK(counter.peek_next() == 11);
}

TEST_CASE("file id counter starts at 1 in a new folder") {
  temp_folder tmp;
  auto counter = open_counter(tmp.path() / "job");
  CHECK(counter->peek_next() == 1);
  CHECK(next_id(*counter) == 1);
  CHECK(next_id(*counter) == 2);
  CHECK(next_id(*counter) == 3);
  CHECK(std::filesystem::exists(tmp.path() / "job" / file_checkpoint_id_counter::file_name));
}

TEST_CASE("file id counter continues past every handed out id after reopening") {
  temp_folder tmp;
  checkpoint_id last = 0;
  {
    auto counter = open_counter(tmp.path(), 4);
    for (int i = 0; i < 6; ++i) last = next_id(*counter);  // crosses a block boundary
    CHECK(last == 6);
  }
  for (int restart = 0; restart < 3; ++restart) {
    auto counter = open_counter(tmp.path(), 4);
    CHECK(counter->peek_next() > last);
    const checkpoint_id id = next_id(*counter);
    CHECK(id > last);
    last = id;
  }
}

TEST_CASE("file id counter advance_to jumps past a savepoint id and never back") {
  temp_folder tmp;
  checkpoint_id after_jump = 0;
  {
    auto counter = open_counter(tmp.path(), 8);
    CHECK(next_id(*counter) == 1);
    REQUIRE(counter->advance_to(5).ok());  // inside the reserved block: no write needed
    CHECK(next_id(*counter) == 5);
    REQUIRE(counter->advance_to(1000).ok());  // past it: persisted
    CHECK(counter->peek_next() == 1000);
    REQUIRE(counter->advance_to(7).ok());
    CHECK(counter->peek_next() == 1000);
    after_jump = next_id(*counter);
    CHECK(after_jump == 1000);
  }
  auto reopened = open_counter(tmp.path(), 8);
  CHECK(reopened->peek_next() > after_jump);
  REQUIRE(reopened->advance_to(2).ok());
  CHECK(next_id(*reopened) > after_jump);
}

TEST_CASE("file id counter refuses a corrupt counter file") {
  temp_folder tmp;
  {
    auto counter = open_counter(tmp.path());
    CHECK(next_id(*counter) == 1);
  }
  const auto file = tmp.path() / file_checkpoint_id_counter::file_name;
  const std::string good = read_all(file);
  REQUIRE(good.size() == 28);

  SECTION("a flipped byte") {
    std::string bad = good;
    bad[18] = static_cast<char>(bad[18] ^ 0x01);
    write_all(file, bad);
    auto counter = file_checkpoint_id_counter::open(tmp.path());
    REQUIRE_FALSE(counter.ok());
    CHECK_THAT(counter.err().message, Catch::Contains("checksum"));
  }
  SECTION("a truncated file") {
    write_all(file, good.substr(0, 20));
    CHECK_FALSE(file_checkpoint_id_counter::open(tmp.path()).ok());
  }
  SECTION("an empty file") {
    write_all(file, "");
    CHECK_FALSE(file_checkpoint_id_counter::open(tmp.path()).ok());
  }
  SECTION("a foreign file") {
    write_all(file, "42\n");
    CHECK_FALSE(file_checkpoint_id_counter::open(tmp.path()).ok());
  }
}

TEST_CASE("file id counter encoding round trips and rejects a zero id") {
  auto decoded = file_checkpoint_id_counter::decode(file_checkpoint_id_counter::encode(123456789));
  REQUIRE(decoded.ok());
  CHECK(*decoded == 123456789);
  std::string zero = file_checkpoint_id_counter::encode(1);
  zero[16] = 0;  // id 0 with a matching checksum would still be impossible
  CHECK_FALSE(file_checkpoint_id_counter::decode(zero).ok());
}

TEST_CASE("file id counter is cheap inside a reserved block only") {
  temp_folder tmp;
  auto counter = open_counter(tmp.path(), 3);
  CHECK_FALSE(counter->next_is_cheap());  // nothing reserved yet
  CHECK(next_id(*counter) == 1);          // reserves 1..3
  CHECK(counter->reserved_until() == 4);
  CHECK(counter->next_is_cheap());
  CHECK(next_id(*counter) == 2);
  CHECK(counter->next_is_cheap());
  CHECK(next_id(*counter) == 3);
  CHECK_FALSE(counter->next_is_cheap());  // the block is used up
  CHECK(next_id(*counter) == 4);
  CHECK(counter->next_is_cheap());
  CHECK(counter->reserved_until() == 7);

  auto reopened = open_counter(tmp.path(), 3);
  CHECK(reopened->peek_next() == 7);
  CHECK_FALSE(reopened->next_is_cheap());
}

TEST_CASE("file id counter reports an unwritable folder as an error") {
  temp_folder tmp;
  // A file where the folder should be: creating the folder fails.
  write_all(tmp.path() / "blocked", "x");
  auto counter = file_checkpoint_id_counter::open(tmp.path() / "blocked" / "job");
  if (counter.ok()) {
    auto id = (*counter)->get_and_increment();
    CHECK_FALSE(id.ok());
  }
}
