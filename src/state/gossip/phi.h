// Phi-accrual failure detector (Hayashibara et al. 2004, in the form Akka and Cassandra use):
// heartbeat inter-arrival times are modelled as a normal distribution over a sliding window, and
// phi = -log10(P(a heartbeat arrives later than now)). A member is suspected dead when phi exceeds
// the threshold. Unlike chitchat's detector (reference: elapsed / mean), phi here is a real
// probability, so the threshold keeps its meaning when heartbeats are irregular (sampled digests).
//
// Pure: time is passed in. Not thread-safe; owned by the gossip core.
#pragma once

#include <cstddef>
#include <deque>

#include "core/clock.h"

namespace cgn::gossip {

struct PhiOptions {
  double threshold = 8.0;                         // phi above this = dead (P = 1e-8)
  size_t window = 100;                            // inter-arrival samples kept
  Nanos min_std_dev = 200 * kNanosPerMilli;       // floor on the deviation (regular heartbeats)
  Nanos acceptable_pause = 600 * kNanosPerMilli;  // added to the mean: tolerated hiccups
  Nanos first_interval = 1000 * kNanosPerMilli;   // prior before real samples
  Nanos max_interval = 10 * kNanosPerSecond;      // longer gaps are not sampled
};

class PhiDetector {
 public:
  explicit PhiDetector(const PhiOptions& options = {}) : options_(options) {}

  // A heartbeat arrived at `now`.
  void heartbeat(Nanos now);
  // phi at `now`; 0 before the first heartbeat.
  double phi(Nanos now) const;
  bool available(Nanos now) const;
  // Forget every sample (a member declared dead starts afresh when it returns).
  void reset();

  double mean_ns() const;
  double std_dev_ns() const;
  size_t samples() const { return intervals_.size(); }
  Nanos last() const { return last_; }

 private:
  void add(double interval);

  PhiOptions options_;
  std::deque<double> intervals_;
  double sum_ = 0;
  double sum_sq_ = 0;
  Nanos last_ = -1;
};

// -log10 of the normal tail beyond `elapsed` for (mean, std_dev), by the logistic approximation
// Akka uses (accurate to ~1e-3 in phi over the useful range).
double phi_normal(double elapsed, double mean, double std_dev);

}  // namespace cgn::gossip
