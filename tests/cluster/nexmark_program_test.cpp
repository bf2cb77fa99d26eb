// Nexmark's queries as a user program (examples/nexmark/nexmark_program) on a multi-process
// cluster: a coordinator and two workers started as `nexmark_program worker`, the job submitted
// with `nexmark_program submit`, parallelism 2, a checkpoint every 100 ms, the source
// rate-limited so the job is mid-run when one worker is killed by kill -9. A replacement worker
// joins, the job restarts from its last checkpoint and finishes; what the exactly-once file sink
// committed equals the reference computation over the same events (workloads/nexmark).
#include <signal.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "examples/nexmark/nexmark_output.hpp"
#include "examples/nexmark/nexmark_queries.hpp"
#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/program_support.hpp"

using namespace snapflow::testing;
namespace nexmark = snapflow::nexmark;

namespace {

const std::string program_bin = SNAPFLOW_NEXMARK_PROGRAM_BIN;

constexpr std::int64_t event_count = 10'000;
// Event time: 500 events per second, so the 10,000 events span 20 s and the 10 s windows (q5, q7, q8)
// split them.
constexpr std::int64_t event_time_rate = 500;
// Events per second per source subtask: at least 4 s of input, so the job is mid-run when the
// first checkpoint has completed and a worker is killed.
constexpr std::int64_t source_rate = 1'250;

// Silence after which a worker counts as lost: long, so a loaded machine does not lose the
// worker the test does not kill (the killed one is noticed by its connection).
constexpr int loss_timeout_ms = 5'000;

// The program's settings: the same for its workers and its submission.
std::vector<std::string> program_args(const std::string& query,
                                      const std::filesystem::path& out) {
  return {"--arg", "query=" + query,
          "--arg", "events=" + std::to_string(event_count),
          "--arg", "events_per_second=" + std::to_string(event_time_rate),
          "--arg", "rate=" + std::to_string(source_rate),
          "--arg", "parallelism=2",
          "--arg", "interval_ms=100",
          "--arg", "out=" + out.string()};
}

std::vector<nexmark::event> generated_events() {
  nexmark::generator_config config;
  config.events_per_second = event_time_rate;
  const nexmark::generator g(config);
  std::vector<nexmark::event> events;
  events.reserve(event_count);
  for (std::int64_t n = 0; n < event_count; ++n)
    events.push_back(g.at(static_cast<std::uint64_t>(n)));
  return events;
}

const std::vector<nexmark::event>& events() {
  static const std::vector<nexmark::event> all = generated_events();
  return all;
}

// One committed file of the sink: `part-<job>-<uid>-<subtask>-<checkpoint>`, or
// `...-end-<last checkpoint>` for what it committed at the end of its input (the uid part may
// hold dashes itself, so the name is read from its end).
struct committed_file {
  int subtask = 0;
  std::int64_t checkpoint = 0;
  bool at_end = false;
  std::vector<std::string> payloads;

  auto order() const { return std::tie(subtask, checkpoint, at_end); }
};

bool parse_number(std::string_view text, std::int64_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc{} && end == text.data() + text.size();
}

// Takes the last `-`-separated part off `name`; nothing when there is no dash.
std::optional<std::string_view> take_last_part(std::string_view& name) {
  const auto dash = name.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::string_view part = name.substr(dash + 1);
  name = name.substr(0, dash);
  return part;
}

std::optional<committed_file> parse_committed_name(std::string_view name) {
  if (!name.starts_with("part-")) return std::nullopt;
  committed_file file;
  auto checkpoint = take_last_part(name);
  if (!checkpoint || !parse_number(*checkpoint, file.checkpoint)) return std::nullopt;
  auto subtask_part = take_last_part(name);
  if (subtask_part == "end") {
    file.at_end = true;
    subtask_part = take_last_part(name);
  }
  std::int64_t subtask = 0;
  if (!subtask_part || !parse_number(*subtask_part, subtask)) return std::nullopt;
  file.subtask = static_cast<int>(subtask);
  return file;
}

// The sink's committed files in the order each subtask committed them; fails the test on a
// file or line that is not the sink's.
std::vector<committed_file> read_committed_files(const std::filesystem::path& out) {
  std::vector<committed_file> files;
  REQUIRE(std::filesystem::is_directory(out));
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".")) continue;
    auto file = parse_committed_name(name);
    if (!file) FAIL("a committed file that is not the sink's: " << name);
    std::ifstream in(entry.path());
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      std::size_t at = 0;
      for (int comma = 0; comma < 3 && at != std::string::npos; ++comma) {
        at = line.find(',', at);
        if (at != std::string::npos) ++at;
      }
      if (at == std::string::npos)
        FAIL(entry.path() << ":" << number << " is not key,seq,value,payload: " << line);
      file->payloads.push_back(line.substr(at));
    }
    files.push_back(std::move(*file));
  }
  std::sort(files.begin(), files.end(),
            [](const committed_file& a, const committed_file& b) { return a.order() < b.order(); });
  return files;
}

std::vector<std::string> all_payloads(const std::vector<committed_file>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.insert(out.end(), f.payloads.begin(), f.payloads.end());
  return out;
}

template <typename Row>
std::vector<std::string> sorted_payloads(const std::vector<Row>& rows) {
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(nexmark::row_record(r).payload);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> expected_payloads(const std::string& query) {
  if (query == "q0") return sorted_payloads(nexmark::q0(events()));
  if (query == "q1") return sorted_payloads(nexmark::q1(events()));
  if (query == "q2") return sorted_payloads(nexmark::q2(events()));
  if (query == "q3") return sorted_payloads(nexmark::q3(events()));
  if (query == "q5") return sorted_payloads(nexmark::q5(events()));
  if (query == "q7") return sorted_payloads(nexmark::q7(events()));
  if (query == "q8") return sorted_payloads(nexmark::q8(events()));
  FAIL("no reference rows for " << query);
  return {};
}

// q0 and q1 keep the input's order (nexmark_reference.hpp). A parallel job keeps it per source
// subtask, which emits its event numbers in increasing order into the sink subtask of the same
// index: each sink subtask's bids, file after file, carry non-decreasing times (event time
// grows with the event number). A replay that went back past a commit would break it.
void check_input_order(const std::vector<committed_file>& files) {
  std::map<int, std::int64_t> latest_time;
  for (const auto& file : files) {
    auto bids = nexmark::decode_rows<nexmark::bid>(file.payloads);
    if (!bids) FAIL(bids.err().message);
    for (const auto& b : *bids) {
      const auto it = latest_time.try_emplace(file.subtask, b.date_time).first;
      if (b.date_time < it->second)
        FAIL("sink subtask " << file.subtask << ", checkpoint " << file.checkpoint
                             << ": a bid at " << b.date_time << " after one at " << it->second);
      it->second = b.date_time;
    }
  }
}

// q4: per category, versions 1..N each exactly once (no update lost or repeated), and the
// latest one's average is the reference's.
void check_q4(const std::vector<std::string>& payloads) {
  auto rows = nexmark::decode_rows<nexmark::q4_update>(payloads);
  if (!rows) FAIL(rows.err().message);
  std::map<std::int64_t, std::vector<nexmark::q4_update>> by_category;
  for (const auto& u : *rows) by_category[u.category].push_back(u);
  std::vector<nexmark::q4_row> latest;
  for (auto& [category, updates] : by_category) {
    std::sort(updates.begin(), updates.end(),
              [](const auto& a, const auto& b) { return a.version < b.version; });
    for (std::size_t i = 0; i < updates.size(); ++i) {
      INFO("category " << category << ", update " << i << " has version "
                       << updates[i].version);
      REQUIRE(updates[i].version == static_cast<std::int64_t>(i) + 1);
    }
    latest.push_back({category, updates.back().average_price});
  }
  const auto expected = nexmark::q4(events());
  REQUIRE(!expected.empty());
  CHECK(latest == expected);
}

template <typename Row>
std::size_t window_count(const std::vector<Row>& rows) {
  std::set<std::int64_t> windows;
  for (const auto& r : rows) windows.insert(r.window_start);
  return windows.size();
}

void check_output(const std::string& query, const std::filesystem::path& out) {
  const auto files = read_committed_files(out);
  auto payloads = all_payloads(files);
  if (query == "q4") return check_q4(payloads);
  if (query == "q0" || query == "q1") check_input_order(files);
  // The windowed queries' events span more than one window.
  if (query == "q5") CHECK(window_count(nexmark::q5(events())) >= 2);
  if (query == "q7") CHECK(window_count(nexmark::q7(events())) >= 2);
  if (query == "q8") CHECK(window_count(nexmark::q8(events())) >= 2);
  std::sort(payloads.begin(), payloads.end());
  const auto expected = expected_payloads(query);
  REQUIRE(!expected.empty());
  CHECK(payloads.size() == expected.size());
  CHECK(payloads == expected);
}

bool hosts_subtasks(const json& job, const std::string& worker) {
  for (const auto& vertex : job.value("vertices", json::array()))
    for (const auto& subtask : vertex.value("subtasks", json::array()))
      if (subtask.value("worker", "") == worker) return true;
  return false;
}

bool has_ended(const std::string& state) {
  return state == "FINISHED" || state == "FAILED" || state == "CANCELED";
}

// The query on a coordinator and two program workers; once a checkpoint completed, worker w2
// (which hosts half the subtasks) is killed by kill -9 and a replacement started. The job
// restarts from its last checkpoint and finishes; its committed output is the reference's.
void run_through_kill(const std::string& query) {
  {
    INFO("nexmark_program is built with the main build: " << program_bin);
    REQUIRE(std::filesystem::exists(program_bin));
  }
  temp_dir dir("nexmark-program");
  const auto out = dir.path() / "out";
  const auto args = program_args(query, out);
  coordinator_process coordinator(dir.path() / "state", {}, "tcp://127.0.0.1:*",
                                  loss_timeout_ms);
  auto w1 = start_program_worker(program_bin, coordinator.control(), "w1", args, loss_timeout_ms);
  auto w2 = start_program_worker(program_bin, coordinator.control(), "w2", args, loss_timeout_ms);
  REQUIRE(coordinator.wait_for_workers(2));

  const std::string job = submit_program(program_bin, coordinator, args);
  {
    INFO("no checkpoint of " << query << " completed: " << coordinator.job(job).dump()
                             << "\nw1 stderr: " << w1->stderr_text()
                             << "\nw2 stderr: " << w2->stderr_text());
    REQUIRE(coordinator.wait_for_completed_checkpoints(job, 1));
  }
  const json running = coordinator.job(job);
  {
    INFO("the job must be mid-run at the kill (its input lasts about "
         << event_count / 2 / source_rate << " s): " << running.dump());
    REQUIRE(running.value("state", "") == "RUNNING");
    REQUIRE(hosts_subtasks(running, "w2"));
  }

  w2->send_signal(SIGKILL);
  REQUIRE(w2->wait_exit(patience).has_value());
  w2 = start_program_worker(program_bin, coordinator.control(), "w2", args, loss_timeout_ms);
  std::string state;
  const bool ended = eventually(
      [&] {
        state = coordinator.job(job).value("state", "");
        return has_ended(state);
      },
      90s);
  const json details = coordinator.job(job);
  INFO("job: " << details.dump() << "\nw1 stderr: " << w1->stderr_text()
               << "\nw2 (replacement) stderr: " << w2->stderr_text());
  REQUIRE(ended);
  REQUIRE(state == "FINISHED");
  CHECK(details.value("restarts", 0) >= 1);
  check_output(query, out);
  stop_cleanly(coordinator, {w1.get(), w2.get()});
}

}  // namespace

// One test case per query: each runs its own cluster (some 10-20 s under ASan).
TEST_CASE("nexmark program q0 on a cluster: a worker killed by kill -9, output exactly once") {
  run_through_kill("q0");
}
TEST_CASE("nexmark program q1 on a cluster: a worker killed by kill -9, output exactly once") {
  run_through_kill("q1");
}
TEST_CASE("nexmark program q2 on a cluster: a worker killed by kill -9, output exactly once") {
  run_through_kill("q2");
}
TEST_CASE("nexmark program q3 on a cluster: a worker killed by kill -9, output exactly once") {
  run_through_kill("q3");
}
TEST_CASE("nexmark program q4 on a cluster: a worker killed by kill -9, final averages exact") {
  run_through_kill("q4");
}
TEST_CASE("nexmark program q5 on a cluster: a worker killed by kill -9, every window once") {
  run_through_kill("q5");
}
TEST_CASE("nexmark program q7 on a cluster: a worker killed by kill -9, every window once") {
  run_through_kill("q7");
}
TEST_CASE("nexmark program q8 on a cluster: a worker killed by kill -9, output exactly once") {
  run_through_kill("q8");
}

TEST_CASE("nexmark program: an unknown query or a bad setting is refused with its reason") {
  const auto refused = [](const std::vector<std::string>& args, const std::string& reason) {
    std::vector<std::string> argv{program_bin, "fingerprint"};
    argv.insert(argv.end(), args.begin(), args.end());
    child_process p(argv);
    const auto code = p.wait_exit(patience);
    INFO("stderr: " << p.stderr_text());
    CHECK(code == 1);
    CHECK_THAT(p.stderr_text(), Catch::Contains(reason));
  };
  refused({"--arg", "query=q99"}, "query=q99: not one of q0, q1");
  refused({"--arg", "events=many"}, "events=many: not an integer");
  refused({"--arg", "parallelism=0"}, "parallelism=0: not in 1..");
  refused({"--arg", "interval_ms=-5"}, "interval_ms=-5: not in 1..");
  refused({"--arg", "events=-1"}, "events must be >= 0");
  refused({"--arg", "events_per_second=0"}, "events_per_second must be positive");
  refused({"--arg", "seed=-1"}, "seed must be >= 0");
  // The settings shape the job, so its fingerprint: workers of another query get none of it.
  CHECK(program_fingerprint_of(program_bin, {"--arg", "query=q0"}) !=
        program_fingerprint_of(program_bin, {"--arg", "query=q1"}));
}
