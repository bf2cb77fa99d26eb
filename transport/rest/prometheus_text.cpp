#include "transport/rest/prometheus_text.hpp"

#include <cassert>
#include <cstdio>

namespace snapflow::rest {

namespace {

// Microseconds as seconds with no trailing zeros ("0.00005", "2.5", "10"): the `le` values
// must be stable strings, since Prometheus matches bucket series by them.
std::string seconds(std::int64_t us) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6f", static_cast<double>(us) / 1e6);
  std::string s(buffer);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void write_prometheus_histogram(std::ostream& os, std::string_view name, std::string_view help,
                                const std::vector<histogram_series>& series) {
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
  for (const auto& s : series) {
    assert(s.histogram != nullptr);
    const latency_histogram& h = *s.histogram;
    const std::string prefix = s.labels.empty() ? "" : s.labels + ",";
    for (std::size_t i = 0; i < latency_histogram::bounds_us.size(); ++i)
      os << name << "_bucket{" << prefix << "le=\"" << seconds(latency_histogram::bounds_us[i])
         << "\"} " << h.cumulative_count(i) << '\n';
    os << name << "_bucket{" << prefix << "le=\"+Inf\"} " << h.count() << '\n';
    const std::string braces = s.labels.empty() ? "" : "{" + s.labels + "}";
    os << name << "_sum" << braces << ' ' << seconds(h.sum_us()) << '\n';
    os << name << "_count" << braces << ' ' << h.count() << '\n';
  }
}

}  // namespace snapflow::rest
