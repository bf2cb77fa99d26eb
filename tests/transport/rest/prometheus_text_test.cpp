// The Prometheus histogram text and the latency histogram behind it.
#include <catch2/catch.hpp>

#include <sstream>

#include "transport/rest/prometheus_text.hpp"

using namespace snapflow;
using namespace snapflow::rest;

TEST_CASE("latency histogram: a value lands in the first bucket whose bound holds it") {
  latency_histogram h;
  h.observe(50);          // exactly on the first bound: le="0.00005"
  h.observe(51);          // just above: le="0.0001"
  h.observe(-7);          // clock skew: counts as 0, first bucket
  h.observe(1'000);       // on the 1 ms bound
  h.observe(60'000'000);  // beyond the last bound: only +Inf
  CHECK(h.count() == 5);
  CHECK(h.sum_us() == 50 + 51 + 0 + 1'000 + 60'000'000);
  CHECK(h.cumulative_count(0) == 2);  // 50 and the clamped -7
  CHECK(h.cumulative_count(1) == 3);  // + 51
  CHECK(h.cumulative_count(3) == 3);  // nothing in (100, 500]
  CHECK(h.cumulative_count(4) == 4);  // + 1000 at le=1 ms
  CHECK(h.cumulative_count(latency_histogram::bounds_us.size() - 1) == 4);
}

TEST_CASE("Prometheus histogram text: buckets, +Inf, sum and count in seconds") {
  latency_histogram a;
  a.observe(300);
  a.observe(2'000);
  latency_histogram empty;
  std::ostringstream os;
  write_prometheus_histogram(os, "x_seconds", "help text",
                             {{"job=\"j\",stage=\"s\"", &a}, {"", &empty}});
  const std::string text = os.str();
  CHECK_THAT(text, Catch::StartsWith("# HELP x_seconds help text\n# TYPE x_seconds histogram\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{job=\"j\",stage=\"s\",le=\"0.00005\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{job=\"j\",stage=\"s\",le=\"0.00025\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{job=\"j\",stage=\"s\",le=\"0.0005\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{job=\"j\",stage=\"s\",le=\"0.001\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{job=\"j\",stage=\"s\",le=\"0.0025\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{job=\"j\",stage=\"s\",le=\"10\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{job=\"j\",stage=\"s\",le=\"+Inf\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_sum{job=\"j\",stage=\"s\"} 0.0023\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_count{job=\"j\",stage=\"s\"} 2\n"));
  // A series without labels has no empty braces on _sum and _count.
  CHECK_THAT(text, Catch::Contains("x_seconds_bucket{le=\"+Inf\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_sum 0\n"));
  CHECK_THAT(text, Catch::Contains("x_seconds_count 0\n"));

  // Every line is a comment or `name{labels} value`, and each series' buckets never decrease
  // and end with le="+Inf" equal to _count.
  std::istringstream lines(text);
  std::string line;
  std::uint64_t previous = 0;
  int buckets = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("#", 0) == 0) continue;
    const auto space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    if (line.find("_bucket{") == std::string::npos) continue;
    const std::uint64_t value = std::stoull(line.substr(space + 1));
    if (line.find("le=\"0.00005\"") != std::string::npos) previous = 0;
    CHECK(value >= previous);
    previous = value;
    ++buckets;
  }
  CHECK(buckets == 2 * static_cast<int>(latency_histogram::bounds_us.size() + 1));
}

TEST_CASE("Prometheus label values escape backslash, quote and newline") {
  CHECK(prometheus_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(prometheus_label_value("plain") == "plain");
}
