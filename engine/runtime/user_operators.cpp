#include "engine/runtime/user_operators.hpp"

#include <cassert>

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

}  // namespace

result<std::unique_ptr<stream_operator>> user_map::create(const job_vertex& vertex) {
  auto fn = callable_of<map_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_map(std::move(*fn)));
}

result<void> user_map::process(const record& r, record_output& out) {
  out.emit(fn_(r));
  return success();
}

result<std::unique_ptr<stream_operator>> user_filter::create(const job_vertex& vertex) {
  auto fn = callable_of<filter_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_filter(std::move(*fn)));
}

result<void> user_filter::process(const record& r, record_output& out) {
  if (fn_(r)) out.emit(r);
  return success();
}

result<std::unique_ptr<stream_operator>> user_flat_map::create(const job_vertex& vertex) {
  auto fn = callable_of<flat_map_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_flat_map(std::move(*fn)));
}

result<void> user_flat_map::process(const record& r, record_output& out) {
  buffer_.clear();
  fn_(r, buffer_);
  for (auto& o : buffer_) out.emit(std::move(o));
  return success();
}

result<std::unique_ptr<stream_operator>> user_key_by::create(const job_vertex& vertex) {
  auto fn = callable_of<key_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_key_by(std::move(*fn)));
}

result<void> user_key_by::process(const record& r, record_output& out) {
  record copy = r;
  copy.key = fn_(r);
  out.emit(std::move(copy));
  return success();
}

// keyed_context over the backend's value state of the current key.
class user_process::backend_context final : public keyed_context {
 public:
  explicit backend_context(keyed_state_backend& backend) : backend_(backend) {}
  std::optional<std::int64_t> value(std::string_view state) const override {
    return backend_.value(state);
  }
  void set_value(std::string_view state, std::int64_t v) override { backend_.set_value(state, v); }
  void clear(std::string_view state) override { backend_.clear_value(state); }

 private:
  keyed_state_backend& backend_;
};

user_process::user_process(process_function fn) : fn_(std::move(fn)) {}
user_process::~user_process() = default;

result<std::unique_ptr<stream_operator>> user_process::create(const job_vertex& vertex) {
  auto fn = callable_of<process_function>(vertex);
  if (!fn) return fn.err();
  return std::unique_ptr<stream_operator>(new user_process(std::move(*fn)));
}

result<void> user_process::open(const operator_context& context,
                                const std::vector<restored_operator_state>&) {
  assert(context.keyed_state != nullptr);
  context_ = std::make_unique<backend_context>(*context.keyed_state);
  return success();
}

result<void> user_process::process(const record& r, record_output& out) {
  assert(context_);
  buffer_.clear();
  fn_(r, *context_, buffer_);
  for (auto& o : buffer_) out.emit(std::move(o));
  return success();
}

}  // namespace snapflow
