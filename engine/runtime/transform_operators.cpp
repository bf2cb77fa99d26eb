#include "engine/runtime/transform_operators.hpp"

#include <cctype>
#include <chrono>
#include <thread>

#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/source_operators.hpp"

namespace snapflow {

result<std::int64_t> delay_us_per_record_param(const job_vertex& vertex) {
  constexpr std::int64_t max_delay_us = 1'000'000;
  auto delay = int_param(vertex, "delay_us_per_record", 0);
  if (!delay) return delay.err();
  if (*delay < 0 || *delay > max_delay_us)
    return error{"operator '" + vertex.uid + "': delay_us_per_record must be between 0 and " +
                 std::to_string(max_delay_us) + " (got " + std::to_string(*delay) + ")"};
  return *delay;
}

void delay_record(std::int64_t delay_us) {
  if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
}

result<std::unique_ptr<stream_operator>> map_identity::create(const job_vertex& vertex) {
  auto delay = delay_us_per_record_param(vertex);
  if (!delay) return delay.err();
  return std::unique_ptr<stream_operator>(new map_identity(*delay));
}

result<void> map_identity::process(const record& r, record_output& out) {
  delay_record(delay_us_);
  out.emit(r);
  return success();
}

result<std::unique_ptr<stream_operator>> map_add::create(const job_vertex& vertex) {
  auto v = int_param(vertex, "value");
  if (!v) return v.err();
  return std::unique_ptr<stream_operator>(new map_add(*v));
}

result<void> map_add::process(const record& r, record_output& out) {
  record copy = r;
  copy.value += addend_;
  out.emit(std::move(copy));
  return success();
}

result<std::unique_ptr<stream_operator>> map_scale::create(const job_vertex& vertex) {
  auto v = int_param(vertex, "factor");
  if (!v) return v.err();
  return std::unique_ptr<stream_operator>(new map_scale(*v));
}

result<void> map_scale::process(const record& r, record_output& out) {
  record copy = r;
  copy.value *= factor_;
  out.emit(std::move(copy));
  return success();
}

result<std::unique_ptr<stream_operator>> filter_modulo::create(const job_vertex& vertex) {
  auto modulus = int_param(vertex, "modulus");
  if (!modulus) return modulus.err();
  auto remainder = int_param(vertex, "remainder", 0);
  if (!remainder) return remainder.err();
  if (*modulus < 1) return error{"modulus must be >= 1"};
  if (*remainder < 0 || *remainder >= *modulus) return error{"remainder must be in [0, modulus)"};
  return std::unique_ptr<stream_operator>(new filter_modulo(*modulus, *remainder));
}

result<void> filter_modulo::process(const record& r, record_output& out) {
  std::int64_t m = r.seq % modulus_;
  if (m < 0) m += modulus_;
  if (m == remainder_) out.emit(r);
  return success();
}

result<void> flat_map_split_words::process(const record& r, record_output& out) {
  const std::string& text = r.payload;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i) {
      std::string word = text.substr(i, j - i);
      const std::uint64_t key = fnv1a_64(word);
      out.emit(record{key, r.seq, 1, std::move(word)});
    }
    i = j;
  }
  return success();
}

result<std::unique_ptr<stream_operator>> flat_map_repeat::create(const job_vertex& vertex) {
  auto times = int_param(vertex, "times");
  if (!times) return times.err();
  if (*times < 0 || *times > 1'000'000) return error{"times must be in [0, 1000000]"};
  return std::unique_ptr<stream_operator>(new flat_map_repeat(*times));
}

result<void> flat_map_repeat::process(const record& r, record_output& out) {
  for (std::int64_t i = 0; i < times_; ++i) out.emit(r);
  return success();
}

}  // namespace snapflow
