#include "state/gossip/phi.h"

#include <algorithm>
#include <cmath>

namespace cgn::gossip {

double phi_normal(double elapsed, double mean, double std_dev) {
  const double y = (elapsed - mean) / std_dev;
  const double e = std::exp(-y * (1.5976 + 0.070566 * y * y));
  if (elapsed > mean) {
    return -std::log10(e / (1.0 + e));
  }
  return -std::log10(1.0 - 1.0 / (1.0 + e));
}

void PhiDetector::add(double interval) {
  intervals_.push_back(interval);
  sum_ += interval;
  sum_sq_ += interval * interval;
  while (intervals_.size() > options_.window) {
    const double old = intervals_.front();
    intervals_.pop_front();
    sum_ -= old;
    sum_sq_ -= old * old;
  }
}

void PhiDetector::heartbeat(Nanos now) {
  if (last_ < 0) {
    // Prior: two samples around the first interval (mean = first, deviation = first / 4).
    const double f = static_cast<double>(options_.first_interval);
    add(f - f / 4);
    add(f + f / 4);
  } else {
    const Nanos gap = now - last_;
    if (gap > 0 && gap <= options_.max_interval) {
      add(static_cast<double>(gap));
    }
  }
  last_ = std::max(last_, now);
}

double PhiDetector::mean_ns() const {
  return intervals_.empty() ? 0.0 : sum_ / static_cast<double>(intervals_.size());
}

double PhiDetector::std_dev_ns() const {
  if (intervals_.empty()) {
    return 0.0;
  }
  const double n = static_cast<double>(intervals_.size());
  const double mean = sum_ / n;
  return std::sqrt(std::max(0.0, sum_sq_ / n - mean * mean));
}

double PhiDetector::phi(Nanos now) const {
  if (last_ < 0) {
    return 0.0;
  }
  const double elapsed = static_cast<double>(std::max<Nanos>(0, now - last_));
  const double mean = mean_ns() + static_cast<double>(options_.acceptable_pause);
  const double sd = std::max(std_dev_ns(), static_cast<double>(options_.min_std_dev));
  return phi_normal(elapsed, mean, sd);
}

bool PhiDetector::available(Nanos now) const {
  // phi grows with the silence and is log10(2) at the (paused) mean: no need to evaluate it
  // before then (the detector runs for every member every round).
  constexpr double kPhiAtMean = 0.30103;
  if (last_ < 0 ||
      (options_.threshold > kPhiAtMean &&
       static_cast<double>(now - last_) <= mean_ns() + static_cast<double>(options_.acceptable_pause))) {
    return true;
  }
  return phi(now) < options_.threshold;
}

void PhiDetector::reset() {
  intervals_.clear();
  sum_ = 0;
  sum_sq_ = 0;
  last_ = -1;
}

}  // namespace cgn::gossip
