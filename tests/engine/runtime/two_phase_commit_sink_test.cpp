// two_phase_commit_file_sink driven by hand: pre-commit on the barrier, commit on
// notify-complete, carry-over on abort, restore, and nothing uncommitted ever visible.
#include <catch2/catch.hpp>

#include <memory>

#include "engine/runtime/two_phase_commit_file_sink.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

struct sink_fixture {
  temp_folder dir;
  std::filesystem::path out = dir.path() / "out";
  job_vertex vertex =
      make_vertex("two_phase_commit_file_sink", {{"path", out.string()}}, 1, 128, "sink");
  collecting_output unused;
  std::string job = "job";

  std::unique_ptr<two_phase_commit_file_sink> open(
      std::uint32_t index = 0, std::uint32_t parallelism = 1, std::uint32_t attempt = 0,
      checkpoint_id restored_id = 0, std::vector<restored_operator_state> restored = {}) {
    vertex.parallelism = parallelism;
    auto sink = std::make_unique<two_phase_commit_file_sink>();
    operator_context c;
    c.job = job;
    c.vertex = &vertex;
    c.subtask_index = index;
    c.parallelism = parallelism;
    c.attempt = attempt;
    c.restored_checkpoint = restored_id;
    auto opened = sink->open(c, restored);
    REQUIRE(opened);
    return sink;
  }

  void write(two_phase_commit_file_sink& sink, std::int64_t first, int n) {
    for (int i = 0; i < n; ++i) REQUIRE(sink.process(record{1, first + i, 10, {}}, unused));
  }

  // The barrier: the synchronous part, then the asynchronous part the writer would run.
  std::vector<operator_state_entry> barrier(two_phase_commit_file_sink& sink, checkpoint_id id) {
    auto snap = sink.snapshot(id);
    REQUIRE(snap);
    if (snap->async_part) REQUIRE(snap->async_part());
    return snap->state;
  }

  std::vector<std::int64_t> committed_seqs() {
    std::vector<std::int64_t> seqs;
    for (const auto& l : read_committed_output(out)) seqs.push_back(l.seq);
    std::sort(seqs.begin(), seqs.end());
    return seqs;
  }

  // Nothing but committed part files and the hidden staging folder is in the output folder;
  // staging files are dot-named with the .pending suffix.
  void check_nothing_uncommitted_visible() {
    for (const auto& name : list_names(out)) {
      if (name == ".staging") continue;
      INFO(name);
      CHECK(name.rfind("part-", 0) == 0);
    }
    for (const auto& e : std::filesystem::recursive_directory_iterator(out / ".staging")) {
      if (!e.is_regular_file()) continue;
      const std::string name = e.path().filename().string();
      INFO(name);
      CHECK(name[0] == '.');
      CHECK(name.size() > 8);
      CHECK(name.substr(name.size() - 8) == ".pending");
    }
  }

  // Two records, barrier 1 and its completion: one committed transaction whose rename the
  // output folder's fsync has not yet made durable.
  void commit_one(two_phase_commit_file_sink& sink) {
    write(sink, 0, 2);
    barrier(sink, 1);
    REQUIRE(sink.notify_checkpoint_complete(1));
  }

  std::size_t staged_files() {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(out / ".staging"))
      if (e.is_regular_file()) ++n;
    return n;
  }
};

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("2pc sink: the barrier pre-commits, notify-complete commits, nothing shows before") {
  sink_fixture f;
  auto sink = f.open();
  f.write(*sink, 0, 3);
  CHECK(sink->has_open_transaction());
  CHECK(f.committed_seqs().empty());
  f.check_nothing_uncommitted_visible();

  f.barrier(*sink, 1);
  CHECK_FALSE(sink->has_open_transaction());
  REQUIRE(sink->pre_committed().size() == 1);
  CHECK(sink->pre_committed()[0].id == 1);
  CHECK(f.committed_seqs().empty());  // pre-committed is not committed

  f.write(*sink, 3, 2);
  f.barrier(*sink, 2);
  CHECK(sink->pre_committed().size() == 2);
  f.check_nothing_uncommitted_visible();

  REQUIRE(sink->notify_checkpoint_complete(1));
  CHECK(f.committed_seqs() == range(0, 3));
  CHECK(sink->pre_committed().size() == 1);
  REQUIRE(sink->notify_checkpoint_complete(2));
  CHECK(f.committed_seqs() == range(0, 5));
  CHECK(sink->pre_committed().empty());
  CHECK(f.staged_files() == 0);
  f.check_nothing_uncommitted_visible();
  // The committed line format.
  auto lines = read_committed_output(f.out);
  CHECK(lines[0].key == 1);
  CHECK(lines[0].value == 10);
}

TEST_CASE("2pc sink: a checkpoint interval without records creates no file") {
  sink_fixture f;
  auto sink = f.open();
  f.barrier(*sink, 1);
  CHECK(sink->pre_committed().empty());
  CHECK(f.staged_files() == 0);
  REQUIRE(sink->notify_checkpoint_complete(1));
  CHECK(list_names(f.out) == std::vector<std::string>{".staging"});
}

TEST_CASE("2pc sink: a lost notification is made up by the next one") {
  sink_fixture f;
  auto sink = f.open();
  f.write(*sink, 0, 2);
  f.barrier(*sink, 1);
  f.write(*sink, 2, 2);
  f.barrier(*sink, 2);
  // notify-complete 1 never arrives; 2 commits both.
  REQUIRE(sink->notify_checkpoint_complete(2));
  CHECK(f.committed_seqs() == range(0, 4));
  // A stale notification afterwards is harmless.
  REQUIRE(sink->notify_checkpoint_complete(1));
  CHECK(f.committed_seqs() == range(0, 4));
}

TEST_CASE("2pc sink: a commit that overtakes a newer checkpoint's fsync does not fail it") {
  sink_fixture f;
  auto sink = f.open();
  f.write(*sink, 0, 2);
  f.barrier(*sink, 1);
  f.write(*sink, 2, 2);
  // Barrier 2 is taken while transaction 1 is still listed; its asynchronous part runs only
  // after notify-complete 1 renamed transaction 1 into the output folder.
  auto snap2 = sink->snapshot(2);
  REQUIRE(snap2);
  REQUIRE(sink->notify_checkpoint_complete(1));
  REQUIRE(snap2->async_part);
  auto synced = snap2->async_part();
  CHECK(synced);
  REQUIRE(sink->notify_checkpoint_complete(2));
  CHECK(f.committed_seqs() == range(0, 4));
}

TEST_CASE("2pc sink: a commit is made durable by the next snapshot, not on the task thread") {
  sink_fixture f;
  auto sink = f.open();
  f.write(*sink, 0, 2);
  f.barrier(*sink, 1);
  CHECK(sink->commits_durable());
  REQUIRE(sink->notify_checkpoint_complete(1));
  CHECK(f.committed_seqs() == range(0, 2));
  // The rename is done; the output folder's fsync waits for the next barrier.
  CHECK_FALSE(sink->commits_durable());

  // Checkpoint 2 lists nothing (no records since barrier 1), yet it must not be acknowledged
  // before commit 1 is durable: its asynchronous part fsyncs the output folder.
  auto snap2 = sink->snapshot(2);
  REQUIRE(snap2);
  REQUIRE(snap2->async_part);
  CHECK_FALSE(sink->commits_durable());
  REQUIRE(snap2->async_part());
  CHECK(sink->commits_durable());

  // Nothing listed and nothing committed since: no asynchronous work at all.
  auto snap3 = sink->snapshot(3);
  REQUIRE(snap3);
  CHECK_FALSE(snap3->async_part);
}

TEST_CASE("2pc sink: a failed fsync of the output folder is tried again by the next snapshot") {
  sink_fixture f;
  auto sink = f.open();
  f.commit_one(*sink);
  auto snap2 = sink->snapshot(2);
  REQUIRE(snap2);
  REQUIRE(snap2->async_part);
  // The output folder is away while the part runs: its fsync fails, so checkpoint 2 is
  // declined and commit 1 is still not durable.
  const auto aside = f.dir.path() / "aside";
  std::filesystem::rename(f.out, aside);
  auto failed = snap2->async_part();
  std::filesystem::rename(aside, f.out);
  REQUIRE_FALSE(failed);
  CHECK(failed.err().message.find(f.out.string()) != std::string::npos);
  CHECK_FALSE(sink->commits_durable());

  auto snap3 = sink->snapshot(3);
  REQUIRE(snap3);
  REQUIRE(snap3->async_part);
  REQUIRE(snap3->async_part());
  CHECK(sink->commits_durable());
  CHECK(f.committed_seqs() == range(0, 2));
}

TEST_CASE("2pc sink: parts that end out of order never move durability backwards") {
  sink_fixture f;
  auto sink = f.open();
  f.commit_one(*sink);
  auto snap2 = sink->snapshot(2);  // covers commit 1
  f.write(*sink, 2, 2);
  f.barrier(*sink, 3);
  REQUIRE(sink->notify_checkpoint_complete(3));
  auto snap4 = sink->snapshot(4);  // covers commits 1 and 3
  REQUIRE(snap2);
  REQUIRE(snap4);
  REQUIRE(snap4->async_part());
  CHECK(sink->commits_durable());
  REQUIRE(snap2->async_part());  // the older part ends last
  CHECK(sink->commits_durable());
}

TEST_CASE("2pc sink: an aborted checkpoint's pre-commit is carried into the next commit") {
  sink_fixture f;
  auto sink = f.open();
  f.write(*sink, 0, 3);
  f.barrier(*sink, 1);
  REQUIRE(sink->notify_checkpoint_aborted(1));
  // Not dropped: its records came before barrier 2 too, so checkpoint 2 covers them.
  REQUIRE(sink->pre_committed().size() == 1);
  CHECK(f.committed_seqs().empty());
  f.write(*sink, 3, 2);
  auto state = f.barrier(*sink, 2);
  auto listed = two_phase_commit_file_sink::decode_transactions(state.at(0).bytes);
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].id == 1);
  CHECK((*listed)[1].id == 2);
  REQUIRE(sink->notify_checkpoint_complete(2));
  CHECK(f.committed_seqs() == range(0, 5));
  f.check_nothing_uncommitted_visible();
}

TEST_CASE("2pc sink: restore commits the restored pre-commits and discards everything newer") {
  sink_fixture f;
  std::vector<operator_state_entry> state1;
  {
    auto sink = f.open(0, 1, /*attempt=*/0);
    f.write(*sink, 0, 3);
    state1 = f.barrier(*sink, 1);
    f.write(*sink, 3, 2);
    f.barrier(*sink, 2);   // pre-committed, but checkpoint 2 never completes
    f.write(*sink, 5, 1);  // an open transaction
    // The task dies here: no commit, staging files stay behind.
  }
  CHECK(f.staged_files() == 3);
  CHECK(f.committed_seqs().empty());

  auto restored = f.open(0, 1, /*attempt=*/1, /*restored_id=*/1, {{0, 1, state1}});
  CHECK(f.committed_seqs() == range(0, 3));  // checkpoint 1's transaction
  CHECK(f.staged_files() == 0);              // 2's pre-commit and the open one are gone
  CHECK(restored->pre_committed().empty());
  f.check_nothing_uncommitted_visible();

  // The replayed records go into new transactions.
  f.write(*restored, 3, 3);
  f.barrier(*restored, 3);
  REQUIRE(restored->notify_checkpoint_complete(3));
  CHECK(f.committed_seqs() == range(0, 6));
}

TEST_CASE("2pc sink: restoring a transaction that was already committed does not duplicate it") {
  sink_fixture f;
  std::vector<operator_state_entry> state1;
  {
    auto sink = f.open();
    f.write(*sink, 0, 4);
    state1 = f.barrier(*sink, 1);
    REQUIRE(sink->notify_checkpoint_complete(1));  // committed, then the job died
  }
  auto restored = f.open(0, 1, 1, 1, {{0, 1, state1}});
  CHECK(f.committed_seqs() == range(0, 4));
}

TEST_CASE("2pc sink: restore refuses a state that lists a transaction newer than the checkpoint") {
  sink_fixture f;
  std::vector<operator_state_entry> state2;
  {
    auto sink = f.open();
    f.write(*sink, 0, 1);
    state2 = f.barrier(*sink, 2);
  }
  auto sink = std::make_unique<two_phase_commit_file_sink>();
  operator_context c;
  c.vertex = &f.vertex;
  c.restored_checkpoint = 1;
  auto r = sink->open(c, {{0, 1, state2}});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("future"));
}

TEST_CASE("2pc sink: at a smaller parallelism one subtask takes over every old transaction") {
  sink_fixture f;
  std::vector<restored_operator_state> restored;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto sink = f.open(i, 2);
    f.write(*sink, 10 * i, 2);
    restored.push_back({i, 2, f.barrier(*sink, 1)});
    f.write(*sink, 100 + 10 * i, 1);  // open, discarded on restore
  }
  auto sink = f.open(0, 1, 1, 1, restored);
  CHECK(f.committed_seqs() == std::vector<std::int64_t>{0, 1, 10, 11});
  CHECK(f.staged_files() == 0);
}

TEST_CASE("2pc sink: end of input commits whatever is left") {
  sink_fixture f;
  auto sink = f.open();
  f.write(*sink, 0, 2);
  f.barrier(*sink, 1);
  f.write(*sink, 2, 2);
  REQUIRE(sink->end_input(f.unused));
  CHECK(f.committed_seqs() == range(0, 4));
  CHECK(f.staged_files() == 0);
  CHECK(sink->commits_durable());
}

TEST_CASE("2pc sink: end of input makes a commit that came before it durable") {
  // The final checkpoint's notification commits, then the input ends: no snapshot follows.
  sink_fixture f;
  auto sink = f.open();
  f.commit_one(*sink);
  CHECK_FALSE(sink->commits_durable());
  REQUIRE(sink->end_input(f.unused));
  CHECK(sink->commits_durable());
  CHECK(f.committed_seqs() == range(0, 2));
}

TEST_CASE("2pc sink: the transaction list survives any bytes in names, and rejects escapes") {
  std::vector<two_phase_commit_file_sink::transaction> txns{
      {3, ".staging/x/0/.txn-a0-0.pending", "part-x-0-3"},
      {4, ".staging/x/0/.txn a0:1\n.pending", "part-x-0-4"}};
  auto back = two_phase_commit_file_sink::decode_transactions(
      two_phase_commit_file_sink::encode_transactions(txns));
  REQUIRE(back);
  CHECK(*back == txns);
  CHECK_FALSE(two_phase_commit_file_sink::decode_transactions("3 5:abcde"));
  CHECK_FALSE(two_phase_commit_file_sink::decode_transactions(
      two_phase_commit_file_sink::encode_transactions({{1, "../../etc", "part"}})));
  CHECK_FALSE(two_phase_commit_file_sink::decode_transactions(
      two_phase_commit_file_sink::encode_transactions({{1, ".staging/a", "../x"}})));
}

TEST_CASE("2pc sink: file names carry the job id, so two jobs in one folder keep apart") {
  sink_fixture f;
  auto first = f.open();
  f.write(*first, 0, 2);
  f.barrier(*first, 1);
  REQUIRE(first->notify_checkpoint_complete(1));
  f.write(*first, 2, 1);
  f.barrier(*first, 2);  // pre-committed, still staged when the second job starts

  // The same job file run again into the same folder: another job id, the same uid.
  f.job = "0123456789abcdef0123456789abcdef";
  auto second = f.open();
  CHECK(f.staged_files() == 1);  // opening the second job never touches the first's staging
  f.write(*second, 0, 2);
  f.barrier(*second, 1);
  REQUIRE(second->notify_checkpoint_complete(1));
  REQUIRE(first->notify_checkpoint_complete(2));

  std::vector<std::string> parts;
  for (const auto& name : list_names(f.out))
    if (name != ".staging") parts.push_back(name);
  std::sort(parts.begin(), parts.end());
  REQUIRE(parts.size() == 3);
  // part-<job>-<uid>-<subtask>-<checkpoint>: checkpoint 1 of each job, checkpoint 2 of the first.
  CHECK(parts[0].rfind("part-0123456789abcdef0123456789abcdef-sink-", 0) == 0);
  CHECK(parts[0].substr(parts[0].size() - 4) == "-0-1");
  CHECK(parts[1].rfind("part-job-sink-", 0) == 0);
  CHECK(parts[1].substr(parts[1].size() - 4) == "-0-1");
  CHECK(parts[2].rfind("part-job-sink-", 0) == 0);
  CHECK(parts[2].substr(parts[2].size() - 4) == "-0-2");
  // Every record of both jobs, none overwritten.
  CHECK(f.committed_seqs() == std::vector<std::int64_t>{0, 0, 1, 1, 2});
  f.check_nothing_uncommitted_visible();
}

TEST_CASE("file_safe_job: a generated id as it is, anything else made safe and still distinct") {
  CHECK(file_safe_job("0123456789abcdef0123456789abcdef") == "0123456789abcdef0123456789abcdef");
  CHECK(file_safe_job("") == "job");
  const std::string dashed = file_safe_job("a-b");
  CHECK(dashed.rfind("a_b_", 0) == 0);
  // The CRC-32C of the id, as scripts/check_output.py computes it for --job.
  CHECK(dashed == "a_b_dc4e704d");
  CHECK(dashed.find('-') == std::string::npos);
  CHECK(dashed != file_safe_job("a_b"));
  CHECK(dashed != file_safe_job("a/b"));
  const std::string long_id(200, 'x');
  CHECK(file_safe_job(long_id).size() == 64);
  CHECK(file_safe_job(long_id) != file_safe_job(long_id + "y"));
  CHECK(file_safe_job("../etc").find('/') == std::string::npos);
}
