#include "transport/rest/coordinator_rest_api.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include "engine/clock.hpp"
#include "graph/job_file.hpp"
#include "transport/rest/prometheus_text.hpp"

namespace snapflow::rest {

using nlohmann::json;

rest_response json_response(int status, const json& body) {
  // Text from outside that is not UTF-8 (a name, a path) becomes U+FFFD instead of an
  // exception: an answer is always sent.
  return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      extra = 1;
      code = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2;
      code = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3;
      code = c & 0x07;
    } else {
      return false;  // a continuation byte first, an overlong lead (c0, c1), or past U+10FFFF
    }
    if (text.size() - i - 1 < extra) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    if ((extra == 2 && code < 0x800) || (extra == 3 && (code < 0x10000 || code > 0x10ffff)) ||
        (code >= 0xd800 && code <= 0xdfff))
      return false;
    i += extra + 1;
  }
  return true;
}

rest_response error_response(int status, const std::string& message) {
  return json_response(status, json{{"errors", json::array({message})}});
}

namespace {

std::int64_t ms(std::int64_t us) { return us / 1000; }

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string current;
  for (char c : path) {
    if (c == '/') {
      if (!current.empty()) parts.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) parts.push_back(std::move(current));
  return parts;
}

json summary_json(const stats_summary& s, double scale = 1.0) {
  return json{{"min", s.min * scale}, {"max", s.max * scale}, {"avg", s.avg * scale},
              {"p50", s.p50 * scale}, {"p90", s.p90 * scale}, {"p95", s.p95 * scale},
              {"p99", s.p99 * scale}, {"p999", s.p999 * scale}, {"count", s.count}};
}

std::string status_name(checkpoint_stats_status s) {
  switch (s) {
    case checkpoint_stats_status::in_progress:
      return "IN_PROGRESS";
    case checkpoint_stats_status::completed:
      return "COMPLETED";
    case checkpoint_stats_status::failed:
      return "FAILED";
  }
  return "UNKNOWN";
}

json checkpoint_json(const checkpoint_stats& c) {
  json j{{"id", c.id},
         {"status", status_name(c.status)},
         {"is_savepoint", c.kind == checkpoint_trigger_kind::savepoint},
         {"checkpoint_type", c.kind == checkpoint_trigger_kind::savepoint ? "SAVEPOINT"
                                                                         : "CHECKPOINT"},
         {"trigger_kind", std::string(to_string(c.kind))},
         {"trigger_timestamp", ms(c.trigger_timestamp_us)},
         {"latest_ack_timestamp", ms(c.latest_ack_timestamp_us)},
         {"state_size", c.state_size},
         {"checkpointed_size", c.checkpointed_size},
         {"end_to_end_duration", ms(c.end_to_end_duration_us)},
         {"end_to_end_duration_us", c.end_to_end_duration_us},
         {"alignment_buffered", 0},
         {"max_alignment_duration_us", c.max_alignment_duration_us},
         {"unaligned_checkpoint", c.unaligned},
         {"persisted_data", c.persisted_data_bytes},
         {"processed_data", c.processed_data_bytes},
         {"num_subtasks", c.num_subtasks},
         {"num_acknowledged_subtasks", c.num_acknowledged},
         {"num_notified_subtasks", c.num_notified},
         {"external_path", c.external_path}};
  if (c.end_timestamp_us) j["end_timestamp"] = ms(*c.end_timestamp_us);
  // Known only once every subtask's worker reported its notification (a heartbeat later).
  if (c.notified_duration_us) {
    j["notified_duration"] = ms(*c.notified_duration_us);
    j["notified_duration_us"] = *c.notified_duration_us;
  }
  if (c.failure_reason) {
    j["failure_timestamp"] = c.end_timestamp_us ? ms(*c.end_timestamp_us) : 0;
    j["failure_message"] = std::string(to_string(*c.failure_reason)) + ": " + c.failure_message;
  }
  return j;
}

std::string vertex_status(const execution_job_vertex& v) {
  bool all_running = true, any_failed = false, all_finished = true;
  for (const auto& s : v.subtasks()) {
    all_running &= s->state() == execution_state::running;
    all_finished &= s->state() == execution_state::finished;
    any_failed |= s->state() == execution_state::failed;
  }
  if (any_failed) return "FAILED";
  if (all_finished) return "FINISHED";
  if (all_running) return "RUNNING";
  return std::string(to_string(v.subtasks().front()->state()));
}

}  // namespace

coordinator_rest_api::coordinator_rest_api(std::shared_ptr<dispatcher> jobs,
                                           std::shared_ptr<const task_io_metrics> io)
    : jobs_(std::move(jobs)), io_(std::move(io)) {}

rest_response coordinator_rest_api::handle(const rest_request& r) {
  // Refused before anything echoes it back: a JSON answer must be UTF-8.
  if (!is_valid_utf8(r.path)) return error_response(400, "the request path is not valid UTF-8");
  const auto p = split_path(r.path);
  const bool get = r.method == "GET", post = r.method == "POST", patch = r.method == "PATCH";
  if (p.empty() || (p.size() == 1 && p[0] == "overview")) {
    if (get) return overview();
  } else if (p[0] == "metrics" && p.size() == 1) {
    if (get) return {200, "text/plain; version=0.0.4", metrics_text()};
  } else if (p[0] == "jobs") {
    if (p.size() == 1) {
      if (get) return jobs_list();
    } else if (p.size() == 2) {
      if (get) return job_details(p[1]);
      if (patch) {
        auto mode = r.query.find("mode");
        if (mode != r.query.end() && mode->second != "cancel")
          return error_response(400, "unknown mode '" + mode->second + "'; use mode=cancel");
        return cancel(p[1]);
      }
    } else if (p[2] == "checkpoints") {
      if (p.size() == 3) {
        if (get) return checkpoints(p[1]);
        if (post) return trigger(p[1], false, r.body);
      } else if (p.size() == 4 && p[3] == "config") {
        if (get) return checkpoint_config(p[1]);
        if (patch) return set_checkpoint_config(p[1], r.body);
      } else if (p.size() == 5 && p[3] == "details") {
        if (get) return checkpoint_details(p[1], p[4], r.query);
      } else if (p.size() == 4) {
        if (get) return operation_status(p[1], p[3]);
      }
    } else if (p[2] == "savepoints") {
      if (p.size() == 3 && post) return trigger(p[1], true, r.body);
      if (p.size() == 4 && get) return operation_status(p[1], p[3]);
    }
  }
  if (get || post || patch) return error_response(404, "no such resource: " + r.method + " " + r.path);
  return error_response(405, "method " + r.method + " is not allowed");
}

rest_response coordinator_rest_api::overview() const {
  std::map<std::string, int> by_status;
  for (const auto& j : jobs_->list()) ++by_status[std::string(to_string(j.status))];
  std::uint32_t slots = 0, free_slots = 0;
  for (const auto& [_, w] : jobs_->workers()->workers()) {
    slots += w.slots;
    free_slots += w.free_slots();
  }
  return json_response(
      200, json{{"taskmanagers", jobs_->workers()->workers().size()},
                {"slots-total", slots},
                {"slots-available", free_slots},
                {"jobs-running", by_status["RUNNING"]},
                {"jobs-finished", by_status["FINISHED"]},
                {"jobs-cancelled", by_status["CANCELED"]},
                {"jobs-failed", by_status["FAILED"]},
                {"frames-received", counters_.frames_received},
                {"bad-frames", counters_.bad_frames},
                {"refused-messages", counters_.refused_messages}});
}

rest_response coordinator_rest_api::jobs_list() const {
  json jobs = json::array();
  for (const auto& j : jobs_->list())
    jobs.push_back({{"id", j.id}, {"name", j.name}, {"status", std::string(to_string(j.status))}});
  return json_response(200, json{{"jobs", jobs}});
}

void coordinator_rest_api::serve(const rest_request& r, responder answer) {
  if (r.method == "POST" && split_path(r.path) == std::vector<std::string>{"jobs"})
    return submit(r, std::move(answer));
  answer(handle(r));
}

void coordinator_rest_api::submit(const rest_request& r, responder answer) {
  if (r.body.empty()) return answer(error_response(400, "the request body must be a TOML job file"));
  auto name = r.query.count("name") ? r.query.at("name") : std::string("job file");
  auto parsed = parse_job_file(r.body, name);
  if (!parsed) return answer(error_response(400, parsed.error().what()));
  if (auto confined = confine_savepoint_dir(parsed.value()); !confined)
    return answer(error_response(400, confined.err().message));
  // Flink's name and values, in any case; only with a snapshot to restore from.
  recovery_claim_mode claim = recovery_claim_mode::no_claim;
  const auto from = r.query.find("fromSavepoint");
  const bool restoring = from != r.query.end() && !from->second.empty();
  if (auto it = r.query.find("claimMode"); it != r.query.end()) {
    auto parsed_mode = parse_recovery_claim_mode(it->second);
    if (!parsed_mode || it->second.find('-') != std::string::npos)
      return answer(error_response(400, "claimMode '" + it->second +
                                            "' is not one of CLAIM, NO_CLAIM"));
    if (!restoring)
      return answer(error_response(400, "claimMode is only valid together with fromSavepoint"));
    claim = *parsed_mode;
  }
  std::optional<std::filesystem::path> savepoint;
  if (restoring) {
    auto source = restore_source(from->second, claim == recovery_claim_mode::claim);
    if (!source) return answer(error_response(400, source.err().message));
    savepoint = std::move(*source);
  }
  // The answer waits for the dispatcher: the job is persisted and started, or refused with
  // the reason (an unreadable savepoint, another max parallelism, a path outside the roots).
  jobs_->submit(std::move(parsed).value(), savepoint,
                [answer = std::move(answer)](result<job_id> id, dispatcher::submit_failure why) {
                  if (id) return answer(json_response(202, json{{"jobid", *id}}));
                  switch (why) {
                    case dispatcher::submit_failure::conflict:
                      return answer(error_response(409, id.err().message));
                    case dispatcher::submit_failure::storage:
                      return answer(error_response(500, id.err().message));
                    case dispatcher::submit_failure::none:
                    case dispatcher::submit_failure::refused:
                      break;
                  }
                  answer(error_response(422, id.err().message));
                },
                claim);
}

rest_response coordinator_rest_api::missing_job(const job_id& id) const {
  if (auto s = jobs_->summary(id))
    return error_response(404, "job " + id + " ended (" + std::string(to_string(s->status)) +
                                   ") before this coordinator started: only its summary is kept");
  return error_response(404, "no job " + id);
}

rest_response coordinator_rest_api::job_details(const job_id& id) const {
  job_master* m = jobs_->find(id);
  if (m == nullptr) {
    // A job that ended before this coordinator started: its summary, without vertices.
    auto s = jobs_->summary(id);
    if (!s) return error_response(404, "no job " + id);
    json j{{"jid", id},
           {"name", s->name},
           {"state", std::string(to_string(s->status))},
           {"start-time", s->start_time_ms},
           {"end-time", s->end_time_ms > 0 ? s->end_time_ms : -1},
           {"restarts", s->restarts},
           {"waiting-for-slots", false},
           {"vertices", json::array()},
           {"edges", json::array()},
           {"now", ms(coordinator_clock::now_us())}};
    if (!s->failure_cause.empty()) j["failure-cause"] = s->failure_cause;
    return json_response(200, j);
  }
  const auto& eg = m->graph();
  // Sources are the vertices no edge leads into; their write-records are the job's intake.
  std::set<vertex_id> has_input;
  json edges = json::array();
  for (const auto& e : eg.job().edges) {
    has_input.insert(e.target);
    edges.push_back({{"source", e.source},
                     {"target", e.target},
                     {"ship_strategy", std::string(to_string(e.part))}});
  }
  json vertices = json::array();
  std::uint64_t source_records = 0;
  for (const auto& v : eg.job_vertices()) {
    json subtasks = json::array();
    std::uint64_t read = 0, written = 0, buffered = 0;
    for (const auto& s : v->subtasks()) {
      auto worker = m->worker_of(s->current_attempt());
      std::optional<task_io_metrics::entry> io;
      if (io_) io = io_->find(id, s->current_attempt());
      const std::uint64_t in = io ? io->records_in : 0, out = io ? io->records_out : 0;
      read += in;
      written += out;
      buffered += io ? io->buffered_in_bytes : 0;
      subtasks.push_back({{"subtask", s->id().index},
                          {"attempt", s->current_attempt().attempt},
                          {"status", std::string(to_string(s->state()))},
                          {"worker", worker.value_or("")},
                          {"metrics", {{"read-records", in},
                                       {"write-records", out},
                                       // When these counters arrived (coordinator clock, us;
                                       // 0 before any): a rate over one subtask is exact.
                                       {"records-timestamp-us", io ? io->updated_us : 0},
                                       // The byte bound of each input channel (0: none) and
                                       // the record bytes queued on them.
                                       {"in-flight-bytes-bound",
                                        io ? io->in_flight_bytes_bound : 0},
                                       {"buffered-in-bytes", io ? io->buffered_in_bytes : 0}}}});
    }
    const bool source = !has_input.contains(v->id());
    if (source) source_records += written;
    vertices.push_back({{"id", v->id()},
                        {"is_source", source},
                        {"metrics",
                         {{"read-records", read},
                          {"write-records", written},
                          {"buffered-in-bytes", buffered}}},
                        {"uid", v->vertex().uid},
                        {"name", v->vertex().name},
                        {"kind", v->vertex().kind},
                        {"parallelism", v->parallelism()},
                        {"maxParallelism", v->vertex().max_parallelism},
                        {"status", vertex_status(*v)},
                        {"subtasks", subtasks}});
  }
  auto s = *jobs_->summary(id);
  json j{{"jid", id},
         {"name", s.name},
         {"state", std::string(to_string(s.status))},
         {"start-time", s.start_time_ms},
         {"end-time", s.end_time_ms > 0 ? s.end_time_ms : -1},
         {"restarts", s.restarts},
         {"waiting-for-slots", s.waiting_for_slots},
         {"slots-needed", m->slots_needed()},
         {"vertices", vertices},
         {"edges", edges},
         // Records the sources emitted, as of the newest heartbeat that reported counters
         // ("records-timestamp", ms): rates come from two of these, not from polling times.
         {"source-records", source_records},
         {"records-timestamp", io_ ? ms(io_->last_update_us(id)) : 0},
         {"now", ms(coordinator_clock::now_us())}};
  if (!s.failure_cause.empty()) j["failure-cause"] = s.failure_cause;
  if (!s.waiting_reason.empty()) j["waiting-reason"] = s.waiting_reason;
  if (const auto& program = m->graph().job().program)
    j["program"] = json{{"name", program->name}, {"fingerprint", program->fingerprint}};
  if (auto restored = m->restored_from()) j["restored-from-checkpoint"] = *restored;
  if (const auto& origin = m->origin(); !origin.path.empty())
    j["restored-from"] = {{"path", origin.path},
                          {"claim-mode", std::string(to_string(origin.mode))}};
  if (auto* c = m->coordinator()) j["last-completed-checkpoint"] = c->core().latest_completed_id();
  j["health"] = job_health(*m, id);
  return json_response(200, j);
}

json coordinator_rest_api::job_health(const job_master& m, const job_id& id) const {
  // A RUNNING job whose checkpoints or counter reports stopped is not well, whatever its
  // status says: a worker that hangs, or one lost without a closed connection, shows here
  // before the heartbeat timeout fails the job over.
  const std::int64_t now_ms = ms(coordinator_clock::now_us());
  json reasons = json::array();
  json health{{"status", "ok"}};
  if (m.status() != job_status::running) {
    health["status"] = "not running";
    health["reasons"] = reasons;
    return health;
  }
  const std::int64_t running_since = m.graph().status_timestamp_ms(job_status::running);
  const checkpoint_coordinator* c = m.coordinator();
  if (c != nullptr && c->is_periodic_checkpointing_started() && c->core().config().interval) {
    // Late: three intervals, or three times what the last checkpoint took, and at least 10 s.
    std::int64_t last = running_since;
    std::int64_t last_took = 0;
    if (const auto* l = c->core().stats().latest_completed(); l && l->end_timestamp_us) {
      last = std::max(last, ms(*l->end_timestamp_us));
      last_took = ms(l->end_to_end_duration_us);
    }
    const std::int64_t interval = c->core().config().interval->count();
    const std::int64_t bound = std::max({3 * interval, 3 * last_took, stale_checkpoint_ms});
    health["last-checkpoint-age-ms"] = now_ms - last;
    if (now_ms - last > bound)
      reasons.push_back("no checkpoint completed for " + std::to_string(now_ms - last) +
                        " ms (interval " + std::to_string(interval) + " ms)");
  }
  if (io_) {
    const std::int64_t last = std::max(running_since, ms(io_->last_update_us(id)));
    health["counters-age-ms"] = now_ms - last;
    if (now_ms - last > stale_counters_ms)
      reasons.push_back("no record counters from the workers for " +
                        std::to_string(now_ms - last) + " ms");
  }
  if (!reasons.empty()) health["status"] = "stalled";
  health["reasons"] = reasons;
  return health;
}

rest_response coordinator_rest_api::cancel(const job_id& id) {
  // A job that ended before this coordinator started is a 409 like any ended job.
  if (!jobs_->summary(id)) return error_response(404, "no job " + id);
  auto r = jobs_->cancel(id);
  if (!r) return error_response(409, r.err().message);
  return json_response(202, json::object());
}

rest_response coordinator_rest_api::checkpoints(const job_id& id) const {
  job_master* m = jobs_->find(id);
  if (m == nullptr) return missing_job(id);
  auto* c = m->coordinator();
  if (c == nullptr) return error_response(404, "checkpointing is not enabled for job " + id);
  const auto& stats = c->core().stats();
  const auto counts = stats.counts();
  json latest{{"completed", nullptr}, {"savepoint", nullptr}, {"failed", nullptr},
              {"restored", nullptr}};
  if (auto* l = stats.latest_completed()) latest["completed"] = checkpoint_json(*l);
  if (auto* l = stats.latest_savepoint()) latest["savepoint"] = checkpoint_json(*l);
  if (auto* l = stats.latest_failed()) latest["failed"] = checkpoint_json(*l);
  if (auto r = stats.latest_restored())
    latest["restored"] = {{"id", r->id},
                          {"restore_timestamp", ms(r->restore_us)},
                          {"is_savepoint", r->savepoint},
                          {"external_path", r->external_path}};
  json history = json::array();
  for (const auto* h : stats.history()) history.push_back(checkpoint_json(*h));
  json j{{"counts",
          {{"restored", counts.restored},
           {"total", counts.triggered},
           {"in_progress", counts.in_progress},
           {"completed", counts.completed},
           {"failed", counts.failed},
           {"failed_savepoints", counts.failed_savepoints}}},
         {"summary",
          {{"end_to_end_duration", summary_json(stats.end_to_end_duration_us(), 0.001)},
           {"end_to_end_duration_us", summary_json(stats.end_to_end_duration_us())},
           {"state_size", summary_json(stats.state_size())},
           {"checkpointed_size", summary_json(stats.checkpointed_size())},
           {"alignment_duration", summary_json(stats.alignment_duration_us(), 0.001)},
           {"alignment_duration_us", summary_json(stats.alignment_duration_us())},
           {"notified_duration", summary_json(stats.notified_duration_us(), 0.001)},
           {"notified_duration_us", summary_json(stats.notified_duration_us())}}},
         {"latest", latest},
         {"history", history}};
  return json_response(200, j);
}

rest_response coordinator_rest_api::checkpoint_config(const job_id& id) const {
  job_master* m = jobs_->find(id);
  if (m == nullptr) return missing_job(id);
  auto* c = m->coordinator();
  if (c == nullptr) return error_response(404, "checkpointing is not enabled for job " + id);
  const auto& cfg = c->core().config();
  json j{{"mode", cfg.mode == checkpointing_mode::exactly_once ? "exactly_once" : "at_least_once"},
         {"interval", cfg.interval ? cfg.interval->count() : -1},
         {"timeout", cfg.timeout.count()},
         {"min_pause", cfg.min_pause.count()},
         {"max_concurrent", cfg.max_concurrent},
         {"tolerable_failed_checkpoints", cfg.tolerable_failures},
         {"unaligned_checkpoints", cfg.unaligned},
         {"retained_checkpoints", cfg.retained},
         {"externalization",
          {{"enabled", true},
           {"delete_on_cancellation",
            cfg.retention == externalized_retention::delete_on_cancellation}}},
         {"state_backend", cfg.state_backend},
         {"checkpoint_storage", "filesystem"},
         {"checkpoint_dir", cfg.checkpoint_dir},
         {"savepoint_dir", cfg.savepoint_dir},
         {"stats_history_size", cfg.stats_history_size}};
  return json_response(200, j);
}

rest_response coordinator_rest_api::set_checkpoint_config(const job_id& id,
                                                          const std::string& body) {
  job_master* m = jobs_->find(id);
  if (m == nullptr) return missing_job(id);
  auto* c = m->coordinator();
  if (c == nullptr) return error_response(404, "checkpointing is not enabled for job " + id);
  json j = json::parse(body, nullptr, false);
  const bool is_object = !j.is_discarded() && j.is_object();
  const bool has_interval = is_object && j.contains("interval");
  const bool has_unaligned = is_object && j.contains("unaligned");
  if (!is_object || (!has_interval && !has_unaligned) ||
      j.size() != static_cast<std::size_t>(has_interval) + has_unaligned ||
      (has_interval && !j["interval"].is_number_integer()) ||
      (has_unaligned && !j["unaligned"].is_boolean()))
    return error_response(400,
                          "the body must be {\"interval\": <milliseconds>, \"unaligned\": "
                          "<true|false>} with one or both, and nothing else");
  snapflow::checkpoint_config next = c->core().config();
  if (has_interval) next.interval = std::chrono::milliseconds(j["interval"].get<std::int64_t>());
  if (has_unaligned) next.unaligned = j["unaligned"].get<bool>();
  // The aligned timeout stays for when unaligned is switched on again; aligned, it is unused.
  snapflow::checkpoint_config checked = next;
  if (!checked.unaligned) checked.aligned_checkpoint_timeout = std::chrono::milliseconds(0);
  if (auto invalid = checked.validate()) return error_response(400, *invalid);
  if (has_interval && !c->core().config().interval)
    return error_response(409, "job " + id + " was submitted without periodic checkpoints");
  const auto& submitted = m->graph().job().checkpointing;
  if (next.unaligned && (!submitted || !submitted->config.unaligned))
    return error_response(409, "job " + id +
                                   " was submitted with aligned checkpoints: unaligned ones can "
                                   "be switched on only in a job submitted with unaligned = true "
                                   "(its tasks bound and persist their in-flight records)");
  if (has_interval) c->set_interval(*next.interval);
  if (has_unaligned) c->set_unaligned(next.unaligned);
  return json_response(200, json{{"interval", next.interval ? next.interval->count() : -1},
                                 {"unaligned", next.unaligned}});
}

rest_response coordinator_rest_api::checkpoint_details(
    const job_id& id, const std::string& cid,
    const std::map<std::string, std::string>& query) const {
  job_master* m = jobs_->find(id);
  if (m == nullptr) return missing_job(id);
  auto* c = m->coordinator();
  if (c == nullptr) return error_response(404, "checkpointing is not enabled for job " + id);
  checkpoint_id n = 0;
  auto [ptr, ec] = std::from_chars(cid.data(), cid.data() + cid.size(), n);
  if (ec != std::errc() || ptr != cid.data() + cid.size())
    return error_response(400, "checkpoint id must be a number, got '" + cid + "'");
  // ?subtasks=none leaves the per-subtask list out (the per-vertex summary stays: with
  // thousands of subtasks the list is megabytes); ?vertex=N keeps only that vertex's subtasks.
  bool list_subtasks = true;
  if (auto q = query.find("subtasks"); q != query.end()) {
    if (q->second != "all" && q->second != "none")
      return error_response(400, "subtasks must be all or none, got '" + q->second + "'");
    list_subtasks = q->second == "all";
  }
  std::optional<vertex_id> only_vertex;
  if (auto q = query.find("vertex"); q != query.end()) {
    vertex_id v = 0;
    auto [vptr, vec] = std::from_chars(q->second.data(), q->second.data() + q->second.size(), v);
    if (vec != std::errc() || vptr != q->second.data() + q->second.size() ||
        v >= m->graph().job_vertices().size())
      return error_response(400, "vertex must be a vertex id of this job, got '" + q->second + "'");
    only_vertex = v;
  }
  const checkpoint_stats* s = c->core().stats().find(n);
  if (s == nullptr) return error_response(404, "no checkpoint " + cid + " in the history");
  json j = checkpoint_json(*s);

  // Per vertex, like Flink's task statistics: what the acknowledged subtasks reported.
  struct vertex_summary {
    std::size_t acknowledged = 0, notified = 0;
    std::uint64_t state_size = 0, checkpointed_size = 0;
    std::int64_t latest_ack_us = 0, min_e2e_us = 0, max_e2e_us = 0, sum_e2e_us = 0;
    std::int64_t max_alignment_us = 0, max_start_delay_us = 0;
  };
  std::vector<vertex_summary> per_vertex(m->graph().job_vertices().size());
  for (const auto& a : s->subtasks) {
    if (a.subtask.vertex >= per_vertex.size()) continue;
    vertex_summary& v = per_vertex[a.subtask.vertex];
    const std::int64_t e2e = a.end_to_end_duration_us;
    v.min_e2e_us = v.acknowledged == 0 ? e2e : std::min(v.min_e2e_us, e2e);
    v.max_e2e_us = std::max(v.max_e2e_us, e2e);
    v.sum_e2e_us += e2e;
    ++v.acknowledged;
    v.state_size += a.state_size;
    v.checkpointed_size += a.checkpointed_size;
    v.latest_ack_us = std::max(v.latest_ack_us, a.ack_timestamp_us);
    v.max_alignment_us = std::max(v.max_alignment_us, a.alignment_duration_us);
    v.max_start_delay_us = std::max(v.max_start_delay_us, a.start_delay_us);
    if (a.notified_timestamp_us) ++v.notified;
  }
  json tasks = json::array();
  for (const auto& ejv : m->graph().job_vertices()) {
    const vertex_summary& v = per_vertex[ejv->vertex().id];
    json e2e = {{"min_us", v.min_e2e_us}, {"max_us", v.max_e2e_us},
                {"avg_us", v.acknowledged == 0
                               ? 0
                               : v.sum_e2e_us / static_cast<std::int64_t>(v.acknowledged)}};
    tasks.push_back({{"vertex", ejv->vertex().id},
                     {"uid", ejv->vertex().uid},
                     {"num_subtasks", ejv->parallelism()},
                     {"num_acknowledged_subtasks", v.acknowledged},
                     {"num_notified_subtasks", v.notified},
                     {"state_size", v.state_size},
                     {"checkpointed_size", v.checkpointed_size},
                     {"latest_ack_timestamp_us", v.latest_ack_us},
                     {"end_to_end_duration", e2e},
                     {"max_alignment_duration_us", v.max_alignment_us},
                     {"max_start_delay_us", v.max_start_delay_us}});
  }
  j["tasks"] = std::move(tasks);
  if (!list_subtasks) return json_response(200, j);

  json subtasks = json::array();
  for (const auto& a : s->subtasks) {
    if (only_vertex && a.subtask.vertex != *only_vertex) continue;
    subtasks.push_back({{"vertex", a.subtask.vertex},
                        {"index", a.subtask.index},
                        {"status", "completed"},
                        {"ack_timestamp", ms(a.ack_timestamp_us)},
                        {"end_to_end_duration", ms(a.end_to_end_duration_us)},
                        {"end_to_end_duration_us", a.end_to_end_duration_us},
                        {"state_size", a.state_size},
                        {"checkpointed_size", a.checkpointed_size},
                        {"checkpoint", {{"sync", ms(a.sync_duration_us)},
                                        {"async", ms(a.async_duration_us)},
                                        {"sync_us", a.sync_duration_us},
                                        {"async_us", a.async_duration_us}}},
                        {"start_delay", ms(a.start_delay_us)},
                        {"start_delay_us", a.start_delay_us},
                        {"alignment", {{"duration", ms(a.alignment_duration_us)},
                                       {"duration_us", a.alignment_duration_us},
                                       {"processed", a.bytes_processed_during_alignment},
                                       {"held_records", a.records_held_during_alignment},
                                       {"records_after_barrier", a.records_after_barrier}}},
                        {"unaligned_checkpoint", a.unaligned},
                        {"persisted_data", a.persisted_data_bytes},
                        {"processed_data", a.bytes_processed_during_alignment}});
    if (a.notified_timestamp_us) {
      subtasks.back()["notified_timestamp"] = ms(*a.notified_timestamp_us);
      subtasks.back()["notified_timestamp_us"] = *a.notified_timestamp_us;
      subtasks.back()["notified_duration_us"] = *a.notified_timestamp_us - s->trigger_timestamp_us;
    }
  }
  j["subtasks"] = std::move(subtasks);
  return json_response(200, j);
}

rest_response coordinator_rest_api::trigger(const job_id& id, bool savepoint,
                                            const std::string& body) {
  job_master* m = jobs_->find(id);
  if (m == nullptr) return missing_job(id);
  auto* c = m->coordinator();
  if (c == nullptr) return error_response(404, "checkpointing is not enabled for job " + id);
  std::string target;
  bool cancel_job = false;
  if (!body.empty()) {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return error_response(400, "the body must be JSON");
    if (j.contains("target-directory") && !j["target-directory"].is_null()) {
      if (!j["target-directory"].is_string())
        return error_response(400, "target-directory must be a string");
      auto confined = savepoint_target(j["target-directory"].get<std::string>());
      if (!confined) return error_response(400, confined.err().message);
      target = *confined;
    }
    if (j.contains("cancel-job") && j["cancel-job"].is_boolean())
      cancel_job = j["cancel-job"].get<bool>();
  }
  auto op = std::make_shared<operation>();
  op->job = id;
  op->savepoint = savepoint;
  op->cancel_job = cancel_job;
  const std::string request_id = std::to_string(next_operation_++);
  operations_[request_id] = op;
  std::weak_ptr<dispatcher> weak = jobs_;
  c->trigger_checkpoint(
      savepoint ? checkpoint_trigger_kind::savepoint : checkpoint_trigger_kind::manual, target,
      [op, weak](const request_finished& f) {
        op->done = true;
        op->outcome = f;
        if (op->cancel_job && !f.failure)
          if (auto d = weak.lock()) (void)d->cancel(op->job);
      });
  return json_response(202, json{{"request-id", request_id}});
}

result<std::string> coordinator_rest_api::savepoint_target(const std::string& requested) const {
  if (requested.empty()) return std::string();
  const bool absolute = std::filesystem::path(requested).is_absolute();
  if (targets_.anywhere && absolute && requested.find('\0') == std::string::npos)
    return std::filesystem::path(requested).lexically_normal().string();
  if (!targets_.root)
    return error{"savepoint targets are refused: this coordinator has no savepoint root"};
  auto resolved = targets_.root->resolve(requested);
  if (!resolved)
    return error{"savepoint target refused: " + resolved.err().message +
                 "; give a path relative to the savepoint root " + targets_.root->root().string() +
                 (absolute ? " (absolute targets need the coordinator's --allow-savepoint-anywhere)"
                           : "")};
  return resolved->string();
}

result<std::filesystem::path> coordinator_rest_api::restore_source(const std::string& requested,
                                                                  bool claim) const {
  const std::filesystem::path path(requested);
  if (!claim && targets_.anywhere && path.is_absolute() &&
      requested.find('\0') == std::string::npos)
    return path.lexically_normal();
  if (!targets_.root)
    return error{"restoring from a savepoint is refused: this coordinator has no savepoint root"};
  if (!path.is_absolute()) {
    auto resolved = targets_.root->resolve(requested);
    if (!resolved)
      return error{"savepoint to restore refused: " + resolved.err().message +
                   "; give a path relative to the savepoint root " +
                   targets_.root->root().string()};
    return resolved;
  }
  std::vector<confined_folder> roots{*targets_.root};
  if (targets_.state_dir) roots.push_back(*targets_.state_dir);
  auto admitted = admit_under_any(roots, requested, "savepoint to restore");
  if (!admitted)
    return error{admitted.err().message +
                 (claim ? std::string(" (claimMode=CLAIM takes over only snapshots in these "
                                      "folders; restore from elsewhere with NO_CLAIM)")
                        : std::string(" (other places need the coordinator's "
                                      "--allow-savepoint-anywhere)"))};
  return admitted;
}

result<void> coordinator_rest_api::confine_savepoint_dir(job_graph& graph) const {
  if (!graph.checkpointing || graph.checkpointing->config.savepoint_dir.empty()) return success();
  std::string& dir = graph.checkpointing->config.savepoint_dir;
  const std::filesystem::path path(dir);
  if (targets_.anywhere && path.is_absolute() && dir.find('\0') == std::string::npos)
    return success();
  if (!targets_.root)
    return error{"the job's savepoint_dir is refused: this coordinator has no savepoint root"};
  auto resolved = path.is_absolute() ? targets_.root->admit(dir) : targets_.root->resolve(dir);
  if (!resolved)
    return error{"the job's savepoint_dir is refused: " + resolved.err().message +
                 "; it must lie under the savepoint root " + targets_.root->root().string() +
                 (path.is_absolute() ? " (other places need the coordinator's "
                                       "--allow-savepoint-anywhere)"
                                     : "")};
  dir = resolved->string();
  return success();
}

rest_response coordinator_rest_api::operation_status(const job_id& id,
                                                     const std::string& request_id) const {
  auto it = operations_.find(request_id);
  if (it == operations_.end() || it->second->job != id)
    return error_response(404, "no operation " + request_id + " for job " + id);
  const operation& op = *it->second;
  if (!op.done) return json_response(200, json{{"status", {{"id", "IN_PROGRESS"}}}});
  json operation_json;
  if (op.outcome.failure) {
    operation_json["failure-cause"] = {
        {"class", std::string(to_string(*op.outcome.failure))},
        {"stack-trace", op.outcome.message}};
  } else {
    operation_json["location"] = op.outcome.location;
  }
  if (op.outcome.id) operation_json["checkpointId"] = *op.outcome.id;
  return json_response(200, json{{"status", {{"id", "COMPLETED"}}}, {"operation", operation_json}});
}

std::string coordinator_rest_api::metrics_text() const {
  std::ostringstream os;
  auto gauge = [&](const std::string& name, const std::string& help) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " gauge\n";
  };
  struct job_metrics {
    job_id id;
    std::string name;
    checkpoint_counts counts;
    std::int64_t last_duration_ms = 0, last_size = 0, last_id = 0, restore_ts = -1;
    std::int64_t last_persisted = 0, last_unaligned = 0;
    std::uint64_t buffered_in = 0;
    double since_last_s = -1;
    stats_summary e2e;
    const checkpoint_stage_histograms* stages = nullptr;  // null without checkpointing
  };
  std::vector<job_metrics> all;
  const std::int64_t now_us = coordinator_clock::now_us();
  const std::int64_t retention_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(ended_job_metrics_retention).count();
  for (const auto& s : jobs_->list()) {
    // A job this coordinator never ran (it had ended before) has no series; one that ended
    // keeps its series for ended_job_metrics_retention, then they go.
    if (jobs_->find(s.id) == nullptr) continue;
    if (is_globally_terminal(s.status) && s.end_time_ms > 0 &&
        ms(now_us) - s.end_time_ms >= retention_ms)
      continue;
    job_metrics jm;
    jm.id = s.id;
    jm.name = s.name;
    if (auto* m = jobs_->find(s.id); m && io_)
      for (const auto* v : m->graph().all_execution_vertices())
        if (auto io = io_->find(s.id, v->current_attempt()))
          jm.buffered_in += io->buffered_in_bytes;
    if (auto* m = jobs_->find(s.id); m && m->coordinator()) {
      const auto& stats = m->coordinator()->core().stats();
      jm.counts = stats.counts();
      if (auto* l = stats.latest_completed()) {
        jm.last_duration_ms = ms(l->end_to_end_duration_us);
        jm.last_size = static_cast<std::int64_t>(l->state_size);
        jm.last_persisted = static_cast<std::int64_t>(l->persisted_data_bytes);
        jm.last_unaligned = l->unaligned ? 1 : 0;
        jm.last_id = l->id;
        if (l->end_timestamp_us) jm.since_last_s = (now_us - *l->end_timestamp_us) / 1e6;
      }
      if (auto r = stats.latest_restored()) jm.restore_ts = ms(r->restore_us);
      jm.e2e = stats.end_to_end_duration_us();
      jm.stages = &stats.stage_histograms();
    }
    all.push_back(std::move(jm));
  }
  auto label = [](const job_metrics& j) {
    std::string name;
    for (char ch : j.name) name += (ch == '"' || ch == '\\' || ch == '\n') ? '_' : ch;
    return "{job_id=\"" + j.id + "\",job_name=\"" + name + "\"}";
  };
  auto series = [&](const std::string& name, const std::string& help, auto value) {
    gauge(name, help);
    for (const auto& j : all) os << name << label(j) << ' ' << value(j) << '\n';
  };
  series("flink_jobmanager_job_totalNumberOfCheckpoints", "checkpoints triggered",
         [](const job_metrics& j) { return j.counts.triggered; });
  series("flink_jobmanager_job_numberOfInProgressCheckpoints", "checkpoints in progress",
         [](const job_metrics& j) { return j.counts.in_progress; });
  series("flink_jobmanager_job_numberOfCompletedCheckpoints", "checkpoints completed",
         [](const job_metrics& j) { return j.counts.completed; });
  series("flink_jobmanager_job_numberOfFailedCheckpoints", "checkpoints failed",
         [](const job_metrics& j) { return j.counts.failed; });
  series("flink_jobmanager_job_lastCheckpointDuration", "ms, trigger to durable completion",
         [](const job_metrics& j) { return j.last_duration_ms; });
  series("flink_jobmanager_job_lastCheckpointSize", "bytes of state in the last checkpoint",
         [](const job_metrics& j) { return j.last_size; });
  series("snapflow_last_checkpoint_persisted_data_bytes",
         "in-flight bytes the last completed checkpoint persisted as channel state",
         [](const job_metrics& j) { return j.last_persisted; });
  series("snapflow_last_checkpoint_unaligned", "1 if the last completed checkpoint went unaligned",
         [](const job_metrics& j) { return j.last_unaligned; });
  series("snapflow_buffered_in_bytes",
         "bytes of records queued on the input channels of the job's subtasks (last heartbeats)",
         [](const job_metrics& j) { return j.buffered_in; });
  series("flink_jobmanager_job_lastCompletedCheckpointId", "id of the last completed checkpoint",
         [](const job_metrics& j) { return j.last_id; });
  series("flink_jobmanager_job_lastCheckpointRestoreTimestamp", "ms since epoch, -1 if none",
         [](const job_metrics& j) { return j.restore_ts; });
  series("snapflow_seconds_since_last_completed_checkpoint",
         "grows while barriers are stuck; -1 before the first completion",
         [](const job_metrics& j) { return j.since_last_s; });
  series("snapflow_checkpoint_end_to_end_duration_us_p50", "median over the summary window",
         [](const job_metrics& j) { return j.e2e.p50; });
  series("snapflow_checkpoint_end_to_end_duration_us_p99", "p99 over the summary window",
         [](const job_metrics& j) { return j.e2e.p99; });
  // Barrier latency by stage, one observation per acknowledging subtask and stage.
  std::vector<histogram_series> stage_series;
  for (const auto& j : all) {
    if (j.stages == nullptr) continue;
    const std::string braced = label(j);  // the same job labels as the gauges
    const std::string job = braced.substr(1, braced.size() - 2) + ",stage=\"";
    stage_series.push_back({job + "trigger_to_barrier\"", &j.stages->trigger_to_barrier});
    stage_series.push_back({job + "barrier_to_aligned\"", &j.stages->barrier_to_aligned});
    stage_series.push_back(
        {job + "aligned_to_snapshot_done\"", &j.stages->aligned_to_snapshot_done});
    stage_series.push_back({job + "snapshot_done_to_ack\"", &j.stages->snapshot_done_to_ack});
  }
  write_prometheus_histogram(
      os, "snapflow_checkpoint_stage_duration_seconds",
      "per subtask and checkpoint: trigger sent -> barrier at the subtask -> aligned -> snapshot "
      "done -> ack received",
      stage_series);
  gauge("snapflow_workers", "registered workers");
  os << "snapflow_workers " << jobs_->workers()->workers().size() << '\n';
  gauge("snapflow_bad_frames_total", "frames refused as malformed");
  os << "snapflow_bad_frames_total " << counters_.bad_frames << '\n';
  gauge("snapflow_refused_messages_total", "valid frames refused (unknown peer, wrong owner)");
  os << "snapflow_refused_messages_total " << counters_.refused_messages << '\n';
  return os.str();
}

}  // namespace snapflow::rest
