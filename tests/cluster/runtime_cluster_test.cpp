// The runtime's scenarios on a real local cluster: snapflow-coordinator plus three snapflow-worker
// processes running the runtime executor, records crossing workers over the data plane, and
// checkpoints every 50 ms.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "engine/runtime/runtime_task_executor.hpp"
#include "engine/runtime/stream_element.hpp"
#include "tests/cluster/cluster_support.hpp"
#include "tests/cluster/committed_output.hpp"
#include "transport/data/network_data_plane.hpp"

using namespace snapflow::testing;

namespace {

constexpr std::int64_t key_count = 16;

// A coordinator and three runtime workers with two slots each (six slots: the example needs
// four, so every worker hosts a subtask and records cross processes).
class runtime_cluster {
 public:
  runtime_cluster() : coordinator_(dir_.path() / "state") {
    for (const char* id : {"w1", "w2", "w3"}) workers_.push_back(worker(id));
    if (!coordinator_.wait_for_workers(workers_.size()))
      throw std::runtime_error("the workers did not register: " + coordinator_.overview().dump());
  }

  const std::filesystem::path& dir() const { return dir_.path(); }
  const coordinator_process& coordinator() const { return coordinator_; }
  child_process& worker_process(std::size_t i) { return *workers_.at(i); }

  bool job_finished(const std::string& job, std::chrono::milliseconds within) const {
    return eventually(
               [&] {
                 const std::string state = coordinator_.job(job).value("state", "");
                 return state == "FINISHED" || state == "FAILED" || state == "CANCELED";
               },
               within) &&
           coordinator_.job(job).value("state", "") == "FINISHED";
  }

  std::string stderr_of_workers() const {
    std::string all;
    for (std::size_t i = 0; i < workers_.size(); ++i)
      all += "\n--- w" + std::to_string(i + 1) + " stderr:\n" + workers_[i]->stderr_text();
    return all;
  }

  // SIGTERM to everyone; every process must exit cleanly.
  void stop() {
    for (auto& w : workers_) w->send_signal(SIGTERM);
    coordinator_.process().send_signal(SIGTERM);
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const std::optional<int> code = workers_[i]->wait_exit(patience);
      INFO("w" << i + 1 << " exited with " << code.value_or(-1000) << ", its stderr:\n"
                << workers_[i]->stderr_text());
      CHECK(code == 0);
    }
    CHECK(coordinator_.process().wait_exit(patience) == 0);
  }

 private:
  std::unique_ptr<child_process> worker(const std::string& id) {
    return std::make_unique<child_process>(std::vector<std::string>{
        SNAPFLOW_WORKER_BIN, "--coordinator", coordinator_.control(), "--id", id, "--slots", "2",
        "--executor", "runtime", "--heartbeat-interval-ms", std::to_string(heartbeat_interval_ms),
        "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms), "--data-root",
        test_data_root()});
  }

  temp_dir dir_;
  coordinator_process coordinator_;
  std::vector<std::unique_ptr<child_process>> workers_;
};

// examples/exactly-once-sum.toml's shape: sequence source (parallelism 2) -> hash -> keyed_sum
// (4) -> two-phase-commit file sink (4), checkpoints every 50 ms in `mode`.
std::string example_job(const std::filesystem::path& out, std::int64_t records,
                        const std::string& mode) {
  std::ostringstream os;
  os << "[job]\nname = \"example-" << mode << "\"\nparallelism = 4\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 50\nmode = \"" << mode << "\"\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = " << records << ", keys = " << key_count << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\nparallelism = 4\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"sum\"\n"
     << "parallelism = 4\nparams = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

// The last number logged as "key=N" (the data plane's figures a worker logs at exit), or -1.
std::int64_t logged_number(const std::string& log, const std::string& key) {
  const auto at = log.rfind(key + "=");
  if (at == std::string::npos) return -1;
  return std::stoll(log.substr(at + key.size() + 1));
}

// After stop(): every worker received data frames from another worker, so records crossed
// processes everywhere (subtask k of every vertex runs on slot k, spread over the workers).
void check_every_worker_received_frames(runtime_cluster& cluster) {
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string log = cluster.worker_process(i).stderr_text();
    INFO("w" << i + 1 << ":\n" << log);
    CHECK(logged_number(log, "frames_received") > 0);
  }
}

}  // namespace

TEST_CASE("runtime cluster: the example over 200,000 records commits every seq exactly once") {
  constexpr std::int64_t records = 200'000;
  runtime_cluster cluster;
  const auto out = cluster.dir() / "out";
  const std::string job = cluster.coordinator().submit(example_job(out, records, "exactly_once"));
  const bool finished = cluster.job_finished(job, 90s);
  const json details = cluster.coordinator().job(job);
  INFO("job: " << details.dump() << cluster.stderr_of_workers());
  REQUIRE(finished);
  // Exactly once whatever happened; on an overloaded machine a worker may miss heartbeats and
  // the job restart from a checkpoint, which must not change the output.
  if (details.value("restarts", 0) > 0)
    WARN("the job restarted " << details.value("restarts", 0) << " time(s)");
  // The sinks committed through completed checkpoints (the final one at least).
  CHECK(cluster.coordinator().checkpoints(job)["counts"]["completed"].get<std::int64_t>() >= 1);

  const committed_output o = read_committed_output(out, records, key_count);
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.wrong_sums == 0);
  CHECK(o.lines == static_cast<std::size_t>(records));
  cluster.stop();
  check_every_worker_received_frames(cluster);
}

TEST_CASE("runtime cluster: the example runs in at-least-once mode across processes") {
  constexpr std::int64_t records = 200'000;
  runtime_cluster cluster;
  const auto out = cluster.dir() / "out";
  const std::string job = cluster.coordinator().submit(example_job(out, records, "at_least_once"));
  const bool finished = cluster.job_finished(job, 90s);
  const json details = cluster.coordinator().job(job);
  INFO("job: " << details.dump() << cluster.stderr_of_workers());
  REQUIRE(finished);
  CHECK(cluster.coordinator().checkpoints(job)["counts"]["completed"].get<std::int64_t>() >= 1);

  const committed_output o = read_committed_output(out, records, key_count);
  // What at-least-once guarantees whatever happens: nothing lost, and since a replay only adds
  // records (every value is >= 0), no running sum below the exactly-once one.
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.sums_too_low == 0);
  // Duplicates come only from replaying input after a restore: barrier tracking lets records
  // overtake a barrier into the snapshot, and a restore from that snapshot replays them. This
  // run had no failure and no restore, so it must in fact be exactly once; should it ever
  // restart (a lost worker on an overloaded machine), only the guarantees above hold.
  if (details.value("restarts", 0) == 0) {
    CHECK(o.duplicated == 0);
    CHECK(o.wrong_sums == 0);
    CHECK(o.lines == static_cast<std::size_t>(records));
  } else {
    WARN("the job restarted " << details.value("restarts", 0)
                              << " time(s): only at-least-once was checked");
  }
  cluster.stop();
  check_every_worker_received_frames(cluster);
}

namespace {

// A two-input operator: `join` (map_identity) reads `fast` and `slow_path`. The slow input is
// slow by construction, not by timing luck: `slow` emits all its records at once into
// `slow_path`, which takes delay_us_per_record for each, so every barrier injected while that
// backlog lasts reaches `join` only after the backlog ahead of it (up to 0.8 s for
// the first one) while `fast` (two rate-limited subtasks on two workers, running about a
// second) keeps sending records right after its own barrier. Exactly-once must block `fast`
// meanwhile; at-least-once must keep reading it.
constexpr std::int64_t fast_records = 20'000;
constexpr std::int64_t slow_records = 400;

std::string two_input_job(const std::filesystem::path& out, const std::string& mode) {
  std::ostringstream os;
  os << "[job]\nname = \"two-inputs-" << mode << "\"\nparallelism = 1\n\n"
     << "[checkpointing]\ninterval_ms = 50\nmode = \"" << mode
     << "\"\n"
     // Every checkpoint of the run stays in the statistics the test reads back.
     << "stats_history_size = 10000\n\n"
     << "[[operator]]\nuid = \"fast\"\nkind = \"sequence_source\"\nparallelism = 2\n"
     << "params = { count = " << fast_records << ", rate = 10000 }\n\n"
     << "[[operator]]\nuid = \"slow\"\nkind = \"sequence_source\"\n"
     << "params = { count = " << slow_records << ", start = " << fast_records << " }\n\n"
     << "[[operator]]\nuid = \"slow_path\"\nkind = \"map_identity\"\ninput = \"slow\"\n"
     << "params = { delay_us_per_record = 2000 }\n\n"
     << "[[operator]]\nuid = \"join\"\nkind = \"map_identity\"\n"
     << "inputs = [\"fast\", \"slow_path\"]\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"file_sink\"\ninput = \"join\"\n"
     << "params = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

struct alignment_totals {
  std::int64_t checkpoints = 0;  // in the statistics history
  std::int64_t join_acks = 0;    // acknowledgements of the two-input subtask
  std::uint64_t join_held = 0;   // records_held_during_alignment at `join`
  std::uint64_t join_after_barrier = 0;
  std::uint64_t held_elsewhere = 0;  // at every other subtask (single inputs never block)
  std::uint64_t after_barrier_elsewhere = 0;
};

// Sums the per-subtask alignment figures of every checkpoint the coordinator remembers, read
// through the REST details endpoint (worker ack -> coordinator statistics -> REST).
alignment_totals read_alignment(const coordinator_process& coordinator, const std::string& job) {
  std::int64_t join_vertex = -1;
  const json details = coordinator.job(job);
  for (const auto& v : details["vertices"])
    if (v.value("uid", "") == "join") join_vertex = v["id"].get<std::int64_t>();
  INFO("job: " << details.dump());
  REQUIRE(join_vertex >= 0);
  alignment_totals t;
  const json checkpoints = coordinator.checkpoints(job);
  for (const auto& h : checkpoints["history"]) {
    ++t.checkpoints;
    const http_result r = coordinator.rest().get("/jobs/" + job + "/checkpoints/details/" +
                                                 std::to_string(h["id"].get<std::int64_t>()));
    REQUIRE(r.status == 200);
    for (const auto& s : r.body["subtasks"]) {
      const auto& a = s["alignment"];
      const auto held = a.value("held_records", std::uint64_t{0});
      const auto after = a.value("records_after_barrier", std::uint64_t{0});
      if (s["vertex"].get<std::int64_t>() == join_vertex) {
        ++t.join_acks;
        t.join_held += held;
        t.join_after_barrier += after;
      } else {
        t.held_elsewhere += held;
        t.after_barrier_elsewhere += after;
      }
    }
  }
  return t;
}

// Runs the two-input job to the end in `mode`; every record reaches the sink at least once.
alignment_totals run_two_input_job(runtime_cluster& cluster, const std::string& mode) {
  const auto out = cluster.dir() / "out";
  const std::string job = cluster.coordinator().submit(two_input_job(out, mode));
  const bool finished = cluster.job_finished(job, 60s);
  INFO("job: " << cluster.coordinator().job(job).dump() << cluster.stderr_of_workers());
  REQUIRE(finished);
  const alignment_totals t = read_alignment(cluster.coordinator(), job);
  INFO("checkpoints " << t.checkpoints << ", join acks " << t.join_acks << ", held " << t.join_held
                      << ", after barrier " << t.join_after_barrier);
  REQUIRE(t.join_acks >= 1);
  UNSCOPED_INFO("checkpoints " << t.checkpoints << ", join acks " << t.join_acks << ", held "
                               << t.join_held << ", after barrier " << t.join_after_barrier);
  return t;
}

}  // namespace

TEST_CASE(
    "runtime cluster: exactly-once alignment blocks the early input of a two-input "
    "operator") {
  runtime_cluster cluster;
  const alignment_totals t = run_two_input_job(cluster, "exactly_once");
  CAPTURE(t.checkpoints, t.join_acks, t.join_held, t.join_after_barrier);
  // The fast input delivered its barrier while the slow one's was still queued behind the
  // slow stage: its next records were held back, and none was processed past its barrier.
  CHECK(t.join_held > 0);
  CHECK(t.join_after_barrier == 0);
  CHECK(t.after_barrier_elsewhere == 0);
  CHECK(t.held_elsewhere == 0);
  cluster.stop();
}

TEST_CASE(
    "runtime cluster: at-least-once does not block the early input of a two-input "
    "operator") {
  runtime_cluster cluster;
  const alignment_totals t = run_two_input_job(cluster, "at_least_once");
  CAPTURE(t.checkpoints, t.join_acks, t.join_held, t.join_after_barrier);
  // Nothing was held back: the fast input kept being read after its barrier, and those
  // records went into the snapshot ahead of the slow input's barrier.
  CHECK(t.join_held == 0);
  CHECK(t.held_elsewhere == 0);
  CHECK(t.join_after_barrier > 0);
  cluster.stop();
}

TEST_CASE("runtime cluster: backpressure from a slow sink keeps the buffered bytes bounded") {
  // A source with no rate limit and far more records than the test waits for, into two file
  // sinks that sleep for every record (about 5,000 records/s each, ~1/100 of the source): the
  // source can only go as fast as credits come back, so no buffer grows past its capacity.
  // source[0] shares a worker with sink[0] (an in-process channel) and reaches sink[1] on
  // another worker over the network: both kinds of channel are measured.
  runtime_cluster cluster;
  const auto out = cluster.dir() / "out";
  std::ostringstream os;
  os << "[job]\nname = \"slow-sink\"\n\n"
     << "[checkpointing]\ninterval_ms = 50\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 1\n"
     << "params = { count = 100000000 }\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"file_sink\"\ninput = \"source\"\n"
     << "parallelism = 2\npartition = \"rebalance\"\n"
     << "params = { path = " << json(out.string()).dump() << ", delay_us_per_record = 200 }\n";
  const std::string job = cluster.coordinator().submit(os.str());
  // Checkpoints complete under backpressure: barriers still get through full buffers.
  const bool checkpointed = cluster.coordinator().wait_for_completed_checkpoints(job, 2, 40s);
  const json details = cluster.coordinator().job(job);
  INFO("job: " << details.dump() << cluster.stderr_of_workers());
  REQUIRE(checkpointed);
  REQUIRE(details.value("state", "") == "RUNNING");

  // Input channels per worker: one per sink subtask (its only producer is source[0]).
  std::map<std::string, std::uint64_t> channels;
  for (const auto& vertex : details["vertices"])
    if (vertex.value("uid", "") == "sink")
      for (const auto& subtask : vertex["subtasks"]) ++channels[subtask.value("worker", "")];
  REQUIRE(channels.size() == 2);

  cluster.stop();  // the workers log their data plane's figures as they exit

  // The bound the configuration sets: a consumer buffers at most channel_capacity_batches
  // batches per channel (the producer's credit), a batch holds at most batch_size elements
  // (no payloads here), and byte_gauge counts a batch's element slots.
  const std::uint64_t capacity_batches =
      snapflow::data::data_plane_options{}.channel_capacity_batches;
  const std::uint64_t batch_size = snapflow::runtime_task_executor_options{}.batch_size;
  const std::uint64_t full_batch_bytes = batch_size * sizeof(snapflow::stream_element);
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string id = "w" + std::to_string(i + 1);
    const std::string log = cluster.worker_process(i).stderr_text();
    const std::int64_t high_water = logged_number(log, "buffered_bytes_high_water");
    const std::uint64_t bound = channels[id] * capacity_batches * full_batch_bytes;
    INFO(id << ": high water " << high_water << " bytes, bound " << bound << " (" << channels[id]
            << " channel(s) x " << capacity_batches << " batches x " << full_batch_bytes
            << " bytes)\n"
            << log);
    REQUIRE(high_water >= 0);
    CHECK(static_cast<std::uint64_t>(high_water) <= bound);
    largest = std::max(largest, high_water);
  }
  // The buffers did fill: the source outran the sinks and was held back, not the other way.
  CHECK(static_cast<std::uint64_t>(largest) >= full_batch_bytes);
}

namespace {

// The example's shape with every vertex at `parallelism`, keyed state in `backend`, and a
// rate-limited source (records per second per subtask), so a savepoint lands mid-run.
std::string rescalable_job(const std::filesystem::path& out, std::int64_t records,
                           std::uint32_t parallelism, const std::string& backend,
                           std::int64_t rate) {
  std::ostringstream os;
  os << "[job]\nname = \"rescalable\"\nparallelism = " << parallelism
     << "\nmax_parallelism = 128\n\n"
     << "[checkpointing]\ninterval_ms = 50\nmode = \"exactly_once\"\nstate_backend = \""
     << backend << "\"\n\n"
     << "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
     << "params = { count = " << records << ", keys = " << key_count << ", rate = " << rate
     << " }\n\n"
     << "[[operator]]\nuid = \"sum\"\nkind = \"keyed_sum\"\ninput = \"source\"\n"
     << "partition = \"hash\"\n\n"
     << "[[operator]]\nuid = \"sink\"\nkind = \"two_phase_commit_file_sink\"\ninput = \"sum\"\n"
     << "params = { path = " << json(out.string()).dump() << " }\n";
  return os.str();
}

// `text` as a URL query value: unreserved characters and '/' as they are, the rest %XX.
std::string query_value(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      static constexpr char hex[] = "0123456789ABCDEF";
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// Submits `toml` through REST, from the savepoint at `savepoint` when one is given.
std::string submit_job(const coordinator_process& coordinator, const std::string& toml,
                       const std::string& savepoint = "") {
  std::string path = "/jobs";
  if (!savepoint.empty()) path += "?fromSavepoint=" + query_value(savepoint);
  const http_result r = coordinator.rest().post(path, toml);
  INFO("submit: " << r.status << " " << r.body.dump());
  REQUIRE(r.status == 202);
  return r.body["jobid"].get<std::string>();
}

// Takes a savepoint of the running `job` into `target` (under the savepoint root) and cancels
// the job, through REST; returns the savepoint's folder once the job is canceled.
std::string savepoint_and_cancel(runtime_cluster& cluster, const std::string& job,
                                 const std::string& target) {
  const coordinator_process& coordinator = cluster.coordinator();
  {
    const bool checkpointed = coordinator.wait_for_completed_checkpoints(job, 1, 40s);
    INFO("job: " << coordinator.job(job).dump() << cluster.stderr_of_workers());
    REQUIRE(checkpointed);
    REQUIRE(coordinator.job(job).value("state", "") == "RUNNING");
  }
  return coordinator.savepoint_and_cancel(job, target, 40s,
                                          [&] { return cluster.stderr_of_workers(); });
}

}  // namespace

TEST_CASE("runtime cluster: savepoints restore every vertex at twice and at half the "
          "parallelism, in either state backend, exactly once") {
  // Three jobs in a row through REST, each from the savepoint its predecessor was canceled
  // with: every vertex (source, keyed_sum, sink) at 2, then 4, then 2 again. The backends:
  // hashmap throughout, rocksdb throughout, or hashmap -> rocksdb -> hashmap.
  const std::vector<std::string> backends =
      GENERATE(std::vector<std::string>{"hashmap", "hashmap", "hashmap"},
               std::vector<std::string>{"rocksdb", "rocksdb", "rocksdb"},
               std::vector<std::string>{"hashmap", "rocksdb", "hashmap"});
  const std::vector<std::uint32_t> parallelism = {2, 4, 2};
  INFO("backends " << backends[0] << " -> " << backends[1] << " -> " << backends[2]);
  // 2,000 records per second per source subtask: the first job would need 10 s alone, the
  // savepoints are taken after its first checkpoint.
  constexpr std::int64_t records = 40'000;
  constexpr std::int64_t rate = 2'000;
  runtime_cluster cluster;
  const auto out = cluster.dir() / "out";
  std::string savepoint;
  for (std::size_t stage = 0; stage < 3; ++stage) {
    INFO("job " << stage + 1 << " at parallelism " << parallelism[stage] << " with "
                << backends[stage] << (savepoint.empty() ? "" : " from " + savepoint));
    const std::string job = submit_job(
        cluster.coordinator(),
        rescalable_job(out, records, parallelism[stage], backends[stage], rate), savepoint);
    if (stage < 2) {
      savepoint = savepoint_and_cancel(cluster, job, "rescale-" + std::to_string(stage));
      // Only part of the input was committed when the job was canceled.
      CHECK(read_committed_output(out, records, key_count).lines <
            static_cast<std::size_t>(records));
      continue;
    }
    const bool finished = cluster.job_finished(job, 90s);
    INFO("job: " << cluster.coordinator().job(job).dump() << cluster.stderr_of_workers());
    REQUIRE(finished);
  }
  const committed_output o = read_committed_output(out, records, key_count);
  CHECK(o.bad_lines == 0);
  CHECK(o.missing == 0);
  CHECK(o.duplicated == 0);
  CHECK(o.wrong_sums == 0);
  CHECK(o.lines == static_cast<std::size_t>(records));
  cluster.stop();
}
