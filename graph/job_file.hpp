#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "graph/job_graph.hpp"
#include "graph/operator_registry.hpp"

// Jobs declared in a TOML file instead of through the C++ API (docs/job-file.md describes the
// format). A job file names operators by registered kind; a kind only custom worker binaries
// know is named with its role (role = "transform"), and its params are checked by the workers.
// C++ callables need stream_environment.

namespace snapflow {

// What is wrong with a job file and where. Every problem the loader finds names the key (as a
// TOML path such as "operator[1].input", counting [[operator]] tables from 0) and its line.
struct job_file_error {
  std::string file;
  std::string key;         // empty when the problem is not one key (missing file, syntax error)
  std::uint32_t line = 0;  // 1-based; 0 when no line applies (the file could not be read)
  std::string message;

  // "FILE:LINE: key 'KEY': MESSAGE", leaving out the parts that do not apply.
  std::string what() const;

  bool operator==(const job_file_error&) const = default;
};

std::ostream& operator<<(std::ostream& os, const job_file_error& error);

// A loaded job or the first problem found in its file.
class job_file_result {
 public:
  job_file_result(job_graph graph) : state_(std::in_place_index<0>, std::move(graph)) {}
  job_file_result(job_file_error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Asking for the graph of a failed result (or the error of a good one) is a programmer error:
  // std::get throws std::bad_variant_access.
  job_graph& value() & { return std::get<0>(state_); }
  const job_graph& value() const& { return std::get<0>(state_); }
  job_graph&& value() && { return std::get<0>(std::move(state_)); }
  const job_file_error& error() const { return std::get<1>(state_); }

 private:
  std::variant<job_graph, job_file_error> state_;
};

std::ostream& operator<<(std::ostream& os, const job_file_result& result);

// Parses the text of a job file; `source_name` is what errors call the file. The result is a
// validated job graph with a fresh job id, vertices numbered in topological order (inputs first,
// file order among equals) and checkpointing settings derived from [checkpointing]. Never
// throws.
job_file_result parse_job_file(std::string_view text, std::string_view source_name,
                               const operator_registry& registry = operator_registry::builtin());

// Reads `path` and parses it. A missing or unreadable file is an error result, not an exception.
job_file_result load_job_file(const std::filesystem::path& path,
                              const operator_registry& registry = operator_registry::builtin());

}  // namespace snapflow
