#pragma once

#include <memory>
#include <vector>

#include "engine/runtime/stream_operator.hpp"
#include "graph/user_function.hpp"

namespace snapflow {

// Operators that run the C++ callable stored in job_vertex::function (user_* kinds, declared
// through stream_environment). The callable must be of the variant alternative the kind names;
// otherwise create() refuses the vertex. A custom worker binary that receives a job graph over
// the wire (where callables are not serialized) registers its own kinds instead.

class user_map final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit user_map(map_function fn) : fn_(std::move(fn)) {}
  map_function fn_;
};

class user_filter final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit user_filter(filter_function fn) : fn_(std::move(fn)) {}
  filter_function fn_;
};

class user_flat_map final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit user_flat_map(flat_map_function fn) : fn_(std::move(fn)) {}
  flat_map_function fn_;
  std::vector<record> buffer_;
};

// Rewrites record.key with the key selector; the hash edge after it partitions by the new key.
class user_key_by final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit user_key_by(key_function fn) : fn_(std::move(fn)) {}
  key_function fn_;
};

// A keyed process function; its keyed_context is the backend's value state of the current key.
class user_process final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  ~user_process() override;
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;

 private:
  class backend_context;
  explicit user_process(process_function fn);

  process_function fn_;
  std::unique_ptr<backend_context> context_;
  std::vector<record> buffer_;
};

}  // namespace snapflow
