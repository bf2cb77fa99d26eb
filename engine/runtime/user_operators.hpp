#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/operator_list_states.hpp"
#include "engine/runtime/stream_operator.hpp"
#include "graph/user_function.hpp"
#include "engine/time/timer_service.hpp"
#include "engine/time/watermark_generator.hpp"

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
// With an on_timer callback (timed_process_function) it has keyed timers too, kept in the
// backend (timer_service): event-time ones fire as the watermark passes them, before the
// watermark goes on; processing-time ones by the system clock.
class user_process final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  ~user_process() override;
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;
  result<void> process_watermark(const watermark& w, record_output& out) override;
  std::optional<std::int64_t> next_processing_time() const override;
  result<void> on_processing_time(std::int64_t now_ms, record_output& out) override;

 private:
  user_process(std::string name, process_function fn, timer_function on_timer);
  result<void> fire(const fired_timer& t, record_output& out);

  std::string name_;
  process_function fn_;
  timer_function on_timer_;  // empty: no timers
  std::unique_ptr<timer_service> timers_;
  std::unique_ptr<keyed_context> context_;
  std::vector<record> buffer_;
};

// A non-keyed process function with operator list state (stateful_process_function): its lists
// are the operator's snapshot and come back on restore, redistributed by their modes
// (operator_list_states). end_input, if given, runs once every input ended.
class user_stateful_process final : public stream_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  result<void> end_input(record_output& out) override;

 private:
  user_stateful_process(std::string name, stateful_process_function fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}

  std::string name_;
  stateful_process_function fn_;
  std::unique_ptr<operator_list_states> states_;  // from open()
  std::vector<record> buffer_;
};

// Event time from each record and watermarks after them (timestamp_assigner): bounded
// out-of-orderness per split, idle splits left out (watermark_generator), emitted every
// `periodic_ms` of processing time when they advanced. Watermarks from its input are dropped
// (it makes its own), but for the end of input's.
class user_timestamps final : public stream_operator {
 public:
  static constexpr std::int64_t periodic_ms = 50;

  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;
  result<void> process_watermark(const watermark& w, record_output& out) override;
  std::optional<std::int64_t> next_processing_time() const override { return next_periodic_ms_; }
  result<void> on_processing_time(std::int64_t now_ms, record_output& out) override;
  bool snapshot_on_any_thread() const override { return true; }

 private:
  user_timestamps(std::string name, timestamp_assigner assigner);

  std::string name_;
  timestamp_assigner assigner_;
  watermark_generator generator_;
  std::int64_t next_periodic_ms_ = 0;
};

}  // namespace snapflow
