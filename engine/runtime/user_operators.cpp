#include "engine/runtime/user_operators.hpp"

#include <cassert>

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

user_process::user_process(std::string name, process_function fn)
    : name_(std::move(name)), fn_(std::move(fn)) {}
user_process::~user_process() = default;

result<std::unique_ptr<stream_operator>> user_process::create(const job_vertex& vertex) {
  auto fn = callable_of<process_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_process(vertex.name, std::move(*fn)));
}

result<void> user_process::open(const operator_context& context,
                                const std::vector<restored_operator_state>&) {
  assert(context.keyed_state != nullptr);
  context_ = std::make_unique<backend_keyed_context>(*context.keyed_state);
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

}  // namespace snapflow
