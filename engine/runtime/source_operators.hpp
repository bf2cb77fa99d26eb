#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>
#include <string>

#include "engine/runtime/source_splits.hpp"
#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The built-in sources. Both keep their read position in operator state, cut into splits
// (source_splits.hpp): the input is cut into S splits (S = the vertex's max parallelism), split j
// holding the numbers j, j+S, j+2S, ... from the first one, and subtask i of p owns the splits
// j with j % p == i. A restored source resumes exactly after the records the restored
// checkpoint covers, at the same or at another parallelism: the splits move between subtasks.

// sequence_source: the numbers start .. start+count-1, split over the subtasks
// deterministically: a subtask emits the numbers of its splits in ascending order (when p
// divides S, subtask i emits start+i, start+i+p, start+i+2p, ...). Each record is
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
  bool snapshot_on_any_thread() const override { return true; }  // a few numbers

 private:
  sequence_source(std::int64_t count, std::int64_t keys, std::int64_t rate, std::int64_t start)
      : count_(count), keys_(keys), rate_(rate), start_(start) {}

  // The owned splits that are not done, smallest next number on top (a min-heap of
  // {next, position in splits_->owned()}): emitting from the top gives ascending order even
  // when a restore brought splits at different rounds.
  using pending_split = std::pair<std::int64_t, std::size_t>;
  void push_pending(pending_split s);

  std::int64_t count_;
  std::int64_t keys_;
  std::int64_t rate_;
  std::int64_t start_;
  std::optional<source_splits> splits_;
  std::vector<pending_split> pending_;
  std::int64_t emitted_since_open_ = 0;
  std::chrono::steady_clock::time_point opened_at_{};
};

// line_source: the lines of a text file, numbered from 0 and cut into splits by line number;
// each subtask reads the whole file and keeps the lines of its splits. Each record is
// {key = FNV-1a of the line, seq = line number, value = 1, payload = line}.
class line_source final : public source_operator {
 public:
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);

  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<emit_result> emit(record_output& out, std::size_t max_records) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  bool snapshot_on_any_thread() const override { return true; }  // a few numbers

 private:
  explicit line_source(std::string path) : path_(std::move(path)) {}

  std::string path_;
  std::ifstream in_;
  std::int64_t line_ = 0;  // the number of the next line to read from the file
  std::optional<source_splits> splits_;
  // The next line of each split this subtask owns, by split index; -1 for the others.
  std::vector<std::int64_t> next_by_split_;
};

// FNV-1a, 64 bits: a stable hash of text (std::hash may differ between builds).
std::uint64_t fnv1a_64(std::string_view text);

}  // namespace snapflow
