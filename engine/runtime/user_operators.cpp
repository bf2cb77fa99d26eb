#include "engine/runtime/user_operators.hpp"

#include <cassert>
#include <chrono>

#include "engine/runtime/backend_keyed_context.hpp"

namespace snapflow {

namespace {

template <typename Fn>
result<Fn> callable_of(const job_vertex& vertex) {
  if (!vertex.function)
    return error{"kind '" + vertex.kind +
                 "' runs a C++ callable, but the vertex carries none (callables are not "
                 "serialized: register a kind in a custom worker instead)"};
  const Fn* fn = std::get_if<Fn>(vertex.function.get());
  if (fn == nullptr || !*fn)
    return error{"kind '" + vertex.kind + "' carries a callable of the wrong type"};
  return *fn;
}

// Runs user code: what it throws becomes the task's failure, named after the operator, instead
// of an exception unwinding through the task.
template <typename Call>
result<void> guarded(const std::string& name, Call call) {
  try {
    call();
    return success();
  } catch (const std::exception& e) {
    return error{"user function '" + name + "' failed: " + e.what()};
  } catch (...) {
    return error{"user function '" + name + "' failed: it threw something not a std::exception"};
  }
}

}  // namespace

result<std::unique_ptr<stream_operator>> user_map::create(const job_vertex& vertex) {
  auto fn = callable_of<map_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_map(vertex.name, std::move(*fn)));
}

result<void> user_map::process(const record& r, record_output& out) {
  return guarded(name_, [&] { out.emit(fn_(r)); });
}

result<std::unique_ptr<stream_operator>> user_filter::create(const job_vertex& vertex) {
  auto fn = callable_of<filter_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_filter(vertex.name, std::move(*fn)));
}

result<void> user_filter::process(const record& r, record_output& out) {
  return guarded(name_, [&] {
    if (fn_(r)) out.emit(r);
  });
}

result<std::unique_ptr<stream_operator>> user_flat_map::create(const job_vertex& vertex) {
  auto fn = callable_of<flat_map_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_flat_map(vertex.name, std::move(*fn)));
}

result<void> user_flat_map::process(const record& r, record_output& out) {
  buffer_.clear();
  auto called = guarded(name_, [&] { fn_(r, buffer_); });
  if (!called) return called;
  for (auto& o : buffer_) out.emit(std::move(o));
  return success();
}

result<std::unique_ptr<stream_operator>> user_key_by::create(const job_vertex& vertex) {
  auto fn = callable_of<key_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_key_by(vertex.name, std::move(*fn)));
}

result<void> user_key_by::process(const record& r, record_output& out) {
  return guarded(name_, [&] {
    record copy = r;
    copy.key = fn_(r);
    out.emit(std::move(copy));
  });
}

user_process::user_process(std::string name, process_function fn, timer_function on_timer)
    : name_(std::move(name)), fn_(std::move(fn)), on_timer_(std::move(on_timer)) {}
user_process::~user_process() = default;

result<std::unique_ptr<stream_operator>> user_process::create(const job_vertex& vertex) {
  if (vertex.function)
    if (const auto* timed = std::get_if<timed_process_function>(vertex.function.get())) {
      if (!timed->process || !timed->on_timer)
        return error{"kind '" + vertex.kind + "' carries a timed process function without " +
                     (timed->process ? "its on_timer callback" : "its process function")};
      return std::unique_ptr<stream_operator>(
          new user_process(vertex.name, timed->process, timed->on_timer));
    }
  auto fn = callable_of<process_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_process(vertex.name, std::move(*fn), {}));
}

result<void> user_process::open(const operator_context& context,
                                const std::vector<restored_operator_state>&) {
  assert(context.keyed_state != nullptr);
  if (on_timer_) {
    timers_ = std::make_unique<timer_service>(*context.keyed_state);
    // The timers restored with the keyed state (those of the key groups this subtask owns now).
    if (context.restored_checkpoint != 0)
      if (auto r = timers_->load(); !r)
        return error{"user function '" + name_ + "': " + r.err().message};
  }
  context_ = std::make_unique<backend_keyed_context>(*context.keyed_state, timers_.get());
  return success();
}

result<void> user_process::process(const record& r, record_output& out) {
  assert(context_);
  buffer_.clear();
  // Records emitted before a failure are dropped with the failed task: the restore replays.
  auto called = guarded(name_, [&] { fn_(r, *context_, buffer_); });
  if (!called) return called;
  for (auto& o : buffer_) out.emit(std::move(o));
  return success();
}

result<void> user_process::fire(const fired_timer& t, record_output& out) {
  buffer_.clear();
  auto called = guarded(name_, [&] { on_timer_(t, *context_, buffer_); });
  if (!called) return called;
  for (auto& o : buffer_) {
    if (o.timestamp == no_timestamp && t.domain == time_domain::event_time)
      o.timestamp = t.timestamp;
    out.emit(std::move(o));
  }
  return success();
}

result<void> user_process::process_watermark(const watermark& w, record_output& out) {
  if (timers_ && !w.idle)
    if (auto r = timers_->advance_watermark(
            w.timestamp, [&](const fired_timer& t) { return fire(t, out); });
        !r)
      return r;
  out.emit_watermark(w);
  return success();
}

std::optional<std::int64_t> user_process::next_processing_time() const {
  if (!timers_) return std::nullopt;
  return timers_->next_processing_timer();
}

result<void> user_process::on_processing_time(std::int64_t now_ms, record_output& out) {
  if (!timers_) return success();
  return timers_->advance_processing_time(now_ms,
                                          [&](const fired_timer& t) { return fire(t, out); });
}

result<std::unique_ptr<stream_operator>> user_stateful_process::create(
    const job_vertex& vertex) {
  const auto* fn =
      vertex.function ? std::get_if<stateful_process_function>(vertex.function.get()) : nullptr;
  if (fn == nullptr || !fn->process)
    return error{"kind '" + vertex.kind + "' needs a stateful process function callable"};
  return std::unique_ptr<stream_operator>(new user_stateful_process(vertex.name, *fn));
}

result<void> user_stateful_process::open(const operator_context& context,
                                         const std::vector<restored_operator_state>& restored) {
  states_ = std::make_unique<operator_list_states>(context.subtask_index, context.parallelism);
  if (auto r = states_->restore(restored); !r)
    return error{"user function '" + name_ + "': restoring its operator state: " +
                 r.err().message};
  return success();
}

result<void> user_stateful_process::process(const record& r, record_output& out) {
  assert(states_);
  buffer_.clear();
  auto called = guarded(name_, [&] { fn_.process(r, *states_, buffer_); });
  if (!called) return called;
  for (auto& o : buffer_) out.emit(std::move(o));
  return success();
}

result<operator_snapshot> user_stateful_process::snapshot(checkpoint_id) {
  assert(states_);
  auto entries = states_->snapshot();
  if (!entries) return error{"user function '" + name_ + "': " + entries.err().message};
  return operator_snapshot{std::move(entries).value(), {}};
}

result<void> user_stateful_process::end_input(record_output& out) {
  if (!fn_.end_input) return success();
  buffer_.clear();
  auto called = guarded(name_, [&] { fn_.end_input(*states_, buffer_); });
  if (!called) return called;
  for (auto& o : buffer_) out.emit(std::move(o));
  return success();
}

user_timestamps::user_timestamps(std::string name, timestamp_assigner assigner)
    : name_(std::move(name)),
      assigner_(std::move(assigner)),
      generator_(assigner_.max_out_of_orderness_ms, assigner_.idle_ms) {}

result<std::unique_ptr<stream_operator>> user_timestamps::create(const job_vertex& vertex) {
  const timestamp_assigner* a =
      vertex.function ? std::get_if<timestamp_assigner>(vertex.function.get()) : nullptr;
  if (a == nullptr || !a->timestamp)
    return error{"kind '" + vertex.kind + "' needs a timestamp assigner callable"};
  if (a->max_out_of_orderness_ms < 0 || a->idle_ms < 0)
    return error{"kind '" + vertex.kind +
                 "': the out-of-orderness and idleness must not be negative"};
  return std::unique_ptr<stream_operator>(new user_timestamps(vertex.name, *a));
}

namespace {
std::int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

result<void> user_timestamps::process(const record& r, record_output& out) {
  return guarded(name_, [&] {
    record copy = r;
    copy.timestamp = assigner_.timestamp(r);
    // The "none" value would read as no event time downstream.
    if (copy.timestamp == no_timestamp) copy.timestamp = no_timestamp + 1;
    const std::uint32_t split = assigner_.split ? assigner_.split(r) : 0;
    generator_.on_event(split, copy.timestamp, system_now_ms());
    if (assigner_.key) copy.key = assigner_.key(copy);
    out.emit(std::move(copy));
  });
}

result<void> user_timestamps::process_watermark(const watermark& w, record_output& out) {
  // The end of input passes: everything is on time from here, nothing more will come.
  if (!w.idle && w.timestamp == max_watermark) out.emit_watermark(w);
  return success();
}

result<void> user_timestamps::on_processing_time(std::int64_t now_ms, record_output& out) {
  next_periodic_ms_ = now_ms + periodic_ms;
  if (auto w = generator_.on_periodic(now_ms)) out.emit_watermark(*w);
  return success();
}

}  // namespace snapflow
