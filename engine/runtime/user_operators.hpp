#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/stream_operator.hpp"
#include "graph/user_function.hpp"

namespace snapflow {

// Operators that run the C++ callable stored in job_vertex::function (user_* kinds, declared
// through stream_environment). The callable must be of the variant alternative the kind names;
// otherwise create() refuses the vertex. A custom worker binary that receives a job graph over
// the wire (where callables are not serialized) registers its own kinds instead. An exception
// thrown by the callable (a typed payload that does not decode, a state of the wrong type)
// fails the task with an error naming the operator; it never escapes the operator.

class user_map final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  user_map(std::string name, map_function fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name_;
  map_function fn_;
};

class user_filter final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  user_filter(std::string name, filter_function fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name_;
  filter_function fn_;
};

class user_flat_map final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  user_flat_map(std::string name, flat_map_function fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name_;
  flat_map_function fn_;
  std::vector<record> buffer_;
};

// Rewrites record.key with the key selector; the hash edge after it partitions by the new key.
class user_key_by final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  user_key_by(std::string name, key_function fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name_;
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
  user_process(std::string name, process_function fn);

  std::string name_;
  process_function fn_;
  std::unique_ptr<keyed_context> context_;
  std::vector<record> buffer_;
};

}  // namespace snapflow
