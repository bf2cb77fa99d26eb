#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <memory>

#include "engine/checkpoint/location_premaker.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;
namespace fs = std::filesystem;

namespace {

bool has_metadata(const checkpoint_storage& storage, checkpoint_id id) {
  return fs::exists(storage.checkpoint_dir(id) / checkpoint_storage::metadata_file_name);
}

bool empty_folder(const checkpoint_storage& storage, checkpoint_id id) {
  return fs::is_directory(storage.checkpoint_dir(id)) && fs::is_empty(storage.checkpoint_dir(id));
}

}  // namespace

TEST_CASE("location premaker makes the folders of the next ids together and uses them") {
  temp_folder tmp;
  auto storage = std::make_shared<checkpoint_storage>(tmp.path() / "state" / "job");
  location_premaker premaker(storage, 4);

  // The first preparation makes its folder and the next three, empty.
  auto first = premaker.prepare(1);
  REQUIRE(first.ok());
  CHECK(first->folder() == storage->checkpoint_dir(1));
  CHECK(has_metadata(*storage, 1));
  for (checkpoint_id id : {2, 3, 4}) CHECK(empty_folder(*storage, id));
  CHECK_FALSE(fs::exists(storage->checkpoint_dir(5)));
  CHECK(premaker.premade() == 3);

  // The next ones take theirs; an id skipped (a savepoint took it) is forgotten and left to
  // the coordinator's sweep.
  REQUIRE(premaker.prepare(2).ok());
  CHECK(has_metadata(*storage, 2));
  REQUIRE(premaker.prepare(4).ok());
  CHECK(has_metadata(*storage, 4));
  CHECK(empty_folder(*storage, 3));
  CHECK(premaker.premade() == 0);
  CHECK_FALSE(fs::exists(storage->checkpoint_dir(5)));

  // Used up: the next preparation makes the next batch.
  REQUIRE(premaker.prepare(5).ok());
  for (checkpoint_id id : {6, 7, 8}) CHECK(empty_folder(*storage, id));
  CHECK(premaker.premade() == 3);

  // Closing removes the premade folders no id was handed out for, and premakes no more.
  premaker.close();
  for (checkpoint_id id : {6, 7, 8}) CHECK_FALSE(fs::exists(storage->checkpoint_dir(id)));
  CHECK(has_metadata(*storage, 5));
  CHECK(empty_folder(*storage, 3));
  REQUIRE(premaker.prepare(9).ok());
  CHECK(has_metadata(*storage, 9));
  CHECK_FALSE(fs::exists(storage->checkpoint_dir(10)));
  CHECK(premaker.premade() == 0);
}

TEST_CASE("location premaker prepares a folder a crash left, and refuses one with metadata") {
  temp_folder tmp;
  auto storage = std::make_shared<checkpoint_storage>(tmp.path() / "job");
  // A crash left the premade folders 3 and 4, and a whole metadata in 5.
  fs::create_directories(storage->checkpoint_dir(3));
  fs::create_directories(storage->checkpoint_dir(4));
  fs::create_directories(storage->checkpoint_dir(5));
  { std::ofstream(storage->checkpoint_dir(5) / "_metadata") << "not empty"; }
  location_premaker premaker(storage, 3);
  REQUIRE(premaker.prepare(3).ok());  // makes 3, 4 and 5: there already, which is fine
  CHECK(has_metadata(*storage, 3));
  REQUIRE(premaker.prepare(4).ok());
  auto refused = premaker.prepare(5);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().message.find("metadata file already") != std::string::npos);
}
