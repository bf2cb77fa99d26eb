#pragma once

#include <memory>
#include <vector>

#include "graph/execution_vertex.hpp"
#include "graph/job_graph.hpp"

namespace snapflow {

// A job vertex expanded to its subtasks: one execution_vertex per unit of parallelism. The
// vertices are heap-allocated so pointers to them (held by the checkpoint coordinator) stay
// valid for the life of the graph.
class execution_job_vertex {
 public:
  explicit execution_job_vertex(job_vertex vertex, std::uint32_t first_attempt = 0)
      : vertex_(std::move(vertex)) {
    subtasks_.reserve(vertex_.parallelism);
    const std::string name = vertex_.name.empty() ? vertex_.kind : vertex_.name;
    for (std::uint32_t i = 0; i < vertex_.parallelism; ++i)
      subtasks_.push_back(
          std::make_unique<execution_vertex>(subtask_id{vertex_.id, i}, vertex_.parallelism, name,
                                             first_attempt));
  }

  const job_vertex& vertex() const { return vertex_; }
  vertex_id id() const { return vertex_.id; }
  std::uint32_t parallelism() const { return vertex_.parallelism; }
  execution_vertex& subtask(std::uint32_t index) { return *subtasks_.at(index); }
  const execution_vertex& subtask(std::uint32_t index) const { return *subtasks_.at(index); }
  const std::vector<std::unique_ptr<execution_vertex>>& subtasks() const { return subtasks_; }

 private:
  job_vertex vertex_;
  std::vector<std::unique_ptr<execution_vertex>> subtasks_;
};

}  // namespace snapflow
