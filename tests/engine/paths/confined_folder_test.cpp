// engine/paths/confined_folder: what a path from outside may name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "engine/paths/confined_folder.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
namespace fs = std::filesystem;

namespace {

struct folders {
  testing::temp_folder tmp{"confined"};
  fs::path root = tmp.path() / "root";
  fs::path outside = tmp.path() / "outside";
  folders() {
    fs::create_directories(root / "sub");
    fs::create_directories(outside);
    std::ofstream(outside / "secret") << "x";
  }
};

}  // namespace

TEST_CASE("confined_folder: names inside resolve to paths inside, normalised") {
  folders f;
  confined_folder root(f.root);
  auto p = root.resolve("sub/./state-1");
  REQUIRE(p);
  CHECK(*p == f.root / "sub" / "state-1");
  auto q = root.resolve("sub/../state-2");
  REQUIRE(q);
  CHECK(*q == f.root / "state-2");
}

TEST_CASE("confined_folder: empty, absolute, NUL and '..' out are refused") {
  folders f;
  confined_folder root(f.root);
  CHECK_FALSE(root.resolve(""));
  auto absolute = root.resolve((f.outside / "secret").string());
  REQUIRE_FALSE(absolute);
  CHECK_THAT(absolute.err().message, Catch::Contains("absolute"));
  CHECK_FALSE(root.resolve(std::string("a\0b", 3)));
  auto out = root.resolve("sub/../../outside/secret");
  REQUIRE_FALSE(out);
  CHECK_THAT(out.err().message, Catch::Contains(".."));
  CHECK_FALSE(root.resolve(".."));
}

TEST_CASE("confined_folder: a symlink out is refused, one that stays inside is not") {
  folders f;
  confined_folder root(f.root);
  fs::create_symlink(f.outside / "secret", f.root / "file-out");
  fs::create_directory_symlink(f.outside, f.root / "dir-out");
  fs::create_directory_symlink(f.root / "sub", f.root / "dir-in");
  fs::create_symlink(f.tmp.path() / "nowhere", f.root / "dangling");
  CHECK_FALSE(root.resolve("file-out"));
  CHECK_FALSE(root.resolve("dir-out/secret"));
  CHECK_FALSE(root.resolve("dir-out/not-yet"));
  CHECK_FALSE(root.resolve("dangling"));  // a write through it would land outside
  CHECK(root.resolve("dir-in/state"));
  CHECK(root.resolve("not-yet/deeper/state"));
}

TEST_CASE("confined_folder: admit takes absolute paths inside and names every root when refusing") {
  folders f;
  std::vector<confined_folder> roots{confined_folder(f.root), confined_folder(f.tmp.path() / "b")};
  CHECK(admit_under_any(roots, (f.root / "sub" / "out.txt").string(), "sink path"));
  auto refused = admit_under_any(roots, (f.outside / "secret").string(), "sink path");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.err().message, Catch::Contains("sink path"));
  CHECK_THAT(refused.err().message, Catch::Contains(f.root.string()));
  CHECK_THAT(refused.err().message, Catch::Contains((f.tmp.path() / "b").string()));
  CHECK_FALSE(confined_folder(f.root).admit((f.root / ".." / "outside").string()));
  // A sibling whose name starts like the root is not inside it.
  CHECK_FALSE(confined_folder(f.root).admit(f.root.string() + "-evil/x"));
}
