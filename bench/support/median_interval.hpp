#pragma once

#include <vector>

namespace snapflow::bench {

// A distribution-free confidence interval for the median of a sample: the order statistics
// x(k) and x(n-k+1), with k the largest for which P(Binomial(n, 1/2) < k) <= 2.5%, which covers
// the median with probability 1 - 2 P(Binomial(n, 1/2) < k) >= 95%. Under 6 samples no k
// qualifies: the whole range, which covers less (75% for 3); `coverage` says how much.
struct median_interval {
  double low = 0;
  double high = 0;
  double coverage = 0;
};

// For at most a few hundred samples (2^-n must not underflow); empty: all zero.
median_interval interval_of_median(std::vector<double> v);
double median(std::vector<double> v);

}  // namespace snapflow::bench
