#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "engine/runtime/stream_operator.hpp"
#include "graph/job_graph.hpp"

namespace snapflow {

// Maps an operator kind (graph/operator_registry.hpp names the kinds and their parameters) to
// its implementation. builtin() knows every kind snapflow ships with; a custom worker binary
// copies it, adds its own kinds (registering the same names in its operator_registry so job
// graphs naming them validate), and deploys tasks with its copy.
class operator_factory {
 public:
  // Makes an operator for one subtask of `vertex`. Errors are operational: a parameter out of
  // range, a user kind without its callable.
  using creator = std::function<result<std::unique_ptr<stream_operator>>(const job_vertex& vertex)>;

  static const operator_factory& builtin();

  // Throws std::invalid_argument on a blank or duplicate kind (a programming error in the
  // binary that registers it, found at start-up).
  void add(std::string kind, creator make);
  // Puts `make` in place of the kind's implementation, or adds it. A user program's worker
  // (cmd/program.hpp) gives the user_* kinds its own callables this way.
  void replace(std::string kind, creator make);
  bool contains(std::string_view kind) const;
  std::vector<std::string> kinds() const;

  result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex) const;

 private:
  std::map<std::string, creator, std::less<>> creators_;
};

// Parameters as operators read them: the vertex's value, else the default, else an error
// naming the vertex and the parameter.
result<std::int64_t> int_param(const job_vertex& vertex, std::string_view name,
                               std::optional<std::int64_t> fallback = std::nullopt);
result<std::string> string_param(const job_vertex& vertex, std::string_view name,
                                 std::optional<std::string> fallback = std::nullopt);

}  // namespace snapflow
