#pragma once

#include <string>
#include <string_view>

#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The built-in keyed aggregations. Their state lives in the task's keyed_state_backend (value
// state "sum" / "count" of the current key), so it is snapshotted and redistributed by key
// group with everything else.

// Running sum of record.value per key; emits the input record with value = the new sum.
// `state_bytes` (default 0) adds that much opaque operator state to every snapshot, so
// benchmarks can measure checkpoints of a subtask holding N MiB (bench/run-comparison).
// `value_bytes` (default 0) makes every key also hold that many bytes of keyed state, rewritten
// from the record on every record of the key, so benchmarks can measure checkpoints of K keys x
// V bytes of which a share changes (bench/state-comparison). The bytes live in map state
// "value" as the map keys of chunks of up to value_chunk_bytes, each prefixed by its index
// (4 bytes, big-endian): the backend interface holds int64 values, and a map key is the one
// place for arbitrary bytes. The content is a xorshift stream seeded by key and seq, so a
// changed key changes all its bytes and compression cannot shrink them.
class keyed_sum final : public stream_operator {
 public:
  static constexpr std::int64_t max_state_bytes = std::int64_t{1} << 30;
  static constexpr std::int64_t max_value_bytes = std::int64_t{16} << 20;
  static constexpr std::size_t value_chunk_bytes = 4096;
  static constexpr std::string_view value_state = "value";

  keyed_sum() = default;
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override;
  result<void> process(const record& r, record_output& out) override;
  result<operator_snapshot> snapshot(checkpoint_id id) override;
  // Its own state is the ballast alone (the sums are in the keyed backend): a copy of up to
  // 64 KiB is quick.
  bool snapshot_on_any_thread() const override { return ballast_.size() <= 64 * 1024; }

  // The current key's value_bytes content (its chunks in order, without their index), empty
  // when it has none: tests and tools read it back through this.
  static std::string stored_value(const keyed_state_backend& state);

 private:
  keyed_sum(std::int64_t state_bytes, std::int64_t value_bytes)
      : state_bytes_(state_bytes), value_bytes_(value_bytes) {}
  void rewrite_value(const record& r);
  keyed_state_backend* state_ = nullptr;
  std::int64_t state_bytes_ = 0;
  std::int64_t value_bytes_ = 0;
  std::string chunk_;  // scratch for rewrite_value, kept to spare an allocation per record
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
