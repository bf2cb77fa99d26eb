// The coordinator's web page in headless Chromium against a live cluster: the page's own
// script must fetch the REST API and render a completed checkpoint.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdlib>
#include <regex>

#include "tests/cluster/child_process.hpp"
#include "tests/cluster/cluster_support.hpp"

using namespace snapflow::testing;

namespace {

// SNAPFLOW_CHROMIUM, else the first of Debian's and upstream's names on PATH.
std::optional<std::string> find_chromium() {
  if (const char* env = std::getenv("SNAPFLOW_CHROMIUM"); env != nullptr && *env != '\0')
    return std::string(env);
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    std::string dirs = path;
    std::size_t start = 0;
    while (start <= dirs.size()) {
      const std::size_t end = std::min(dirs.find(':', start), dirs.size());
      const auto candidate = std::filesystem::path(dirs.substr(start, end - start)) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
      start = end + 1;
    }
  }
  return std::nullopt;
}

// "rest=127.0.0.1:40124" from the coordinator's listening line.
std::string rest_address(const std::string& stdout_text) {
  std::smatch m;
  if (!std::regex_search(stdout_text, m, std::regex(R"(rest=(\S+))"))) return {};
  return m[1];
}

}  // namespace

TEST_CASE("web page: headless Chromium shows a completed checkpoint of a running job") {
  const auto chromium = find_chromium();
  if (!chromium) {
    WARN("no chromium on PATH (scripts/setup.sh installs Debian's): the browser test is skipped");
    return;
  }
  temp_dir dir;
  coordinator_process coordinator(dir.path() / "state");
  auto w1 = start_worker(coordinator.control(), "w1");
  auto w2 = start_worker(coordinator.control(), "w2");
  REQUIRE(coordinator.wait_for_workers(2));
  const std::string job = coordinator.submit(sources_job(2));
  REQUIRE(coordinator.wait_for_completed_checkpoints(job, 1));
  const std::string rest = rest_address(coordinator.process().stdout_text());
  REQUIRE_FALSE(rest.empty());

  // Virtual time lets the page's timers and fetches run to completion without the test
  // sleeping; the browser exits by itself after printing the DOM. Root needs --no-sandbox.
  child_process browser({*chromium, "--headless", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
                         "--user-data-dir=" + (dir.path() / "chromium").string(),
                         "--virtual-time-budget=5000", "--dump-dom", "http://" + rest + "/"});
  const auto code = browser.wait_exit(std::chrono::seconds(90));
  const std::string dom = browser.stdout_text();
  INFO("chromium stderr:\n" << browser.stderr_text().substr(0, 4000));
  REQUIRE(code);  // else the destructor kills and reaps it
  CHECK(*code == 0);

  // Rendered by the script from /jobs/:id/checkpoints only: the latest completed checkpoint
  // and its bar on the timeline.
  std::smatch latest;
  REQUIRE(std::regex_search(dom, latest,
                            std::regex(R"re(id="latest-completed" data-checkpoint-id="(\d+)")re")));
  const std::string id = latest[1];
  CHECK(std::stoll(id) >= 1);
  CHECK(std::regex_search(
      dom, std::regex("class=\"cp-bar COMPLETED\" data-checkpoint-id=\"" + id + "\"")));
  // The job row and the job graph with each operator's parallelism.
  CHECK_THAT(dom, Catch::Contains("data-job=\"" + job + "\""));
  CHECK(std::regex_search(
      dom, std::regex(R"re(class="vertex" data-vertex="\d+" data-parallelism="2")re")));
  // The selected checkpoint's per-subtask breakdown.
  CHECK(std::regex_search(
      dom, std::regex(R"re(<tr class="subtask" data-vertex="\d+" data-index="\d+")re")));
}
