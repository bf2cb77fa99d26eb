#include "engine/runtime/operator_factory.hpp"

#include <charconv>
#include <stdexcept>

#include "engine/runtime/keyed_operators.hpp"
#include "engine/runtime/sink_operators.hpp"
#include "engine/runtime/source_operators.hpp"
#include "engine/runtime/transform_operators.hpp"
#include "engine/runtime/two_phase_commit_file_sink.hpp"
#include "engine/runtime/user_operators.hpp"

namespace snapflow {

namespace {

std::string describe(const job_vertex& v) {
  return "operator '" + (v.uid.empty() ? v.kind : v.uid) + "' (" + v.kind + ")";
}

template <typename Op>
operator_factory::creator simple() {
  return [](const job_vertex&) -> result<std::unique_ptr<stream_operator>> {
    return std::unique_ptr<stream_operator>(std::make_unique<Op>());
  };
}

operator_factory make_builtin() {
  operator_factory f;
  f.add("sequence_source", sequence_source::create);
  f.add("line_source", line_source::create);
  f.add("map_identity", map_identity::create);
  f.add("map_add", map_add::create);
  f.add("map_scale", map_scale::create);
  f.add("filter_modulo", filter_modulo::create);
  f.add("flat_map_split_words", simple<flat_map_split_words>());
  f.add("flat_map_repeat", flat_map_repeat::create);
  f.add("keyed_sum", keyed_sum::create);
  f.add("keyed_count", simple<keyed_count>());
  f.add("print_sink", simple<print_sink>());
  f.add("discard_sink", discard_sink::create);
  f.add("file_sink", simple<file_sink>());
  f.add("two_phase_commit_file_sink", simple<two_phase_commit_file_sink>());
  f.add("user_map", user_map::create);
  f.add("user_filter", user_filter::create);
  f.add("user_flat_map", user_flat_map::create);
  f.add("user_key_by", user_key_by::create);
  f.add("user_process", user_process::create);
  f.add("user_stateful_process", user_stateful_process::create);
  f.add("user_timestamps", user_timestamps::create);
  return f;
}

}  // namespace

const operator_factory& operator_factory::builtin() {
  static const operator_factory factory = make_builtin();
  return factory;
}

void operator_factory::add(std::string kind, creator make) {
  if (kind.empty()) throw std::invalid_argument("operator kind must not be blank");
  if (!make) throw std::invalid_argument("operator kind '" + kind + "' needs a creator");
  auto name = kind;
  if (!creators_.emplace(std::move(kind), std::move(make)).second)
    throw std::invalid_argument("operator kind '" + name + "' already has an implementation");
}

void operator_factory::replace(std::string kind, creator make) {
  if (kind.empty()) throw std::invalid_argument("operator kind must not be blank");
  if (!make) throw std::invalid_argument("operator kind '" + kind + "' needs a creator");
  creators_[std::move(kind)] = std::move(make);
}

bool operator_factory::contains(std::string_view kind) const {
  return creators_.contains(kind);
}

std::vector<std::string> operator_factory::kinds() const {
  std::vector<std::string> out;
  for (const auto& [kind, _] : creators_) out.push_back(kind);
  return out;
}

result<std::unique_ptr<stream_operator>> operator_factory::create(const job_vertex& vertex) const {
  auto it = creators_.find(vertex.kind);
  if (it == creators_.end())
    return error{describe(vertex) + ": no implementation for operator kind '" + vertex.kind +
                 "' in this worker"};
  auto made = it->second(vertex);
  if (!made) return error{describe(vertex) + ": " + made.err().message};
  return made;
}

result<std::int64_t> int_param(const job_vertex& vertex, std::string_view name,
                               std::optional<std::int64_t> fallback) {
  auto it = vertex.params.find(std::string(name));
  if (it == vertex.params.end()) {
    if (fallback) return *fallback;
    return error{"parameter '" + std::string(name) + "' is required"};
  }
  const std::string& text = it->second;
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
    return error{"parameter '" + std::string(name) + "' must be an integer (got '" + text + "')"};
  return v;
}

result<std::string> string_param(const job_vertex& vertex, std::string_view name,
                                 std::optional<std::string> fallback) {
  auto it = vertex.params.find(std::string(name));
  if (it == vertex.params.end()) {
    if (fallback) return *fallback;
    return error{"parameter '" + std::string(name) + "' is required"};
  }
  return it->second;
}

}  // namespace snapflow
