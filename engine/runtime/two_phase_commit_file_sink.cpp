#include "engine/runtime/two_phase_commit_file_sink.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>

#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/sink_operators.hpp"

namespace snapflow {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view transactions_state = "pre_committed";

void put_string(std::string& out, std::string_view s) {
  out.append(std::to_string(s.size()));
  out.push_back(':');
  out.append(s);
}

bool get_number(std::string_view& in, char end, std::int64_t& out) {
  const auto stop = in.find(end);
  if (stop == std::string_view::npos || stop == 0) return false;
  auto [ptr, ec] = std::from_chars(in.data(), in.data() + stop, out);
  if (ec != std::errc() || ptr != in.data() + stop) return false;
  in.remove_prefix(stop + 1);
  return true;
}

bool get_string(std::string_view& in, std::string& out) {
  std::int64_t n = 0;
  if (!get_number(in, ':', n) || n < 0 || static_cast<std::uint64_t>(n) > in.size()) return false;
  out.assign(in.substr(0, static_cast<std::size_t>(n)));
  in.remove_prefix(static_cast<std::size_t>(n));
  return true;
}

// A staging subfolder name is a subtask index: decimal, no sign.
std::optional<std::uint32_t> parse_index(const std::string& name) {
  std::uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
  if (name.empty() || ec != std::errc() || ptr != name.data() + name.size()) return std::nullopt;
  return v;
}

// Snapshots' asynchronous parts may end out of order: the durable count only grows.
void raise_to(std::atomic<std::uint64_t>& count, std::uint64_t value) {
  for (auto seen = count.load(); seen < value && !count.compare_exchange_weak(seen, value);) {
  }
}

}  // namespace

std::string two_phase_commit_file_sink::encode_transactions(const std::vector<transaction>& txns) {
  // "<id> <len>:<staging><len>:<committed>\n" per transaction: any bytes in names survive.
  std::string out;
  for (const auto& t : txns) {
    out.append(std::to_string(t.id));
    out.push_back(' ');
    put_string(out, t.staging);
    put_string(out, t.committed);
    out.push_back('\n');
  }
  return out;
}

result<std::vector<two_phase_commit_file_sink::transaction>>
two_phase_commit_file_sink::decode_transactions(std::string_view in) {
  std::vector<transaction> out;
  while (!in.empty()) {
    transaction t;
    if (!get_number(in, ' ', t.id) || !get_string(in, t.staging) || !get_string(in, t.committed) ||
        in.empty() || in.front() != '\n')
      return error{"two_phase_commit_file_sink state: malformed transaction list"};
    in.remove_prefix(1);
    // Names come from a state file: never let one point outside the output folder.
    if (t.committed.find('/') != std::string::npos || t.committed.empty() ||
        t.staging.find("..") != std::string::npos || t.staging.empty() || t.staging[0] == '/')
      return error{"two_phase_commit_file_sink state: suspicious file name"};
    out.push_back(std::move(t));
  }
  return out;
}

fs::path two_phase_commit_file_sink::staging_folder_of(std::uint32_t subtask) const {
  return staging_root() / std::to_string(subtask);
}

fs::path two_phase_commit_file_sink::staging_root() const {
  return output_ / staging_folder_name / job_ / file_safe_uid(uid_);
}

result<void> two_phase_commit_file_sink::open(
    const operator_context& context, const std::vector<restored_operator_state>& restored) {
  auto path = string_param(*context.vertex, "path");
  if (!path) return path.err();
  if (path->empty()) return error{"two_phase_commit_file_sink: path must not be blank"};
  output_ = *path;
  uid_ = context.vertex->uid;
  job_ = file_safe_job(context.job);
  subtask_ = context.subtask_index;
  parallelism_ = context.parallelism;
  attempt_ = context.attempt;
  std::error_code ec;
  fs::create_directories(staging_folder_of(subtask_), ec);
  if (ec)
    return error{"two_phase_commit_file_sink: create " + staging_folder_of(subtask_).string() +
                 ": " + ec.message()};
  // The new folders must survive a crash along with the files later fsynced in them.
  const fs::path parent = output_.parent_path().empty() ? fs::path(".") : output_.parent_path();
  for (const fs::path& folder : {parent, output_, output_ / staging_folder_name,
                                 output_ / staging_folder_name / job_, staging_root()})
    if (auto synced = fsync_folder(folder); !synced) return synced;

  // Commit what the restored checkpoint pre-committed for the old subtasks this one owns.
  std::vector<transaction> to_commit;
  for (const auto& old : restored) {
    if (old.old_subtask_index % parallelism_ != subtask_) continue;
    for (const auto& e : old.entries) {
      if (e.name != transactions_state) continue;
      auto txns = decode_transactions(e.bytes);
      if (!txns) return txns.err();
      for (auto& t : *txns) {
        if (t.id > context.restored_checkpoint)
          return error{"two_phase_commit_file_sink state of checkpoint " +
                       std::to_string(context.restored_checkpoint) + " lists transaction " +
                       std::to_string(t.id) + " from its future"};
        to_commit.push_back(std::move(t));
      }
    }
  }
  for (const auto& t : to_commit)
    if (auto r = commit(t); !r) return r;
  if (!to_commit.empty()) {
    if (auto r = fsync_folder(output_); !r) return r;
  }
  // Everything else staged by the owned old subtasks is newer than the restored checkpoint (or
  // was never pre-committed): its records will be replayed.
  return clean_owned_staging();
}

result<void> two_phase_commit_file_sink::clean_owned_staging() {
  const fs::path root = staging_root();
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) return error{"two_phase_commit_file_sink: list " + root.string() + ": " + ec.message()};
  std::vector<fs::path> doomed;
  for (const fs::directory_iterator end; it != end; it.increment(ec)) {
    if (ec) break;
    const auto index = parse_index(it->path().filename().string());
    if (!index || *index % parallelism_ != subtask_) continue;
    std::error_code list_ec;
    for (fs::directory_iterator f(it->path(), list_ec), fend; !list_ec && f != fend;
         f.increment(list_ec))
      doomed.push_back(f->path());
  }
  if (ec) return error{"two_phase_commit_file_sink: list " + root.string() + ": " + ec.message()};
  for (const auto& p : doomed) {
    fs::remove(p, ec);
    if (ec) return error{"two_phase_commit_file_sink: remove " + p.string() + ": " + ec.message()};
  }
  return success();
}

result<void> two_phase_commit_file_sink::process(const record& r, record_output&) {
  if (!current_.is_open()) {
    current_relative_ =
        (fs::path(staging_folder_name) / job_ / file_safe_uid(uid_) / std::to_string(subtask_) /
         (".txn-a" + std::to_string(attempt_) + "-" + std::to_string(next_txn_++) +
          std::string(pending_suffix)))
            .string();
    if (auto opened = current_.open(output_ / current_relative_, /*append=*/false); !opened)
      return opened;
  }
  line_.clear();
  append_record_line(line_, r);
  return current_.append(line_);
}

result<operator_snapshot> two_phase_commit_file_sink::snapshot(checkpoint_id id) {
  assert(id > last_barrier_);
  last_barrier_ = id;
  if (current_.is_open()) {
    if (auto closed = current_.close(); !closed) return closed.err();
    pre_committed_.push_back({id, current_relative_, committed_name(std::to_string(id))});
  }
  operator_snapshot s;
  s.state.push_back({std::string(transactions_state), encode_transactions(pre_committed_)});
  // The commits since the output folder's last fsync: this checkpoint no longer lists them,
  // so they must be durable before it is acknowledged.
  const bool sync_output = durable_commits_->load() != commits_;
  if (pre_committed_.empty() && !sync_output) return s;
  // Every listed file, not only the newest: an aborted checkpoint's fsync may still be queued
  // or may have failed, and its transaction is committed with this checkpoint. A listed file
  // may meanwhile have been committed (renamed) by the notification of an older checkpoint
  // that overtook this write: then the committed file is fsynced instead.
  std::vector<std::pair<fs::path, fs::path>> files;
  for (const auto& t : pre_committed_)
    files.emplace_back(output_ / t.staging, output_ / t.committed);
  s.async_part = [files = std::move(files), staging = staging_folder_of(subtask_),
                  output = sync_output ? output_ : fs::path(), commits = commits_,
                  durable = durable_commits_]() -> result<void> {
    for (const auto& [staging_file, committed_file] : files) {
      auto synced = fsync_file(staging_file);
      if (!synced && !fsync_file(committed_file)) return synced;
    }
    if (!files.empty()) {
      if (auto synced = fsync_folder(staging); !synced) return synced;
    }
    if (output.empty()) return success();
    if (auto synced = fsync_folder(output); !synced) return synced;
    raise_to(*durable, commits);
    return success();
  };
  return s;
}

std::string two_phase_commit_file_sink::committed_name(const std::string& suffix) const {
  return "part-" + job_ + "-" + file_safe_uid(uid_) + "-" + std::to_string(subtask_) + "-" +
         suffix;
}

result<void> two_phase_commit_file_sink::commit(const transaction& t) {
  const fs::path from = output_ / t.staging;
  const fs::path to = output_ / t.committed;
  std::error_code ec;
  fs::rename(from, to, ec);
  if (!ec) return success();
  // Renamed already (a commit that ran before a crash or a restart): nothing to do.
  std::error_code from_ec;
  std::error_code to_ec;
  if (!fs::exists(from, from_ec) && fs::exists(to, to_ec)) return success();
  return error{"two_phase_commit_file_sink: commit " + from.string() + " -> " + to.string() + ": " +
               ec.message()};
}

result<void> two_phase_commit_file_sink::commit_up_to(checkpoint_id id) {
  auto first_newer = std::stable_partition(pre_committed_.begin(), pre_committed_.end(),
                                           [id](const transaction& t) { return t.id <= id; });
  if (first_newer == pre_committed_.begin()) return success();
  for (auto it = pre_committed_.begin(); it != first_newer; ++it) {
    if (auto r = commit(*it); !r) return r;
    ++commits_;
  }
  pre_committed_.erase(pre_committed_.begin(), first_newer);
  return success();  // made durable by the next snapshot; see the class comment
}

result<void> two_phase_commit_file_sink::notify_checkpoint_complete(checkpoint_id id) {
  return commit_up_to(id);
}

result<void> two_phase_commit_file_sink::notify_checkpoint_aborted(checkpoint_id) {
  // Carried over to the next checkpoint's commit; see the class comment.
  return success();
}

result<void> two_phase_commit_file_sink::end_input(record_output&) {
  if (current_.is_open()) {
    if (auto closed = current_.close(); !closed) return closed;
    // Never part of a snapshot, so never committed twice: any free name will do.
    const std::string base = committed_name("end-" + std::to_string(last_barrier_));
    std::string name = base;
    std::error_code exists_ec;
    for (int k = 1; fs::exists(output_ / name, exists_ec) && k < 1000; ++k)
      name = base + "-" + std::to_string(k);
    pre_committed_.push_back({last_barrier_, current_relative_, name});
  }
  // The final checkpoint's commit may have come first: it is made durable here, as no
  // snapshot follows.
  if (pre_committed_.empty()) return commits_durable() ? success() : sync_output_folder();
  for (const auto& t : pre_committed_)
    if (auto synced = fsync_file(output_ / t.staging); !synced) return synced;
  if (auto synced = fsync_folder(staging_folder_of(subtask_)); !synced) return synced;
  for (const auto& t : pre_committed_) {
    if (auto r = commit(t); !r) return r;
    ++commits_;
  }
  pre_committed_.clear();
  return sync_output_folder();
}

result<void> two_phase_commit_file_sink::sync_output_folder() {
  if (auto synced = fsync_folder(output_); !synced) return synced;
  raise_to(*durable_commits_, commits_);
  return success();
}

}  // namespace snapflow
