// Jobs' file paths confined to the workers' data roots (--data-root): the coordinator refuses a
// job naming a path outside at submission, with a 422 naming the path and the roots.
#include <catch2/catch.hpp>
#include <filesystem>
#include <vector>

#include "tests/cluster/cluster_support.hpp"

using namespace snapflow::testing;

namespace {

std::string file_sink_job(const std::string& path) {
  return "[job]\nname = \"confined\"\nparallelism = 1\n"
         "[checkpointing]\ninterval_ms = 50\n"
         "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
         "params = { count = 1000000 }\n"
         "[[operator]]\nuid = \"sink\"\nkind = \"file_sink\"\ninput = \"source\"\n"
         "params = { path = \"" + path + "\" }\n";
}

}  // namespace

TEST_CASE("a job whose file path leaves the workers' data roots is refused at submission") {
  temp_dir dir;
  const auto root = dir.path() / "data";
  const auto outside = dir.path() / "elsewhere";
  std::filesystem::create_directories(root);
  std::filesystem::create_directories(outside);
  std::filesystem::create_directory_symlink(outside, root / "link-out");
  coordinator_process coordinator(dir.path() / "state");
  auto worker = start_worker(coordinator.control(), "w1", {"--data-root", root.string()});
  REQUIRE(coordinator.wait_for_workers(1));

  SECTION("refused: absolute elsewhere, `..` out, a symlink out") {
    for (const std::string& path : std::vector<std::string>{(outside / "out").string(), (root / ".." / "elsewhere").string(),
                                   std::string("../elsewhere"), (root / "link-out" / "out").string()}) {
      INFO("path " << path);
      const http_result r = coordinator.rest().post("/jobs", file_sink_job(path));
      CHECK(r.status == 422);
      const std::string body = r.body.dump();
      CHECK_THAT(body, Catch::Contains(path) && Catch::Contains(root.string()) &&
                           Catch::Contains("outside the allowed roots"));
    }
    CHECK(coordinator.overview().value("jobs-running", 0) == 0);
  }
  SECTION("accepted: absolute inside, relative (under the first root)") {
    for (const std::string& path : std::vector<std::string>{(root / "out").string(), std::string("relative-out")}) {
      INFO("path " << path);
      const http_result r = coordinator.rest().post("/jobs", file_sink_job(path));
      CHECK(r.status == 202);
    }
  }
}
