#include "engine/jobmaster/dispatcher.hpp"

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/jobmaster/state_assignment.hpp"
#include "engine/paths/job_paths.hpp"
#include "graph/job_graph_codec.hpp"

namespace snapflow {

namespace {
constexpr std::uint64_t max_job_file_bytes = 64ull << 20;
}

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
                        submit_callback done) {
  if (graph.id.empty()) graph.id = generate_job_id();
  if (jobs_.contains(graph.id) || submitting_.contains(graph.id)) {
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
  // From here the answer comes from the I/O executor's work: the id stays reserved until then.
  submitting_.insert(graph.id);
  done = [self = shared_from_this(), id = graph.id, done = std::move(done)](
             result<job_id> r, submit_failure why) {
    self->submitting_.erase(id);
    done(std::move(r), why);
  };
  auto self = shared_from_this();
  asio::post(options_.io_executor, [self, graph = std::move(graph), savepoint,
                                    done = std::move(done)]() mutable {
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
    }
    auto written = checkpoint_storage::write_file_durably(self->job_folder(graph.id) / "job",
                                                          encode_job_graph(graph));
    if (!written)
      return refuse(submit_failure::storage, "cannot persist job: " + written.err().message);
    auto state = job_master::load_durable_state(self->options_.state_dir, graph, restore);
    if (!state)
      return refuse(submit_failure::storage,
                    "cannot open the job's checkpoint state: " + state.err().message);
    asio::post(self->executor_, [self, graph = std::move(graph), restore = std::move(restore),
                                 state = std::move(*state), done = std::move(done)]() mutable {
      const job_id id = graph.id;
      auto started = self->start_job(std::move(graph), std::move(restore), std::move(state));
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

result<std::shared_ptr<job_master>> dispatcher::start_job(
    job_graph graph, std::optional<completed_checkpoint> restore,
    std::optional<job_master::durable_state> state) {
  auto gateway = options_.checkpoint_gateway_for ? options_.checkpoint_gateway_for(graph.id)
                                                 : checkpoint_gateway_;
  job_master::options o{options_.state_dir, options_.io_executor, options_.restart};
  o.restore_from = std::move(restore);
  o.slot_wait_timeout = options_.slot_wait_timeout;
  auto created = job_master::create(executor_, std::move(graph), workers_, deployer_,
                                    gateway, std::move(o), std::move(state));
  if (!created) return created.err();
  std::shared_ptr<job_master> master = *created;
  const job_id id = master->id();
  std::weak_ptr<dispatcher> weak = weak_from_this();
  master->graph().add_job_status_listener([weak, id](job_status, job_status to, std::int64_t) {
    if (!is_globally_terminal(to)) return;
    if (auto self = weak.lock()) self->persist_terminal(id, to);
  });
  jobs_[id] = master;
  spdlog::info("job {} ('{}') submitted: {} subtasks", id, master->graph().job().name,
               master->graph().num_subtasks());
  // The setting is kept (it travels with the job and shows in REST), but the runtime has no
  // unaligned mode yet: say so instead of letting the user believe barriers overtake data.
  if (const auto& c = master->graph().job().checkpointing; c && c->config.unaligned)
    spdlog::warn("job {}: unaligned checkpoints are not implemented yet; this job takes aligned "
                 "exactly-once checkpoints",
                 id);
  master->start();
  return master;
}

void dispatcher::persist_terminal(const job_id& id, job_status status) {
  asio::post(options_.io_executor, [path = job_folder(id) / "terminal", status] {
    if (auto r = checkpoint_storage::write_file_durably(path, to_string(status)); !r)
      spdlog::error("cannot record the end of a job in {}: {}", path.string(), r.err().message);
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
    if (std::filesystem::exists(folder / "terminal", ec)) continue;
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
    auto started = start_job(std::move(*graph), std::nullopt);
    if (!started) {
      spdlog::error("cannot resume job {}: {}", id, started.err().message);
      continue;
    }
    spdlog::info("resumed job {} from the state folder", id);
    resumed.push_back(id);
  }
  return resumed;
}

job_master* dispatcher::find(const job_id& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::optional<job_summary> dispatcher::summary(const job_id& id) const {
  job_master* m = find(id);
  if (m == nullptr) return std::nullopt;
  job_summary s;
  s.id = id;
  s.name = m->graph().job().name;
  s.status = m->status();
  s.restarts = m->restarts();
  s.subtasks = m->graph().num_subtasks();
  s.waiting_for_slots = m->waiting_for_slots();
  s.failure_cause = m->failure_cause().value_or("");
  return s;
}

std::vector<job_summary> dispatcher::list() const {
  std::vector<job_summary> out;
  for (const auto& [id, _] : jobs_) out.push_back(*summary(id));
  return out;
}

result<void> dispatcher::cancel(const job_id& id) {
  job_master* m = find(id);
  if (m == nullptr) return error{"no job " + id};
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
