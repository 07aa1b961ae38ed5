#pragma once
// ELDR's drift detector (docs/eldr.md "Refit policies"): decides when the centroids have gone stale,
// from what the router computes anyway for each routed request: its nearest centroid and the cosine
// similarity to it. Two statistics over a sliding window of the last `window_s` seconds, each against
// a reference window taken right after the last fit:
//
//  - similarity drop: z = (mean_now - mean_ref) / (sd_ref * sqrt(1/n_now + 1/n_ref)), the two-sample z
//    of the mean nearest-centroid similarity. Signatures the centroids no longer describe (new
//    sub-topics, a label the fit saw little of) lower it. Fires when z < -similarity_z.
//  - assignment shift: the population-stability index PSI = sum_k (p_k - q_k) ln(p_k / q_k) of the
//    nearest-centroid shares now (p) against the reference (q), both smoothed by half a count per
//    cluster. A label-mix change moves traffic between clusters even when every request still matches
//    its centroid well. PSI's noise grows with K and shrinks with the sample sizes (under no drift its
//    mean is about (K - 1)(1/n_now + 1/n_ref)), so the detector tests the ratio
//    r = PSI / ((K - 1)(1/n_now + 1/n_ref)), about 1 on a stationary stream whatever K and the rate.
//    Fires when r > psi_ratio.
//
// The reference is the first window_s after reset() (a fit); monitoring starts after it, with a window
// that does not overlap the reference (so the two means are independent, as the z assumes). The
// detector therefore cannot fire within 2 x window_s of a reset: that is its cooldown. Thresholds
// were chosen from the statistics' range on stationary streams, not from a router outcome (docs/eldr.md).
// Plain data, no allocation per observation once the window has reached its size.
#include <deque>
#include <vector>

namespace eldr {

struct DriftDetectorOptions {
  double window_s     = 5;   // reference and monitoring window length (simulated seconds)
  double similarity_z = 6;   // fire when the mean similarity's z drops below -similarity_z
  double psi_ratio    = 4;   // fire when PSI exceeds psi_ratio x its stationary expectation
  long min_samples    = 50;  // a window with fewer requests decides nothing
};

class DriftDetector {
 public:
  DriftDetector(int clusters, const DriftDetectorOptions& options);

  // A new fit at `now`: drop the window, start a new reference.
  void reset(double now);
  // One routed request: its nearest centroid and similarity to it. True when drift is detected (the
  // caller refits and calls reset).
  bool observe(double now, int nearest, double similarity);

  // The extremes reached since construction (over checks with enough samples), for the run's report
  // and for choosing thresholds: the lowest similarity z and the highest PSI ratio.
  double min_similarity_z() const { return min_z_; }
  double max_psi_ratio() const { return max_psi_ratio_; }
  long fires() const { return fires_; }
  // Mean and standard deviation of each statistic over all checks so far: the detector's noise, read
  // on a stationary run to choose the thresholds (docs/eldr.md).
  long checks() const { return checks_; }
  double similarity_z_mean() const;
  double similarity_z_sd() const;
  double psi_ratio_mean() const;
  double psi_ratio_sd() const;
  // The statistics of the last check (NaN before the first one).
  double last_similarity_z() const { return last_z_; }
  double last_psi_ratio() const { return last_psi_ratio_; }

 private:
  struct Sample {
    double t;
    int nearest;
    double similarity;
  };
  struct Sums {
    long n     = 0;
    double sum = 0, sum_sq = 0;
    std::vector<long> counts;
    void add(int k, double s, long sign);
  };

  int clusters_;
  DriftDetectorOptions opt_;
  double reference_end_s_ = 0;  // observations before this build the reference
  double monitor_from_s_  = 0;  // the first full monitoring window ends at reference_end_s_ + window_s
  Sums reference_, window_;
  std::deque<Sample> samples_;  // the monitoring window, oldest first
  double min_z_ = 0, max_psi_ratio_ = 0, last_z_, last_psi_ratio_;
  long fires_   = 0;
  long checks_  = 0;
  double z_sum_ = 0, z_sq_ = 0, r_sum_ = 0, r_sq_ = 0;
};

// The two statistics on given sums, exposed for the tests.
double similarity_drop_z(long n_ref, double mean_ref, double sd_ref, long n_now, double mean_now);
double psi_ratio(const std::vector<long>& reference, const std::vector<long>& now);

}  // namespace eldr
