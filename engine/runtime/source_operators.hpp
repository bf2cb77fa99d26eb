#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The built-in sources. Both keep their read position in operator state, so a restored source
// resumes exactly after the records the restored checkpoint covers. Neither can change its
// parallelism on restore (each subtask's position only means something for its own split).

// sequence_source: the numbers start .. start+count-1, split over the subtasks
// deterministically: subtask i of p emits start+i, start+i+p, start+i+2p, ... Each record is
// {key = seq % keys, seq, value = seq}: the value is the sequence number itself (not 1), so a
// running sum exposes a lost or duplicated record by its amount, not just by a count.
// Optional rate: records per second per subtask (0 = as fast as the channels take them).
class sequence_source final : public source_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);

  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<emit_result> emit(record_output& out, std::size_t max_records) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  bool snapshot_on_any_thread() const override { return true; }  // a number

  std::int64_t next_seq() const { return next_; }

 private:
  sequence_source(std::int64_t count, std::int64_t keys, std::int64_t rate, std::int64_t start)
      : count_(count), keys_(keys), rate_(rate), start_(start) {}

  std::int64_t count_;
  std::int64_t keys_;
  std::int64_t rate_;
  std::int64_t start_;
  std::int64_t stride_ = 1;
  std::int64_t next_ = 0;  // the next sequence number this subtask emits
  std::int64_t emitted_since_open_ = 0;
  std::chrono::steady_clock::time_point opened_at_{};
};

// line_source: the lines of a text file; subtask i of p takes lines i, i+p, ... Each record is
// {key = FNV-1a of the line, seq = line number (from 0), value = 1, payload = line}.
class line_source final : public source_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);

  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<emit_result> emit(record_output& out, std::size_t max_records) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  bool snapshot_on_any_thread() const override { return true; }  // a number

 private:
  explicit line_source(std::string path) : path_(std::move(path)) {}

  std::string path_;
  std::ifstream in_;
  std::int64_t line_ = 0;  // the number of the next line to read from the file
  std::int64_t next_ = 0;  // the next line this subtask emits (its state)
  std::uint32_t subtask_ = 0;
  std::uint32_t parallelism_ = 1;
};

// FNV-1a, 64 bits: a stable hash of text (std::hash may differ between builds).
std::uint64_t fnv1a_64(std::string_view text);

}  // namespace snapflow
