#include "engine/jobmaster/dispatcher.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <mutex>

#include <unistd.h>

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/snapshot_adoption.hpp"
#include "engine/jobmaster/state_assignment.hpp"
#include "engine/paths/confined_folder.hpp"
#include "engine/paths/job_paths.hpp"
#include "graph/job_graph_codec.hpp"

namespace snapflow {

namespace {
constexpr std::uint64_t max_job_file_bytes = 64ull << 20;
// `progress` and `terminal` are a few lines; anything longer is not ours.
constexpr std::uint64_t max_small_file_bytes = 64 * 1024;

std::string encode_progress(const job_summary& s) {
  std::string out = "start-time-ms=" + std::to_string(s.start_time_ms) + "\n" +
                    "restarts=" + std::to_string(s.restarts) + "\n";
  if (s.end_time_ms > 0) out += "end-time-ms=" + std::to_string(s.end_time_ms) + "\n";
  return out;
}

// Reads what it recognises; unknown keys and malformed lines are ignored (a hand-edited or
// damaged file costs the numbers, never the job).
void decode_progress(std::string_view text, job_summary& s) {
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < 0) continue;
    if (key == "start-time-ms")
      s.start_time_ms = n;
    else if (key == "end-time-ms")
      s.end_time_ms = n;
    else if (key == "restarts" && n <= std::numeric_limits<std::int32_t>::max())
      s.restarts = static_cast<std::int32_t>(n);
  }
}

void read_progress(const std::filesystem::path& folder, job_summary& s) {
  std::error_code ec;
  if (!std::filesystem::exists(folder / "progress", ec)) return;
  auto text = checkpoint_storage::read_file(folder / "progress", max_small_file_bytes);
  if (!text) {
    spdlog::warn("job folder {}: {}", folder.string(), text.err().message);
    return;
  }
  decode_progress(*text, s);
}
}  // namespace

dispatcher::dispatcher(asio::any_io_executor executor, std::shared_ptr<worker_registry> workers,
                       std::shared_ptr<task_deployment_gateway> deployer,
                       std::shared_ptr<checkpoint_task_gateway> checkpoint_gateway, options opts)
    : executor_(std::move(executor)),
      workers_(std::move(workers)),
      deployer_(std::move(deployer)),
      checkpoint_gateway_(std::move(checkpoint_gateway)),
      options_(std::move(opts)) {}

std::filesystem::path dispatcher::job_folder(const job_id& id) const {
  return options_.state_dir / "jobs" / id;
}

void dispatcher::submit(job_graph graph, std::optional<std::filesystem::path> savepoint,
                        submit_callback done, recovery_claim_mode claim) {
  if (graph.id.empty()) graph.id = generate_job_id();
  if (jobs_.contains(graph.id) || ended_.contains(graph.id) || submitting_.contains(graph.id)) {
    done(error{"a job with id " + graph.id + " exists already"}, submit_failure::conflict);
    return;
  }
  if (auto invalid = validate(graph, operator_registry::builtin())) {
    done(error{"invalid job '" + graph.name + "': " + *invalid}, submit_failure::refused);
    return;
  }
  if (auto refused = path_refusal(graph)) {
    done(error{"job '" + graph.name + "' names a path it may not use: " + *refused},
         submit_failure::refused);
    return;
  }
  if (claim == recovery_claim_mode::claim) {
    if (!savepoint) {
      done(error{"claim mode CLAIM needs a snapshot to restore from"}, submit_failure::refused);
      return;
    }
    if (!graph.checkpointing) {
      done(error{"job '" + graph.name + "' cannot claim " + savepoint->string() +
                 ": it takes no checkpoints, and a claimed snapshot becomes its checkpoint "
                 "(submit it with claim mode NO_CLAIM)"},
           submit_failure::refused);
      return;
    }
    if (auto why = claim_refusal(*savepoint, graph.id)) {
      done(error{"cannot claim " + savepoint->string() + ": " + *why}, submit_failure::refused);
      return;
    }
  }
  // From here the answer comes from the I/O executor's work: the id stays reserved until then.
  submitting_.insert(graph.id);
  done = [self = shared_from_this(), id = graph.id, done = std::move(done)](
             result<job_id> r, submit_failure why) {
    self->submitting_.erase(id);
    done(std::move(r), why);
  };
  auto self = shared_from_this();
  const std::int64_t start_time_ms = coordinator_clock::now_us() / 1000;
  asio::post(options_.io_executor, [self, graph = std::move(graph), savepoint, start_time_ms,
                                    claim, done = std::move(done)]() mutable {
    // Everything that touches disk happens here, on the I/O executor: the coordinator thread
    // only gets the prepared state.
    const auto refuse = [&](submit_failure why, std::string message) {
      asio::post(self->executor_, [done, why, message = std::move(message)] {
        done(error{message}, why);
      });
    };
    std::optional<completed_checkpoint> restore;
    if (savepoint) {
      auto read = checkpoint_storage::read_metadata(*savepoint);
      if (!read)
        return refuse(submit_failure::refused, "cannot restore from savepoint " +
                                                   savepoint->string() + ": " + read.err().message);
      if (auto mismatch = max_parallelism_mismatch(graph, *read))
        return refuse(submit_failure::refused,
                      "cannot restore from savepoint " + savepoint->string() + ": " + *mismatch);
      restore = std::move(*read);
      if (claim == recovery_claim_mode::claim) {
        // Adopted before the job is persisted: a crash before the job exists leaves the
        // snapshot where it was (and a copy nobody uses); after, the job resumes from its copy.
        auto adopted = snapshot_adoption::adopt(*savepoint, self->options_.state_dir / graph.id,
                                                graph.id);
        if (!adopted)
          return refuse(submit_failure::refused,
                        "cannot claim " + savepoint->string() + ": " + adopted.err().message);
        restore = std::move(*adopted);
      }
    }
    // A CLAIM refused before the job is persisted leaves the snapshot where it was: the copy
    // goes. Once the job file is written, a restarted coordinator resumes the job from it.
    const auto refuse_after_adoption = [&](submit_failure why, std::string message) {
      if (claim == recovery_claim_mode::claim && restore)
        (void)checkpoint_storage::discard_location(restore->location);
      refuse(why, std::move(message));
    };
    // Where the job comes from is durable before the job is: a resumed job knows it.
    job_master::restore_origin origin;
    if (savepoint) {
      origin.path = savepoint->string();
      origin.mode = claim;
      if (auto recorded = persist_restore_origin(self->job_folder(graph.id), origin); !recorded)
        return refuse_after_adoption(submit_failure::storage,
                                     "cannot persist job: " + recorded.err().message);
    }
    auto written = checkpoint_storage::write_file_durably(self->job_folder(graph.id) / "job",
                                                          encode_job_graph(graph));
    if (!written)
      return refuse_after_adoption(submit_failure::storage,
                                   "cannot persist job: " + written.err().message);
    job_summary progress;
    progress.start_time_ms = start_time_ms;
    written = checkpoint_storage::write_file_durably(self->job_folder(graph.id) / "progress",
                                                     encode_progress(progress));
    if (!written)
      return refuse(submit_failure::storage, "cannot persist job: " + written.err().message);
    // The job owns its copy now: the snapshot's old place goes.
    if (savepoint && claim == recovery_claim_mode::claim)
      self->release_claimed(*savepoint, graph.id);
    auto state = job_master::load_durable_state(self->options_.state_dir, graph, restore);
    if (!state)
      return refuse(submit_failure::storage,
                    "cannot open the job's checkpoint state: " + state.err().message);
    asio::post(self->executor_, [self, graph = std::move(graph), restore = std::move(restore),
                                 state = std::move(*state), start_time_ms,
                                 origin = std::move(origin),
                                 done = std::move(done)]() mutable {
      const job_id id = graph.id;
      auto started = self->start_job(std::move(graph), std::move(restore), std::move(state),
                                     start_time_ms, 0, std::move(origin));
      if (!started) {
        done(started.err(), submit_failure::refused);
        return;
      }
      done(id, submit_failure::none);
    });
  });
}

std::optional<std::string> dispatcher::path_refusal(const job_graph& graph) const {
  for (const auto& [id, worker] : workers_->workers()) {
    if (worker.data_roots.empty()) continue;
    const std::vector<confined_folder> roots = make_data_roots(worker.data_roots);
    for (job_vertex vertex : graph.vertices)  // a copy: checked, not rewritten
      if (auto why = confine_vertex_paths(vertex, operator_registry::builtin(), roots, false))
        return *why + " (worker '" + id + "')";
  }
  return std::nullopt;
}

std::optional<std::string> dispatcher::claim_refusal(const std::filesystem::path& source,
                                                     const job_id& new_job) const {
  // Where the names really lead: a symlink in the state folder must not hide a live job's
  // folder behind another name.
  std::error_code ec;
  const confined_folder state_dir(std::filesystem::weakly_canonical(options_.state_dir, ec));
  if (ec) return "cannot resolve the state folder: " + ec.message();
  const std::filesystem::path absolute = std::filesystem::weakly_canonical(source, ec);
  if (ec) return "cannot resolve it: " + ec.message();
  if (!state_dir.lexically_contains(absolute)) return std::nullopt;
  const std::filesystem::path inside = absolute.lexically_relative(state_dir.root());
  if (inside.empty() || inside == ".") return "it is the state folder itself";
  const std::string owner = inside.begin()->string();
  if (owner == "jobs") return "it lies among the coordinator's job records";
  if (owner == new_job) return "it lies in the new job's own folder";
  if (submitting_.contains(owner))
    return "it belongs to job " + owner + ", which is being submitted";
  if (job_master* m = find(owner); m != nullptr && !is_globally_terminal(m->status()))
    return "it is a checkpoint of job " + owner + ", which is still " +
           std::string(to_string(m->status())) +
           " and owns it (claim a retained checkpoint once its job has ended, or a savepoint)";
  return std::nullopt;
}

void dispatcher::release_claimed(const std::filesystem::path& source, const job_id& job) {
  if (auto released = snapshot_adoption::release_source(source); !released) {
    spdlog::warn("job {}: claimed {}, but cannot remove it from its old place: {}", job,
                 source.string(), released.err().message);
    return;
  }
  spdlog::info("job {}: claimed {}: the job owns it now, and it was removed from its old place",
               job, source.string());
  // Another job's retained checkpoint: that job's shared files only it used go too (the new
  // job holds its own links to them).
  const confined_folder state_dir(options_.state_dir);
  const std::filesystem::path absolute = confined_folder(source).root();
  if (!state_dir.lexically_contains(absolute) ||
      absolute.parent_path().parent_path() != state_dir.root() ||
      !checkpoint_storage::checkpoint_folder_id(absolute.filename().string()))
    return;
  sweep_ended(absolute.parent_path().filename().string());
}

result<void> dispatcher::persist_restore_origin(const std::filesystem::path& folder,
                                                const job_master::restore_origin& origin) {
  if (origin.path.find('\n') != std::string::npos)
    return error{"the snapshot's path holds a line break"};
  return checkpoint_storage::write_file_durably(
      folder / "restore",
      "claim-mode=" + std::string(to_string(origin.mode)) + "\npath=" + origin.path + "\n");
}

std::optional<completed_checkpoint> dispatcher::read_restore_origin(
    const std::filesystem::path& folder, job_master::restore_origin& origin) {
  std::error_code ec;
  if (!std::filesystem::exists(folder / "restore", ec)) return std::nullopt;
  auto text = checkpoint_storage::read_file(folder / "restore", max_small_file_bytes);
  if (!text) {
    origin.unreadable = text.err().message;
    return std::nullopt;
  }
  std::string_view rest(*text);
  while (!rest.empty()) {
    const std::size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (line.starts_with("path="))
      origin.path = std::string(line.substr(5));
    else if (line.starts_with("claim-mode="))
      origin.mode = parse_recovery_claim_mode(line.substr(11)).value_or(origin.mode);
  }
  // A claimed snapshot is one of the job's own checkpoints now: recovery finds it there.
  if (origin.mode == recovery_claim_mode::claim || origin.path.empty()) return std::nullopt;
  auto read = checkpoint_storage::read_metadata(origin.path);
  if (!read) {
    origin.unreadable = read.err().message;
    return std::nullopt;
  }
  return std::move(*read);
}

result<std::shared_ptr<job_master>> dispatcher::start_job(
    job_graph graph, std::optional<completed_checkpoint> restore,
    std::optional<job_master::durable_state> state, std::int64_t start_time_ms,
    std::int32_t restarts, job_master::restore_origin origin) {
  auto gateway = options_.checkpoint_gateway_for ? options_.checkpoint_gateway_for(graph.id)
                                                 : checkpoint_gateway_;
  job_master::options o{options_.state_dir, options_.io_executor, options_.restart};
  o.restore_from = std::move(restore);
  o.slot_wait_timeout = options_.slot_wait_timeout;
  o.start_time_ms = start_time_ms;
  o.restarts = restarts;
  o.origin = std::move(origin);
  auto created = job_master::create(executor_, std::move(graph), workers_, deployer_,
                                    gateway, std::move(o), std::move(state));
  if (!created) return created.err();
  std::shared_ptr<job_master> master = *created;
  const job_id id = master->id();
  std::weak_ptr<dispatcher> weak = weak_from_this();
  master->graph().add_job_status_listener([weak, id](job_status, job_status to, std::int64_t) {
    if (!is_globally_terminal(to)) return;
    auto self = weak.lock();
    if (!self) return;
    auto s = self->summary(id);
    if (!s) return;
    s->status = to;
    if (s->end_time_ms == 0) s->end_time_ms = coordinator_clock::now_us() / 1000;
    self->persist_progress(id, *s);
    self->persist_terminal(id, to, s->failure_cause);
  });
  master->set_cause_listener([weak, id] {
    auto self = weak.lock();
    if (!self) return;
    if (auto s = self->summary(id); s && is_globally_terminal(s->status))
      self->persist_terminal(id, s->status, s->failure_cause);
  });
  master->set_restart_listener([weak, id](std::int32_t) {
    auto self = weak.lock();
    if (!self) return;
    if (auto s = self->summary(id)) self->persist_progress(id, *s);
  });
  jobs_[id] = master;
  if (const auto& from = master->origin(); !from.path.empty())
    spdlog::info("job {} ('{}') submitted: {} subtasks, restoring from {} (claim mode {})", id,
                 master->graph().job().name, master->graph().num_subtasks(), from.path,
                 to_string(from.mode));
  else
    spdlog::info("job {} ('{}') submitted: {} subtasks", id, master->graph().job().name,
                 master->graph().num_subtasks());
  master->start();
  return master;
}

void dispatcher::persist_terminal(const job_id& id, job_status status, std::string cause) {
  std::string text(to_string(status));
  if (!cause.empty()) text += "\n" + cause;
  write_in_order(job_folder(id) / "terminal", std::move(text), "the end of a job");
}

void dispatcher::persist_progress(const job_id& id, const job_summary& s) {
  write_in_order(job_folder(id) / "progress", encode_progress(s), "the job's progress");
}

void dispatcher::write_in_order(std::filesystem::path path, std::string text, std::string what) {
  const std::uint64_t sequence = ++ordered_writes_->next;
  asio::post(options_.io_executor, [writes = ordered_writes_, sequence, path = std::move(path),
                                    text = std::move(text), what = std::move(what)] {
    std::lock_guard lock(writes->mutex);
    std::uint64_t& last = writes->written[path];
    if (sequence < last) return;
    last = sequence;
    if (auto r = checkpoint_storage::write_file_durably(path, text); !r)
      spdlog::error("cannot record {} in {}: {}", what, path.string(), r.err().message);
  });
}

std::vector<job_id> dispatcher::recover() {
  std::vector<job_id> resumed;
  const auto jobs_dir = options_.state_dir / "jobs";
  std::error_code ec;
  if (!std::filesystem::is_directory(jobs_dir, ec)) return resumed;
  std::vector<std::filesystem::path> folders;
  for (const auto& entry : std::filesystem::directory_iterator(jobs_dir, ec))
    if (entry.is_directory()) folders.push_back(entry.path());
  std::sort(folders.begin(), folders.end());
  for (const auto& folder : folders) {
    if (std::filesystem::exists(folder / "terminal", ec)) {
      load_ended(folder);
      continue;
    }
    auto bytes = checkpoint_storage::read_file(folder / "job", max_job_file_bytes);
    if (!bytes) {
      spdlog::warn("skipping job folder {}: {}", folder.string(), bytes.err().message);
      continue;
    }
    auto graph = decode_job_graph(*bytes);
    if (!graph) {
      spdlog::warn("skipping job folder {}: {}", folder.string(), graph.err().message);
      continue;
    }
    const job_id id = graph->id;
    if (jobs_.contains(id)) continue;
    // The resumed job keeps when it was submitted and how often it restarted.
    job_summary progress;
    read_progress(folder, progress);
    // A NO_CLAIM job resumed before its first checkpoint restores from its snapshot again.
    job_master::restore_origin origin;
    auto restore = read_restore_origin(folder, origin);
    auto started = start_job(std::move(*graph), std::move(restore), std::nullopt,
                             progress.start_time_ms, progress.restarts, std::move(origin));
    if (!started) {
      spdlog::error("cannot resume job {}: {}", id, started.err().message);
      continue;
    }
    spdlog::info("resumed job {} from the state folder", id);
    resumed.push_back(id);
  }
  return resumed;
}

void dispatcher::load_ended(const std::filesystem::path& folder) {
  job_summary s;
  s.id = folder.filename().string();
  auto terminal = checkpoint_storage::read_file(folder / "terminal", max_small_file_bytes);
  if (!terminal) {
    spdlog::warn("skipping job folder {}: {}", folder.string(), terminal.err().message);
    return;
  }
  const std::string_view text(*terminal);
  const std::size_t eol = text.find('\n');
  const auto status = parse_job_status(text.substr(0, eol));
  if (!status || !is_globally_terminal(*status)) {
    spdlog::warn("skipping job folder {}: its terminal file names no final status",
                 folder.string());
    return;
  }
  s.status = *status;
  if (eol != std::string_view::npos) s.failure_cause = std::string(text.substr(eol + 1));
  // The name from the job graph; an unreadable one costs the name only.
  if (auto bytes = checkpoint_storage::read_file(folder / "job", max_job_file_bytes); bytes) {
    if (auto graph = decode_job_graph(*bytes); graph) {
      s.name = graph->name;
      if (!graph->id.empty()) s.id = graph->id;
    }
  }
  read_progress(folder, s);
  if (jobs_.contains(s.id)) return;
  sweep_ended(s.id);
  ended_[s.id] = std::move(s);
}

void dispatcher::sweep_ended(const job_id& id) {
  // What a crash between the job's end and its coordinator's cleanup left: the metadata log
  // (sealed now: the kept checkpoints' files synced, then the log removed) and the folders of
  // checkpoints that never completed. What the job retained stays.
  const auto job_dir = options_.state_dir / id;
  std::error_code ec;
  if (id.empty() || !std::filesystem::is_directory(job_dir, ec)) return;
  checkpoint_storage storage(job_dir);
  auto recovered = storage.recover();
  for (const auto& folder : recovered.incomplete_folders) {
    if (auto removed = checkpoint_storage::discard_location(folder); removed)
      spdlog::info("job {}: removed {}, a checkpoint that never completed", id, folder.string());
    else
      spdlog::warn("job {}: {}", id, removed.err().message);
  }
  for (const auto& folder : recovered.empty_folders) (void)::rmdir(folder.c_str());
  const auto shared =
      checkpoint_storage::remove_unreferenced_shared_files(job_dir, recovered.checkpoints);
  for (const auto& file : shared.removed)
    spdlog::info("job {}: removed {}, a shared state file no checkpoint uses", id, file.string());
  for (const auto& failure : shared.failures) spdlog::warn("job {}: {}", id, failure);
  bool logged = false;
  for (const auto& entry : std::filesystem::directory_iterator(job_dir, ec))
    logged |= metadata_log::segment_number(entry.path().filename().string()).has_value();
  if (!logged) return;
  std::vector<std::filesystem::path> kept;
  for (const auto& c : recovered.checkpoints) kept.emplace_back(c.location);
  if (auto sealed = storage.seal(kept); !sealed)
    spdlog::warn("job {}: keeping the checkpoint metadata log: {}", id, sealed.err().message);
}

job_master* dispatcher::find(const job_id& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::optional<job_summary> dispatcher::summary(const job_id& id) const {
  job_master* m = find(id);
  if (m == nullptr) {
    if (auto it = ended_.find(id); it != ended_.end()) return it->second;
    return std::nullopt;
  }
  job_summary s;
  s.id = id;
  s.name = m->graph().job().name;
  s.status = m->status();
  s.restarts = m->restarts();
  s.start_time_ms = m->start_time_ms();
  s.end_time_ms = m->end_time_ms();
  s.subtasks = m->graph().num_subtasks();
  s.waiting_for_slots = m->waiting_for_slots();
  s.waiting_reason = m->waiting_reason();
  s.failure_cause = m->failure_cause().value_or("");
  return s;
}

std::vector<job_summary> dispatcher::list() const {
  std::vector<job_summary> out;
  for (const auto& [id, _] : jobs_) out.push_back(*summary(id));
  for (const auto& [id, s] : ended_)
    if (!jobs_.contains(id)) out.push_back(s);
  std::sort(out.begin(), out.end(),
            [](const job_summary& a, const job_summary& b) { return a.id < b.id; });
  return out;
}

result<void> dispatcher::cancel(const job_id& id) {
  job_master* m = find(id);
  if (m == nullptr) {
    if (auto it = ended_.find(id); it != ended_.end())
      return error{"job " + id + " has already ended (" +
                   std::string(to_string(it->second.status)) + ")"};
    return error{"no job " + id};
  }
  if (is_globally_terminal(m->status()))
    return error{"job " + id + " has already ended (" + std::string(to_string(m->status())) + ")"};
  m->cancel();
  return success();
}

void dispatcher::on_worker_registered(const worker_id& worker, bool replaced) {
  if (replaced)
    for (auto& [_, m] : jobs_) m->on_worker_lost(worker);
  for (auto& [_, m] : jobs_) m->on_slots_available();
}

void dispatcher::on_worker_lost(const worker_id& worker) {
  for (auto& [_, m] : jobs_) m->on_worker_lost(worker);
  for (auto& [_, m] : jobs_) m->on_slots_available();
}

void dispatcher::on_task_state(const job_id& job, const execution_attempt_id& attempt,
                               execution_state state, const std::string& message) {
  job_master* m = find(job);
  if (m == nullptr) return;
  m->on_task_state(attempt, state, message);
  if (is_globally_terminal(m->status()))
    for (auto& [_, other] : jobs_) other->on_slots_available();
}

void dispatcher::on_source_exhausted(const job_id& job, const execution_attempt_id& attempt,
                                     checkpoint_id last_barrier) {
  if (job_master* m = find(job)) m->on_source_exhausted(attempt, last_barrier);
}

std::optional<worker_id> dispatcher::worker_of(const job_id& job,
                                               const execution_attempt_id& attempt) const {
  job_master* m = find(job);
  if (m == nullptr) return std::nullopt;
  return m->worker_of(attempt);
}

}  // namespace snapflow
