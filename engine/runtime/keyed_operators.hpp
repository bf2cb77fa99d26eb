#pragma once

#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The built-in keyed aggregations. Their state lives in the task's keyed_state_backend (value
// state "sum" / "count" of the current key), so it is snapshotted and redistributed by key
// group with everything else.

// Running sum of record.value per key; emits the input record with value = the new sum.
// `state_bytes` (default 0) adds that much opaque operator state to every snapshot, so
// benchmarks can measure checkpoints of a subtask holding N MiB (bench/run-comparison).
class keyed_sum final : public stream_operator {
 public:
  static constexpr std::int64_t max_state_bytes = std::int64_t{1} << 30;
  static constexpr std::int64_t max_value_bytes = std::int64_t{1} << 20;

  keyed_sum() = default;
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  // Its own state is the ballast alone (the sums are in the keyed backend): a copy of up to
  // 64 KiB is quick.
  bool snapshot_on_any_thread() const override { return ballast_.size() <= 64 * 1024; }

 private:
  keyed_sum(std::int64_t state_bytes, std::int64_t value_bytes)
      : state_bytes_(state_bytes), value_(static_cast<std::size_t>(value_bytes), '\0') {}
  keyed_state_backend* state_ = nullptr;
  std::int64_t state_bytes_ = 0;
  // value_bytes: the "payload" value state each key holds, refilled per record (reused buffer).
  std::string value_;
  std::string ballast_;  // filled in open(): state_bytes_ bytes, different per subtask
};

// Running count of records per key; emits the input record with value = the new count.
class keyed_count final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // its state is keyed
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;

 private:
  keyed_state_backend* state_ = nullptr;
};

}  // namespace snapflow
