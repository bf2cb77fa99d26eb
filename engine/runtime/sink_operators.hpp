#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/runtime/sink_file.hpp"
#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The line the file sinks write for a record: "key,seq,value", plus ",payload" when the
// payload is not empty. For keyed_sum -> sink that is "key,seq,sum".
std::string format_record_line(const record& r);
// The same line appended to `out` (no allocation once `out` has room).
void append_record_line(std::string& out, const record& r);

// Prints each record's line to standard output (lines of concurrent subtasks never interleave
// within a line).
class print_sink final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  result<void> process(const record& r, record_output& out) override;
};

// Drops every record: lets a benchmark tell the pipeline's cost from a real sink's. With
// `delay_us_per_record` it sleeps before each record: a deliberately slow sink that keeps every
// buffer upstream full (backpressure benchmarks), never a synchronisation device.
class discard_sink final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  discard_sink() = default;
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit discard_sink(std::int64_t delay_us) : delay_us_(delay_us) {}
  std::int64_t delay_us_ = 0;
};

// At-least-once file sink: appends lines to "<path>/part-<job>-<uid>-<subtask>" (job: the job
// id, file_safe_job; uid: file_safe_uid); a barrier flushes,
// and the file is fsynced before the checkpoint is acknowledged. After a restore the records
// since the checkpoint are written again (duplicates, never losses).
class file_sink final : public stream_operator {
 public:
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  result<void> end_input(record_output& out) override;

 private:
  sink_file file_;
  std::int64_t delay_us_ = 0;  // delay_us_per_record: a deliberately slow sink
};

}  // namespace snapflow
