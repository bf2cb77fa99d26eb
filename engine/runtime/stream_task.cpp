#include "engine/runtime/stream_task.hpp"

#include <cassert>
#include <exception>
#include <sstream>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/clock.hpp"
#include "engine/runtime/byte_gauge.hpp"
#include "engine/runtime/replaying_input_channel.hpp"
#include "engine/hop_trace.hpp"
#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/state/key_groups.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_reader.hpp"
#include "engine/runtime/state_file_writer.hpp"
#include "engine/runtime/thread_name.hpp"
#include "engine/state/rocksdb_keyed_state_backend.hpp"

namespace snapflow {

namespace {

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

std::string describe(const execution_attempt_id& a, const job_vertex& v) {
  std::ostringstream os;
  os << (v.uid.empty() ? v.kind : v.uid) << " " << a;
  return os.str();
}

// Why a task whose thread caught `e` fails: a lost channel says so itself; anything else came
// out of an operator or a library.
std::string failure_cause(const std::exception& e) {
  if (dynamic_cast<const channel_failure*>(&e) != nullptr) return e.what();
  return std::string("uncaught exception: ") + e.what();
}

// One old subtask's handles, taken apart: its state files (or inline states), and the files a
// keyed backend stored as they are (an incremental checkpoint), by the last component of their
// path, which is unique among them.
struct split_state {
  struct file {
    const state_handle* handle;
    bool used = false;
  };
  std::vector<const state_handle*> state_files;
  std::map<std::string, file> files;
};

result<split_state> split_handles(const subtask_state& state) {
  split_state out;
  for (const auto& handle : state.handles) {
    if (handle.is_inline() || handle.path.ends_with(".state")) {
      out.state_files.push_back(&handle);
      continue;
    }
    const std::string name = std::filesystem::path(handle.path).filename().string();
    if (!out.files.emplace(name, split_state::file{&handle}).second)
      return error{"two state handles end in the same file name " + name};
  }
  return out;
}

// The manifest's files matched with the handles that carry them.
result<keyed_files_restore> match_files(keyed_state_files manifest, split_state& split) {
  keyed_files_restore out;
  for (const auto& f : manifest.files) {
    auto it = split.files.find(f.handle_name);
    if (it == split.files.end())
      return error{"its keyed state file " + f.handle_name + " (" + f.local_name +
                   ") is missing from its state handles"};
    const state_handle& h = *it->second.handle;
    if (h.size != f.size || h.checksum != f.checksum || h.is_shared() != f.shared)
      return error{"the handle of " + h.path + " and its manifest disagree on its size, "
                   "checksum or sharing"};
    it->second.used = true;
    out.paths.emplace_back(h.path);
  }
  out.manifest = std::move(manifest);
  return out;
}

// The checks every state file an old subtask lists passes, on its head: it is that subtask's,
// of this operator, at the parallelism of the others.
result<void> check_state_head(const state_handle& handle, std::uint32_t old_index,
                              const subtask_snapshot& s, const std::string& uid,
                              std::optional<std::uint32_t>& old_parallelism) {
  if (s.subtask_index != old_index)
    return error{handle.path + " was written by subtask " + std::to_string(s.subtask_index) +
                 ", listed for subtask " + std::to_string(old_index)};
  if (s.operator_uid != uid)
    return error{handle.path + " holds state of operator '" + s.operator_uid + "', not '" + uid +
                 "'"};
  if (old_parallelism && *old_parallelism != s.parallelism)
    return error{handle.path + " was written at parallelism " + std::to_string(s.parallelism) +
                 ", other states of the operator at " + std::to_string(*old_parallelism)};
  old_parallelism = s.parallelism;
  return success();
}

// Where the key groups of one state file go while it is read: the backend's streamed restore,
// or, for an operator without keyed state, nowhere (an error).
class restore_target final : public keyed_group_sink {
 public:
  restore_target(keyed_state_backend* backend, std::string uid)
      : backend_(backend), uid_(std::move(uid)) {}
  // The next file's key groups were cut at `max_parallelism`.
  void begin_file(std::uint32_t max_parallelism) {
    if (backend_) sink_.emplace(*backend_, max_parallelism);
  }
  result<void> key_group(std::uint32_t group, key_group_state& state) override {
    if (!backend_ || !sink_) return error{"keyed state for non-keyed operator '" + uid_ + "'"};
    return sink_->key_group(group, state);
  }

 private:
  keyed_state_backend* backend_;
  std::string uid_;
  std::optional<keyed_state_backend::restore_sink> sink_;
};

}  // namespace

// The operator's emit(): partitions over every output edge.
class stream_task::task_output final : public record_output {
 public:
  explicit task_output(stream_task& task) : task_(task) {}
  void emit(record r) override {
    // An output without event time of its own is at its input's (Flink's TimestampedCollector).
    if (r.timestamp == no_timestamp) r.timestamp = task_.input_timestamp_;
    // Only the task thread writes the counter: a relaxed load and store, no locked add.
    task_.records_out_.store(task_.records_out_.load(std::memory_order_relaxed) + 1,
                             std::memory_order_relaxed);
    auto& gates = task_.gates_;
    if (gates.empty()) return;
    for (std::size_t i = 0; i + 1 < gates.size(); ++i)
      if (!gates[i].emit(r)) task_.outputs_cancelled_ = true;
    if (!gates.back().emit(std::move(r))) task_.outputs_cancelled_ = true;
  }
  void emit_watermark(const watermark& w) override {
    // The end of time goes no further: the end of input that follows it says the same to every
    // consumer, and a job without event time sends no watermark at all.
    if (w.timestamp == max_watermark && !w.idle) return;
    for (auto& gate : task_.gates_)
      if (!gate.emit_watermark(w)) task_.outputs_cancelled_ = true;
  }

 private:
  stream_task& task_;
};

stream_task::stream_task(stream_task_config config)
    : config_(std::move(config)),
      wakeup_(config_.wakeup ? config_.wakeup : std::make_shared<task_wakeup>()),
      mailbox_(wakeup_) {
  assert(config_.responder);
  assert(config_.listener);
  assert(config_.writer);
  assert(config_.batch_size >= 1);
  assert(config_.idle_recheck.count() > 0 && "an idle recheck of 0 would spin");
  assert(config_.attempt.subtask.index < config_.vertex.parallelism);
  assert(config_.role == operator_role::source ? config_.inputs.empty() : !config_.inputs.empty());
  for (auto& in : config_.inputs) in->set_wakeup(wakeup_);
  inputs_ = config_.inputs;
  // Room coming back on a backlogged output wakes the task as input does.
  for (auto& edge : config_.outputs)
    for (auto& c : edge.channels) c->set_room_wakeup(wakeup_);
}

stream_task::~stream_task() {
  if (thread_.joinable()) {
    cancel();
    thread_.join();
  }
  // The task thread removed its runner when it ended; a task never started has none.
}

void stream_task::start() {
  assert(!thread_.joinable());
  thread_ = std::thread([this] { run(); });
}

void stream_task::join() {
  if (thread_.joinable()) thread_.join();
}

void stream_task::trigger_checkpoint(checkpoint_id id, std::int64_t timestamp_us,
                                     const checkpoint_options& options) {
  hop_trace::record("w.post_trigger", id);
  if (!trigger_on_caller_.load(std::memory_order_acquire)) {
    mailbox_.post(trigger_message{id, timestamp_us, options});
    return;
  }
  // Through the mailbox all the same, so that it keeps its place behind what came before.
  if (!mailbox_.post_without_wakeup(trigger_message{id, timestamp_us, options})) return;
  if (!run_mailbox_on_caller()) wakeup_->notify();
}

bool stream_task::idle_after_turn() {
  std::lock_guard turn(turn_mutex_);
  return idle_;
}

bool stream_task::run_mailbox_on_caller() {
  std::unique_lock turn(turn_mutex_, std::try_to_lock);
  // Busy (emitting, or between its wait and its next look at the mailbox, which the wake-up
  // the caller sends next makes it take): its thread runs the mailbox.
  if (!turn.owns_lock() || !idle_ || caller_failure_ || should_stop()) return false;
  try {
    // The barrier must go out at once, not into a backlog that only the task thread hands
    // over. The turn keeps every other sender off these channels until it is released.
    for (auto& gate : gates_)
      if (!gate.can_broadcast_now()) return false;
    // Exactly the trigger just posted: with anything else queued (an earlier trigger left to
    // the task thread, whose second barrier might not fit), the task thread takes them all.
    auto trigger = mailbox_.take_sole_trigger();
    if (!trigger) return false;
    triggers_on_caller_.fetch_add(1, std::memory_order_relaxed);
    on_caller_ = true;
    auto r = handle_trigger(*trigger);
    on_caller_ = false;
    if (!r) caller_failure_ = r.err();
  } catch (const std::exception& e) {
    on_caller_ = false;
    caller_failure_ = error{failure_cause(e)};
  }
  // The task thread ends the task with a failure, and submits what the writer had no room for.
  if (caller_failure_ || !deferred_writes_.empty()) wakeup_->notify();
  return true;
}

void stream_task::notify_checkpoint_complete(checkpoint_id id, std::int64_t timestamp_us) {
  // An operator that does nothing on completion is notified when the notification arrives:
  // no wake-up of the task thread. Until the operator exists (initialize(), on the task thread)
  // that is not known, and the notification goes through the mailbox as for a listener.
  if (completion_not_needed_.load(std::memory_order_acquire)) {
    record_notified(id);
    return;
  }
  mailbox_.post(complete_message{id, timestamp_us});
}

void stream_task::notify_checkpoint_aborted(checkpoint_id id, checkpoint_id latest_completed_id) {
  mailbox_.post(abort_message{id, latest_completed_id});
}

void stream_task::finish() {
  mailbox_.post(finish_message{});
}

void stream_task::cancel() {
  cancel_requested_ = true;
  cancel_channels();
  wakeup_->notify();
}

void stream_task::fail(std::string cause) {
  {
    std::lock_guard lock(fail_mutex_);
    if (fail_requested_) return;
    fail_cause_ = std::move(cause);
    fail_requested_ = true;
  }
  // A crashed task's channels break: neighbours blocked on them wake up.
  cancel_channels();
  wakeup_->notify();
}

void stream_task::cancel_channels() {
  for (auto& in : config_.inputs) in->cancel();
  for (auto& edge : config_.outputs)
    for (auto& c : edge.channels) c->cancel();
}

bool stream_task::should_stop() const {
  return cancel_requested_.load() || fail_requested_.load() || outputs_cancelled_;
}

std::int64_t stream_task::now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void stream_task::record_notified(checkpoint_id id) {
  // After the operator handled it (a sink committed): that is when the subtask was notified.
  const std::int64_t now = coordinator_clock::now_us();
  std::lock_guard lock(notified_mutex_);
  if (id <= last_notified_) return;  // stale or repeated
  last_notified_ = id;
  if (notified_.size() >= max_notified_per_report) notified_.erase(notified_.begin());
  notified_.push_back({id, now});
}

std::vector<checkpoint_notified> stream_task::take_notified() {
  std::lock_guard lock(notified_mutex_);
  return std::exchange(notified_, {});
}

void stream_task::report(execution_state state, const std::string& message) {
  config_.listener->on_task_state(config_.attempt, state, message);
}

void stream_task::run() {
  name_this_thread((config_.role == operator_role::source ? "source " : "task ") +
                   std::to_string(config_.vertex.id) + "." +
                   std::to_string(config_.attempt.subtask.index));
  // The task thread's turn, from the start: a source gives it up only while it waits idle, so
  // whoever takes it after RUNNING was reported finds the source idle or ended.
  std::unique_lock turn(turn_mutex_);
  result<void> outcome = success();
  try {
    report(execution_state::initializing);
    outcome = initialize();
    if (outcome) {
      report(execution_state::running);
      outcome = source_ ? run_source(turn) : run_inputs(turn);
    }
  } catch (const std::exception& e) {
    // User callables may throw; the task thread is where that ends.
    outcome = error{failure_cause(e)};
  }
  // Nothing touches the keyed state any more (barriers and triggers are taken on other threads
  // only while this thread waits idle): a backend's working folder goes now, or once the
  // snapshot writes still reading it have ended.
  keyed_.reset();
  if (fail_requested_) {
    std::string cause;
    {
      std::lock_guard lock(fail_mutex_);
      cause = fail_cause_;
    }
    done_ = true;
    report(execution_state::failed, cause);
    return;
  }
  if (!outcome) {
    spdlog::warn("task {} failed: {}", describe(config_.attempt, config_.vertex),
                 outcome.err().message);
    done_ = true;
    // The cause first: cancelling the channels makes this task's neighbours end as canceled,
    // and their reports must not reach the job master ahead of the failure that caused them.
    report(execution_state::failed, outcome.err().message);
    cancel_channels();
    return;
  }
  if (cancel_requested_ || outputs_cancelled_) {
    done_ = true;
    report(execution_state::canceled);
    return;
  }
  // FINISHED only after this task's snapshot writes have acked or declined: the coordinator
  // then handles their acks first, and a checkpoint this task did take is not aborted as
  // closing. Writes a trigger's thread could not submit go now.
  for (auto& write : deferred_writes_) config_.writer->submit(std::move(write));
  deferred_writes_.clear();
  writes_->wait();
  done_ = true;
  report(execution_state::finished);
}

result<void> stream_task::initialize() {
  const auto& factory = config_.operators ? *config_.operators : operator_factory::builtin();
  auto made = factory.create(config_.vertex);
  if (!made) return made.err();
  operator_ = std::move(made).value();
  source_ = dynamic_cast<source_operator*>(operator_.get());
  completion_listener_ = dynamic_cast<checkpoint_completion_listener*>(operator_.get());
  if ((source_ != nullptr) != (config_.role == operator_role::source))
    return error{"operator kind '" + config_.vertex.kind +
                 "' and its role disagree on being a source"};

  const std::uint32_t index = config_.attempt.subtask.index;
  const std::uint32_t parallelism = config_.vertex.parallelism;
  if (config_.role == operator_role::keyed) {
    if (auto r = create_keyed_state(); !r) return r;
  }
  // Incremental keyed state learns which checkpoints completed (their files may be named
  // again) on this thread, through the mailbox, like an operator that listens.
  const bool keyed_listens = keyed_ && config_.incremental_checkpoints &&
                             config_.state_backend != state_backend_kind::hashmap;
  if (completion_listener_ == nullptr && !keyed_listens)
    completion_not_needed_.store(true, std::memory_order_release);

  for (auto& edge : config_.outputs) {
    partitioner part(edge.part, static_cast<std::uint32_t>(edge.channels.size()),
                     edge.target_max_parallelism, index);
    gates_.emplace_back(part, edge.channels, config_.batch_size);
    if (config_.max_in_flight_bytes != 0)
      for (auto& c : edge.channels) c->set_max_in_flight_bytes(config_.max_in_flight_bytes);
  }
  in_flight_bound_.store(config_.max_in_flight_bytes, std::memory_order_relaxed);
  if (config_.max_in_flight_bytes != 0)
    for (auto& in : config_.inputs) in->set_max_in_flight_bytes(config_.max_in_flight_bytes);
  if (config_.buffer_debloat && config_.max_in_flight_bytes != 0 && !config_.inputs.empty()) {
    buffer_debloater::settings s;
    s.target_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      config_.buffer_debloat_target)
                      .count();
    s.max_bytes = config_.max_in_flight_bytes;
    s.channels = config_.inputs.size();
    s.period_us =
        std::chrono::duration_cast<std::chrono::microseconds>(config_.buffer_debloat_period)
            .count();
    debloater_.emplace(s, now_us());
  }
  output_ = std::make_unique<task_output>(*this);

  if (!config_.inputs.empty()) {
    cursors_.resize(config_.inputs.size());
    valve_.emplace(config_.inputs.size());
    if (config_.mode == checkpointing_mode::exactly_once)
      handler_.emplace(std::in_place_type<barrier_aligner>, config_.inputs.size());
    else
      handler_.emplace(std::in_place_type<barrier_tracker>, config_.inputs.size());
  }

  // Restore: the states the job master selected for this subtask (state_assignment.hpp) are
  // read (checksums first), keyed state keeps the key groups this subtask owns, operator state
  // goes to the operator to choose from.
  std::vector<restored_operator_state> restored;
  checkpoint_id restored_id = 0;
  if (config_.restore_checkpoint) {
    restored_id = *config_.restore_checkpoint;
    if (auto r = restore_state(restored); !r) return r;
    last_barrier_ = restored_id;
  }

  // Channel state of an unaligned checkpoint goes back ahead of anything new.
  if (!restored_channels_.empty()) {
    if (auto r = replay_channel_state(std::move(restored_channels_)); !r)
      return error{"restoring checkpoint " + std::to_string(restored_id) + ": " +
                   r.err().message};
    restored_channels_.clear();
  }
  begin_recovery_alignment();

  operator_context context;
  context.job = config_.job;
  context.vertex = &config_.vertex;
  context.subtask_index = index;
  context.parallelism = parallelism;
  context.attempt = config_.attempt.attempt;
  context.keyed_state = keyed_.get();
  context.restored_checkpoint = restored_id;
  return operator_->open(context, restored);
}

result<void> stream_task::create_keyed_state() {
  const key_group_range range = key_groups::range_for_subtask(
      config_.attempt.subtask.index, config_.vertex.parallelism, config_.vertex.max_parallelism);
  std::filesystem::path folder;
  if (config_.state_backend != state_backend_kind::hashmap) {
    if (config_.local_state_dir.empty())
      return error{"the " + std::string(to_string(config_.state_backend)) +
                   " state backend needs a local folder for its working files, and this task "
                   "was given none"};
    // The job id comes from outside: reduced to file-name-safe characters.
    folder = config_.local_state_dir / to_string(config_.state_backend) /
             (file_safe_uid(config_.job) + "-" + std::to_string(config_.vertex.id) + "-" +
              std::to_string(config_.attempt.subtask.index) + "-" +
              std::to_string(config_.attempt.attempt));
  }
  auto made = make_keyed_state_backend(config_.state_backend, config_.vertex.max_parallelism,
                                       range, folder, config_.incremental_checkpoints,
                                       config_.rocksdb_block_cache_bytes);
  if (!made) return made.err();
  keyed_ = std::move(made).value();
  return success();
}

result<void> stream_task::restore_state(std::vector<restored_operator_state>& restored) {
  // The states the job master selected for this subtask (state_assignment.hpp), read with their
  // checksums checked first. Keyed state keeps the key groups this subtask owns, streamed into
  // the backend one key group at a time; operator state goes to the operator to choose from.
  // Old subtasks whose keyed state is stored as backend files (an incremental checkpoint: a
  // small state file with a manifest) are read first: their files are the base the streamed
  // key groups of the others go on top of. Then every old subtask in index order, which is the
  // order of their key groups, so the stream stays ascending.
  const checkpoint_id restored_id = *config_.restore_checkpoint;
  const std::string where = "restoring checkpoint " + std::to_string(restored_id) + ": ";
  if (auto r = check_restore_scopes(); !r) return r;
  std::optional<std::uint32_t> old_parallelism;
  std::map<std::uint32_t, read_whole> whole;
  std::vector<keyed_files_restore> keyed_files;
  std::vector<std::uint32_t> keyed_files_of;
  for (const auto& [old_index, state] : config_.restore_states) {
    auto split = split_handles(state);
    if (!split) return error{where + split.err().message};
    if (split->files.empty()) continue;  // streamed below
    auto& read = whole[old_index];
    for (const state_handle* handle : split->state_files) {
      auto snapshot = state_file::read(*handle);
      if (!snapshot) return error{where + snapshot.err().message};
      if (auto r = check_state_head(*handle, old_index, *snapshot, config_.vertex.uid,
                                    old_parallelism);
          !r)
        return error{where + r.err().message};
      if ((!snapshot->keyed.key_groups.empty() || snapshot->keyed_files) && !keyed_)
        return error{where + "keyed state for non-keyed operator '" + config_.vertex.uid + "'"};
      if (!snapshot->keyed.key_groups.empty()) read.keyed.push_back(std::move(snapshot->keyed));
      if (snapshot->keyed_files) {
        auto files = match_files(std::move(*snapshot->keyed_files), *split);
        if (!files) return error{where + "the state of old subtask " +
                                 std::to_string(old_index) + ": " + files.err().message};
        keyed_files.push_back(std::move(files).value());
        keyed_files_of.push_back(old_index);
      }
      if (auto r = keep_channel_state(old_index, *snapshot); !r) return error{where + r.err().message};
      read.operator_state.push_back(
          {snapshot->subtask_index, snapshot->parallelism, std::move(snapshot->operator_state)});
    }
    for (const auto& [name, file] : split->files)
      if (!file.used)
        return error{where + "the state of old subtask " + std::to_string(old_index) + " names " +
                     file.handle->path + ", which no manifest of it lists"};
  }
  if (keyed_ && !keyed_files.empty() && config_.state_backend == state_backend_kind::hashmap) {
    if (auto r = read_keyed_files(keyed_files, keyed_files_of, whole); !r)
      return error{where + r.err().message};
    keyed_files.clear();
  }
  if (keyed_) {
    if (auto r = keyed_->begin_restore(keyed_files); !r) return error{where + r.err().message};
  }
  restore_target target(keyed_.get(), config_.vertex.uid);
  for (const auto& [old_index, state] : config_.restore_states) {
    if (auto it = whole.find(old_index); it != whole.end()) {
      for (auto& part : it->second.keyed) {
        target.begin_file(part.max_parallelism);
        for (auto& [group, groups_state] : part.key_groups)
          if (auto r = target.key_group(group, groups_state); !r)
            return error{where + r.err().message};
      }
      for (auto& s : it->second.operator_state) restored.push_back(std::move(s));
      continue;
    }
    auto split = split_handles(state);
    if (!split) return error{where + split.err().message};
    for (const state_handle* handle : split->state_files) {
      auto on_head = [&, old_index = old_index](const subtask_snapshot& head) -> result<void> {
        if (auto r = check_state_head(*handle, old_index, head, config_.vertex.uid,
                                      old_parallelism);
            !r)
          return r;
        target.begin_file(head.keyed.max_parallelism);
        return success();
      };
      auto snapshot = state_file_reader::read(*handle, target, on_head);
      if (!snapshot) return error{where + snapshot.err().message};
      if (snapshot->keyed_files) {
        if (!keyed_)
          return error{where + "keyed state for non-keyed operator '" + config_.vertex.uid + "'"};
        // Its handles carry no files (else it was read above): the manifest names missing ones.
        auto files = match_files(std::move(*snapshot->keyed_files), *split);
        if (!files) return error{where + "the state of old subtask " +
                                 std::to_string(old_index) + ": " + files.err().message};
        return error{where + "the state of old subtask " + std::to_string(old_index) +
                     " holds a keyed state files manifest that lists no files"};
      }
      if (auto r = keep_channel_state(old_index, *snapshot); !r) return error{where + r.err().message};
      restored.push_back(
          {snapshot->subtask_index, snapshot->parallelism, std::move(snapshot->operator_state)});
    }
  }
  if (keyed_ && old_parallelism) {
    if (auto r = check_keyed_restore_complete(*old_parallelism); !r) return r;
  }
  if (keyed_) {
    if (auto r = keyed_->end_restore(); !r) return error{where + r.err().message};
  }
  return success();
}

result<void> stream_task::read_keyed_files(
    const std::vector<keyed_files_restore>& files, const std::vector<std::uint32_t>& old_indexes,
    std::map<std::uint32_t, read_whole>& parts) const {
  if (config_.local_state_dir.empty())
    return error{"keyed state stored as rocksdb files needs a local folder to be read in, and "
                 "this task was given none"};
  const key_group_range own = keyed_->range();
  for (std::size_t i = 0; i < files.size(); ++i) {
    const keyed_state_files& m = files[i].manifest;
    if (m.last_key_group < own.first || m.first_key_group > own.last) continue;
    const std::filesystem::path scratch =
        config_.local_state_dir / "restore" /
        (file_safe_uid(config_.job) + "-" + std::to_string(config_.vertex.id) + "-" +
         std::to_string(config_.attempt.subtask.index) + "-" +
         std::to_string(config_.attempt.attempt) + "-" + std::to_string(i));
    auto part = rocksdb_keyed_state_backend::read_files(files[i], scratch);
    if (!part) return part.err();
    if (!part->key_groups.empty()) parts[old_indexes[i]].keyed.push_back(std::move(part).value());
  }
  return success();
}

result<void> stream_task::check_restore_scopes() const {
  // Before any file is read: keyed state cut at another max parallelism maps keys to other key
  // groups, so it cannot be split among this job's subtasks (the coordinator refuses such a
  // submission; this catches a descriptor that slipped through or a hostile one).
  const std::uint32_t max_parallelism = config_.vertex.max_parallelism;
  for (const auto& [old_index, state] : config_.restore_states) {
    if (!state.keyed) continue;
    const std::string which = "restoring checkpoint " +
                              std::to_string(*config_.restore_checkpoint) + ": the state of old " +
                              "subtask " + std::to_string(old_index) + " of '" +
                              config_.vertex.uid + "'";
    if (!state.keyed->is_valid())
      return error{which + " names key groups " + std::to_string(state.keyed->first_key_group) +
                   ".." + std::to_string(state.keyed->last_key_group) +
                   ", not a range inside max parallelism " +
                   std::to_string(state.keyed->max_parallelism)};
    if (state.keyed->max_parallelism != max_parallelism)
      return error{which + " was taken at max parallelism " +
                   std::to_string(state.keyed->max_parallelism) + ", this job declares " +
                   std::to_string(max_parallelism) + " (keep max_parallelism stable)"};
  }
  return success();
}

result<void> stream_task::check_keyed_restore_complete(std::uint32_t old_parallelism) const {
  // Only the old subtasks whose key groups overlap this subtask's are sent: a missing one would
  // silently lose keys, so it is an error, not an empty state.
  const std::uint32_t max_parallelism = config_.vertex.max_parallelism;
  if (old_parallelism == 0 || old_parallelism > max_parallelism)
    return success();  // key groups cannot be mapped; the backend refuses the parts itself
  const std::uint32_t index = config_.attempt.subtask.index;
  const key_groups::subtask_range overlapping = key_groups::overlapping_subtasks(
      index, config_.vertex.parallelism, old_parallelism, max_parallelism);
  for (std::uint32_t i = overlapping.first; i <= overlapping.last; ++i)
    if (!config_.restore_states.contains(i)) {
      const key_group_range own =
          key_groups::range_for_subtask(index, config_.vertex.parallelism, max_parallelism);
      return error{"restoring checkpoint " + std::to_string(*config_.restore_checkpoint) +
                   ": the state of old subtask " + std::to_string(i) + " of " +
                   std::to_string(old_parallelism) + ", whose key groups overlap this subtask's " +
                   "(" + std::to_string(own.first) + ".." + std::to_string(own.last) +
                   "), was not sent"};
    }
  return success();
}

result<void> stream_task::run_source(std::unique_lock<std::mutex>& turn) {
  using clock = std::chrono::steady_clock;
  if (source_->snapshot_on_any_thread() && completion_listener_ == nullptr)
    trigger_on_caller_.store(true, std::memory_order_release);
  for (;;) {
    const std::uint64_t seen = wakeup_->generation();
    if (caller_failure_) return *caller_failure_;
    for (auto& write : deferred_writes_) config_.writer->submit(std::move(write));
    deferred_writes_.clear();
    if (auto r = process_mailbox(); !r) return r;
    if (should_stop()) return success();
    if (auto r = check_unaligned_timeouts(); !r) return r;
    if (!wait_for_room(turn, seen)) continue;
    if (exhausted_) {
      const bool may_finish = !config_.final_checkpoint || finish_requested_;
      if (may_finish) {
        if (!flush_outputs()) return success();
        for (auto& gate : gates_)
          if (!gate.broadcast(end_of_input{})) return success();
        drain_before_end(turn);
        return success();
      }
      if (!flush_outputs()) return success();
      wait_idle(turn, seen, clock::now() + std::chrono::seconds(1));
      continue;
    }
    auto emitted = source_->emit(*output_, config_.batch_size);
    if (!emitted) return emitted.err();
    if (should_stop()) return success();
    switch (emitted->state) {
      case source_operator::emit_result::status::more:
        break;
      case source_operator::emit_result::status::wait:
        if (!flush_outputs()) return success();
        wait_idle(turn, seen, emitted->resume_at);
        break;
      case source_operator::emit_result::status::exhausted:
        exhausted_ = true;
        if (!flush_outputs()) return success();
        if (config_.final_checkpoint)
          config_.listener->on_source_exhausted(config_.attempt, last_barrier_);
        break;
    }
  }
}

result<void> stream_task::run_inputs(std::unique_lock<std::mutex>& turn) {
  assert(handler_);
  const std::size_t n = config_.inputs.size();
  // Barriers may be handled on the threads that deliver them from now on, until the task
  // ends (the runner is removed before this returns, whichever way).
  const bool on_caller = operator_->snapshot_on_any_thread() && completion_listener_ == nullptr;
  if (on_caller) wakeup_->set_barrier_runner([this] { return run_barrier_on_caller(); });
  struct remove_runner {
    task_wakeup& wakeup;
    bool set;
    ~remove_runner() {
      if (set) wakeup.set_barrier_runner(nullptr);
    }
  } remove{*wakeup_, on_caller};
  for (;;) {
    const std::uint64_t seen = wakeup_->generation();
    if (caller_failure_) return *caller_failure_;
    for (auto& write : deferred_writes_) config_.writer->submit(std::move(write));
    deferred_writes_.clear();
    if (auto r = process_mailbox(); !r) return r;
    if (should_stop()) return success();
    debloat();
    // Before the outputs' room is waited for: a barrier that overtakes records must not wait.
    if (auto r = take_overtaking_barriers(); !r) return r;
    if (auto r = check_unaligned_timeouts(); !r) return r;
    if (should_stop()) return success();
    if (!wait_for_room(turn, seen)) continue;
    if (auto r = run_processing_time(); !r) return r;
    bool progress = false;
    for (std::size_t k = 0; k < n && !should_stop() && !outputs_backlogged() &&
                            !(config_.unaligned_checkpoints && priority_barrier_waiting());
         ++k) {
      const std::size_t i = (next_input_ + k) % n;
      auto took = process_input(i);
      if (!took) return took.err();
      progress = progress || *took;
    }
    next_input_ = (next_input_ + 1) % n;
    if (should_stop()) return success();
    const bool all_ended = std::visit([](auto& h) { return h.all_ended(); }, *handler_);
    if (all_ended) return finish_inputs(turn);
    if (!progress) {
      if (!flush_outputs()) return success();
      // Waiting for input is no time the inputs' throughput is measured over.
      if (debloater_) debloater_->idle_begin(now_us());
      wait_idle(turn, seen, std::chrono::steady_clock::now() + config_.idle_recheck);
      if (debloater_) debloater_->idle_end(now_us());
    }
  }
}

bool stream_task::outputs_take_a_batch_now() {
  for (auto& gate : gates_)
    if (!gate.can_broadcast_now()) return false;
  return true;
}

bool stream_task::run_barrier_on_caller() {
  // A keyed state this large is no quick copy: its task thread takes the snapshot.
  constexpr std::size_t keyed_entries_max = 4096;
  std::unique_lock turn(turn_mutex_, std::try_to_lock);
  // Busy, or between its wait and its next look at its inputs (which the wake-up that
  // notify_barrier sends next makes it take): its thread handles the barrier.
  if (!turn.owns_lock() || !idle_ || caller_failure_ || should_stop()) return false;
  // Messages go first, in order, on the task thread; a large keyed state too.
  if (!mailbox_.empty() || (keyed_ && keyed_->synchronous_snapshot_entries() > keyed_entries_max))
    return false;
  // The barrier must go on at once, not into a backlog that only the task thread hands over.
  // The turn keeps every other sender off these channels until it is released.
  if (!outputs_take_a_batch_now()) return false;
  auto& h = *handler_;
  bool left = false;  // something only the task thread may handle waits on an input
  try {
    on_caller_ = true;
    const checkpoint_id snapshots_before = last_barrier_;  // moves when a barrier was forwarded
    // A pass over every input. One that ends an alignment (a snapshot, or an abort) unblocks
    // inputs already passed, which may hold records the task thread saw while they were
    // blocked and will not be told of again: another pass finds them.
    bool rescan = true;
    for (int pass = 0; rescan && !left && !caller_failure_; ++pass) {
      rescan = false;
      if (pass == 4) {
        left = true;  // still changing: the task thread goes on from here
        break;
      }
      for (std::size_t i = 0; i < cursors_.size() && !left && !caller_failure_; ++i) {
        if (std::visit([i](auto& x) { return x.has_ended(i) || x.is_blocked(i); }, h)) continue;
        input_cursor& cursor = cursors_[i];
        if (cursor.next < cursor.batch.size()) {
          left = true;  // a batch the task thread took and has not finished
          break;
        }
        while (!std::visit([i](auto& x) { return x.is_blocked(i); }, h)) {
          auto batch = inputs_[i]->try_take();
          if (!batch) break;
          const auto* b = batch->size() == 1 ? std::get_if<checkpoint_barrier>(&batch->front())
                                             : nullptr;
          // A barrier forwarded used each output's one batch of room seen above: a second
          // one (another checkpoint) might have to wait.
          if (b == nullptr || is_recovery_marker(*b) ||
              (last_barrier_ != snapshots_before && !outputs_take_a_batch_now())) {
            // Records or an end of input (or that second checkpoint): the task thread's, from
            // the cursor, in order.
            on_batch_taken(*batch);
            cursor.batch = std::move(*batch);
            cursor.next = 0;
            cursor.held_counted = false;
            left = true;
            break;
          }
          barriers_on_caller_.fetch_add(1, std::memory_order_relaxed);
          auto acted = take_barrier(i, *b);
          if (!acted) {
            caller_failure_ = acted.err();
            break;
          }
          if (*acted) rescan = true;
        }
      }
    }
    on_caller_ = false;
  } catch (const std::exception& e) {
    on_caller_ = false;
    caller_failure_ = error{failure_cause(e)};
  }
  // The task thread ends the task with a failure, submits what the writer had no room for,
  // and processes what was left.
  return !left && !caller_failure_ && deferred_writes_.empty();
}

result<bool> stream_task::process_input(std::size_t i) {
  auto& h = *handler_;
  const auto blocked = [&] { return std::visit([i](auto& x) { return x.is_blocked(i); }, h); };
  const auto ended = [&] { return std::visit([i](auto& x) { return x.has_ended(i); }, h); };
  if (ended()) return false;
  if (blocked()) {
    hold(i);
    return false;
  }
  if (held_by_recovery(i)) return false;
  input_cursor& cursor = cursors_[i];
  if (cursor.next == cursor.batch.size()) {
    auto batch = inputs_[i]->try_take();
    if (!batch) {
      if (auto why = inputs_[i]->broken()) return error{*why};
      return false;
    }
    on_batch_taken(*batch);
    cursor.batch = std::move(*batch);
    cursor.next = 0;
    cursor.held_counted = false;
  }
  while (cursor.next < cursor.batch.size()) {
    // An output that took no more: the rest waits until it took its backlog.
    if (outputs_backlogged()) break;
    // A barrier that overtakes records is taken between records, not after a whole batch of
    // a slow operator (unaligned checkpoints; a few relaxed loads every 16 records).
    if (config_.unaligned_checkpoints && (cursor.next & 15) == 15 && priority_barrier_waiting())
      break;
    stream_element& e = cursor.batch[cursor.next++];
    if (auto* r = std::get_if<record>(&e)) {
      records_in_.store(records_in_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
      if (auto* aligner = std::get_if<barrier_aligner>(&h)) {
        aligner->on_bytes_processed(approximate_bytes(*r));
        // Processed after an unaligned snapshot and before its barrier: in flight for it.
        if (recording_ && aligner->owes_barrier(i)) record_in_flight(i, *r);
      }
      std::visit([i](auto& x) { x.on_record_processed(i); }, h);
      if (valve_->any_idle())
        if (auto a = advance_event_time(valve_->on_record(i)); !a) return a.err();
      if (keyed_) keyed_->set_current_key(r->key);
      input_timestamp_ = r->timestamp;
      if (auto p = operator_->process(*r, *output_); !p) return p.err();
      if (should_stop()) return true;
      continue;
    }
    if (auto* b = std::get_if<checkpoint_barrier>(&e)) {
      if (is_recovery_marker(*b)) {
        on_recovery_marker(i);
        if (held_by_recovery(i)) break;
        continue;
      }
      if (auto acted = take_barrier(i, *b); !acted) return acted.err();
      if (blocked()) break;  // the rest of the batch waits until alignment ends
      continue;
    }
    if (const auto* w = std::get_if<watermark>(&e)) {
      if (auto a = advance_event_time(valve_->on_watermark(i, *w)); !a) return a.err();
      if (should_stop()) return true;
      continue;
    }
    assert(std::holds_alternative<end_of_input>(e));
    on_recovery_marker(i);
    // An ended input is at the end of time: the last one's end fires every event-time timer.
    if (auto a = advance_event_time(valve_->on_end(i)); !a) return a.err();
    auto actions = std::visit([&](auto& x) { return x.on_end_of_input(i, now_us()); }, h);
    if (auto r = perform(actions); !r) return r.err();
    cursor.batch.clear();
    cursor.next = 0;
    break;
  }
  if (cursor.next == cursor.batch.size()) {
    cursor.batch.clear();
    cursor.next = 0;
  }
  if (blocked()) hold(i);
  return true;
}

result<void> stream_task::advance_event_time(const std::optional<watermark>& w) {
  if (!w) return success();
  // What a timer emits is at the timer's time unless it says otherwise (the operator sets it).
  input_timestamp_ = no_timestamp;
  return operator_->process_watermark(*w, *output_);
}

result<void> stream_task::run_processing_time() {
  const auto due = operator_->next_processing_time();
  if (!due) return success();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  if (now < *due) return success();
  input_timestamp_ = no_timestamp;
  return operator_->on_processing_time(now, *output_);
}

std::optional<std::chrono::steady_clock::time_point> stream_task::processing_time_deadline()
    const {
  if (!operator_) return std::nullopt;
  const auto due = operator_->next_processing_time();
  if (!due) return std::nullopt;
  const auto now_sys = std::chrono::system_clock::now();
  const auto wait =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(*due)) - now_sys;
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::max(wait, std::chrono::system_clock::duration::zero()));
}

result<bool> stream_task::take_barrier(std::size_t i, checkpoint_barrier barrier) {
  hop_trace::record("t.barrier", config_.vertex.id);
  auto actions =
      std::visit([&](auto& x) { return x.on_barrier(i, barrier, now_us()); }, *handler_);
  if (auto r = perform(actions); !r) return r.err();
  return !actions.empty();
}

void stream_task::hold(std::size_t i) {
  auto* aligner = std::get_if<barrier_aligner>(&*handler_);
  if (aligner == nullptr) return;
  input_cursor& cursor = cursors_[i];
  if (cursor.next == cursor.batch.size()) {
    // Take the next batch of a blocked input without processing it, only to count what alignment
    // holds back: the cursor holds one batch whether or not its input is blocked, so this
    // buffers nothing more than reading the input would.
    auto batch = inputs_[i]->try_take();
    if (!batch) return;
    on_batch_taken(*batch);
    cursor.batch = std::move(*batch);
    cursor.next = 0;
    cursor.held_counted = false;
  }
  if (cursor.held_counted) return;
  cursor.held_counted = true;
  std::uint64_t held = 0;
  for (std::size_t k = cursor.next;
       k < cursor.batch.size() && std::holds_alternative<record>(cursor.batch[k]); ++k)
    ++held;
  aligner->on_records_held(held);
}

result<void> stream_task::finish_inputs(std::unique_lock<std::mutex>& turn) {
  if (auto r = operator_->end_input(*output_); !r) return r;
  if (!flush_outputs()) return success();
  for (auto& gate : gates_)
    if (!gate.broadcast(end_of_input{})) return success();
  drain_before_end(turn);
  return success();
}

result<void> stream_task::process_mailbox() {
  for (auto& message : mailbox_.take_all()) {
    result<void> r = std::visit(
        overloaded{
            [&](const trigger_message& m) -> result<void> { return handle_trigger(m); },
            [&](const complete_message& m) -> result<void> {
              if (keyed_) keyed_->notify_checkpoint_complete(m.id);
              if (completion_listener_ != nullptr)
                if (auto r = completion_listener_->notify_checkpoint_complete(m.id); !r) return r;
              record_notified(m.id);
              return success();
            },
            [&](const abort_message& m) -> result<void> {
              if (handler_) std::visit([&](auto& h) { h.on_checkpoint_aborted(m.id); }, *handler_);
              drop_in_flight(m.id);
              return operator_->notify_checkpoint_aborted(m.id);
            },
            [&](const finish_message&) -> result<void> {
              finish_requested_ = true;
              return success();
            },
        },
        message);
    if (!r) return r;
    if (should_stop()) return success();
  }
  return success();
}

result<void> stream_task::handle_trigger(const trigger_message& m) {
  hop_trace::record("t.trigger", m.id);
  if (!source_) {
    spdlog::warn("task {}: trigger for checkpoint {} at a task that is no source",
                 describe(config_.attempt, config_.vertex), m.id);
    return success();
  }
  // Stale or duplicated (a delayed trigger overtaken by a newer one): the newer barrier
  // already covers everything.
  if (m.id <= last_barrier_) return success();
  return perform({trigger_snapshot{checkpoint_barrier{m.id, m.timestamp_us, m.options}, 0, 0}});
}

result<void> stream_task::perform(const barrier_actions& actions) {
  for (const auto& action : actions) {
    if (const auto* t = std::get_if<trigger_snapshot>(&action)) {
      if (auto r = take_snapshot(*t); !r) return r;
    } else if (const auto* c = std::get_if<channel_state_complete>(&action)) {
      on_channel_state_complete(c->id);
    } else {
      const auto& a = std::get<abort_snapshot>(action);
      drop_in_flight(a.id);
      decline(a.id, a.reason, a.message);
    }
  }
  return success();
}

void stream_task::decline(checkpoint_id id, checkpoint_failure_reason reason,
                          const std::string& message) {
  config_.responder->decline(checkpoint_decline{config_.job, config_.attempt, id, reason, message});
}

bool stream_task::outputs_backlogged() const {
  for (const auto& gate : gates_)
    if (gate.backlogged()) return true;
  return false;
}

bool stream_task::drain_outputs() {
  for (auto& gate : gates_)
    if (gate.backlogged() && !gate.drain()) {
      outputs_cancelled_ = true;
      return false;
    }
  return true;
}

bool stream_task::wait_for_room(std::unique_lock<std::mutex>& turn, std::uint64_t seen) {
  if (!outputs_backlogged()) return true;
  if (!drain_outputs()) return false;
  if (!outputs_backlogged()) return true;
  // The channels that found no room notify the wakeup when it comes; so do mail, input and a
  // cancel. Idle for the runners too: they find the outputs busy and leave it to this thread.
  wait_idle(turn, seen, std::chrono::steady_clock::now() + config_.idle_recheck);
  return false;
}

void stream_task::drain_before_end(std::unique_lock<std::mutex>& turn) {
  // The end of input must reach every consumer before the task ends.
  for (;;) {
    const std::uint64_t seen = wakeup_->generation();
    if (should_stop() || !drain_outputs()) return;
    // A barrier still in a backlog may go out as a priority one meanwhile.
    if (!check_unaligned_timeouts() || should_stop()) return;
    if (!outputs_backlogged()) return;
    wait_idle(turn, seen, std::chrono::steady_clock::now() + config_.idle_recheck);
  }
}

void stream_task::debloat() {
  if (!debloater_) return;
  const auto bound = debloater_->update(now_us());
  if (!bound) return;
  for (auto& in : config_.inputs) in->announce_in_flight_bytes(*bound);
  in_flight_bound_.store(*bound, std::memory_order_relaxed);
}

std::uint64_t stream_task::buffered_input_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& in : config_.inputs) bytes += in->buffered_record_bytes();
  return bytes;
}

bool stream_task::flush_outputs() {
  for (auto& gate : gates_)
    if (!gate.flush()) {
      outputs_cancelled_ = true;
      return false;
    }
  return true;
}

void stream_task::wait_idle(std::unique_lock<std::mutex>& turn, std::uint64_t seen,
                            std::chrono::steady_clock::time_point deadline) {
  assert(turn.owns_lock());
  // An aligned timeout due earlier wakes the task for it.
  if (auto due = next_unaligned_deadline_us())
    deadline = std::min(deadline, std::chrono::steady_clock::time_point(
                                      std::chrono::duration_cast<
                                          std::chrono::steady_clock::duration>(
                                          std::chrono::microseconds(*due))));
  // So is the operator's next processing-time work (a timer, a periodic watermark).
  if (auto due = processing_time_deadline()) deadline = std::min(deadline, *due);
  idle_ = true;
  turn.unlock();
  wait_for_work(seen, deadline);
  turn.lock();
  idle_ = false;
}

void stream_task::wait_for_work(std::uint64_t seen,
                                std::chrono::steady_clock::time_point deadline) {
  if (should_stop()) return;
  wakeup_->wait(seen, deadline);
}

}  // namespace snapflow
