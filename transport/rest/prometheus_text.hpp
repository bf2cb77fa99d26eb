#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/latency_histogram.hpp"

namespace snapflow::rest {

// One labelled series of a histogram family: `labels` is the inside of the braces without
// them (`job_id="a",stage="b"`), already escaped (prometheus_label_value).
struct histogram_series {
  std::string labels;
  const latency_histogram* histogram = nullptr;
};

// Writes a Prometheus histogram family in the text exposition format (version 0.0.4): one
// HELP and TYPE line, then per series the cumulative `<name>_bucket{...,le="<seconds>"}` lines
// ending with le="+Inf", `<name>_sum` (seconds) and `<name>_count`. Durations are kept in
// microseconds and written in seconds, Prometheus's base unit.
void write_prometheus_histogram(std::ostream& os, std::string_view name, std::string_view help,
                                const std::vector<histogram_series>& series);

// A label value with backslash, double quote and newline escaped as the format requires.
std::string prometheus_label_value(std::string_view value);

}  // namespace snapflow::rest
