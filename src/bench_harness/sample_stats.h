// Summary statistics shared by cgn-bench sim and cgn-bench load, so both report a percentile or a
// mean the same way and their numbers can be compared directly.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/clock.h"

namespace cgn::bench {

inline double seconds(Nanos n) {
  return static_cast<double>(n) * 1e-9;
}

// Nearest-rank percentile of a sorted sample (0 when empty).
inline double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) {
    return 0;
  }
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// Arithmetic mean (0 when empty).
inline double mean(const std::vector<double>& v) {
  if (v.empty()) {
    return 0;
  }
  double s = 0;
  for (double x : v) {
    s += x;
  }
  return s / static_cast<double>(v.size());
}

}  // namespace cgn::bench
