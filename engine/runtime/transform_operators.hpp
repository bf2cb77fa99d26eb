#pragma once

#include <cstdint>
#include <memory>

#include "engine/runtime/stream_operator.hpp"

namespace snapflow {

// The built-in stateless transforms: one small class per kind, grouped here because each is a
// few lines. None has state, so none writes anything into a checkpoint.

// Passes records through, optionally sleeping `delay_us_per_record` before each: a slow stage
// on purpose (tests of alignment and backpressure), never a synchronisation device.
class map_identity final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  map_identity() = default;
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit map_identity(std::int64_t delay_us) : delay_us_(delay_us) {}
  std::int64_t delay_us_ = 0;
};

// `delay_us_per_record` of a vertex (default 0), checked: 0 .. 1 s.
result<std::int64_t> delay_us_per_record_param(const job_vertex& vertex);
// Sleeps `delay_us` (nothing for 0): the per-record cost of a deliberately slow operator.
void delay_record(std::int64_t delay_us);

// value + `value`
class map_add final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit map_add(std::int64_t addend) : addend_(addend) {}
  std::int64_t addend_;
};

// value * `factor`
class map_scale final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit map_scale(std::int64_t factor) : factor_(factor) {}
  std::int64_t factor_;
};

// Keeps records with seq % modulus == remainder (a negative seq uses the mathematical modulo).
class filter_modulo final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  filter_modulo(std::int64_t modulus, std::int64_t remainder)
      : modulus_(modulus), remainder_(remainder) {}
  std::int64_t modulus_;
  std::int64_t remainder_;
};

// One record per whitespace-separated word of the payload: {key = FNV-1a of the word, the
// input's seq, value = 1, payload = word}, so a key_by after it groups equal words.
class flat_map_split_words final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  result<void> process(const record& r, record_output& out) override;
};

// `times` copies of each record.
class flat_map_repeat final : public stream_operator {
 public:
  bool snapshot_on_any_thread() const override { return true; }  // no state
  static result<std::unique_ptr<stream_operator>> create(const job_vertex& vertex);
  result<void> process(const record& r, record_output& out) override;

 private:
  explicit flat_map_repeat(std::int64_t times) : times_(times) {}
  std::int64_t times_;
};

}  // namespace snapflow
