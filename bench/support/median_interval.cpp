#include "bench/support/median_interval.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace snapflow::bench {

median_interval interval_of_median(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  double below = 0;  // P(Binomial(n, 1/2) < k), summed as k grows
  double term = std::pow(0.5, static_cast<double>(n));  // P(X = 0)
  std::size_t k = 0;
  while (k < n / 2 && below + term <= 0.025) {
    below += term;
    term = term * static_cast<double>(n - k) / static_cast<double>(k + 1);
    ++k;
  }
  if (k == 0) {  // the whole range: x(1) and x(n)
    k = 1;
    below = std::pow(0.5, static_cast<double>(n));
  }
  return {v[k - 1], v[n - k], 1.0 - 2.0 * below};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace snapflow::bench
