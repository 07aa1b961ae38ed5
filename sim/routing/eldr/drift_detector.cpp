#include "sim/routing/eldr/drift_detector.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace eldr {

double similarity_drop_z(long n_ref, double mean_ref, double sd_ref, long n_now, double mean_now)
{
  // A reference with no spread (all similarities equal) would make any change infinitely significant:
  // floor the spread at 1e-6 so the statistic stays finite.
  const double se = std::max(sd_ref, 1e-6) * std::sqrt(1.0 / double(n_now) + 1.0 / double(n_ref));
  return (mean_now - mean_ref) / se;
}

double psi_ratio(const std::vector<long>& reference, const std::vector<long>& now)
{
  const size_t k = reference.size();
  double n_ref = 0, n_now = 0;
  for (size_t i = 0; i < k; ++i) {
    n_ref += double(reference[i]);
    n_now += double(now[i]);
  }
  if (k < 2 || n_ref <= 0 || n_now <= 0)
    return 0;
  // Half a count per cluster on both sides (additive smoothing): an empty cluster gives a finite term.
  double psi = 0;
  for (size_t i = 0; i < k; ++i) {
    const double q = (double(reference[i]) + 0.5) / (n_ref + 0.5 * double(k));
    const double p = (double(now[i]) + 0.5) / (n_now + 0.5 * double(k));
    psi += (p - q) * std::log(p / q);
  }
  return psi / (double(k - 1) * (1.0 / n_now + 1.0 / n_ref));
}

void DriftDetector::Sums::add(int k, double s, long sign)
{
  n += sign;
  sum += double(sign) * s;
  sum_sq += double(sign) * s * s;
  counts[size_t(k)] += sign;
}

DriftDetector::DriftDetector(int clusters, const DriftDetectorOptions& options)
    : clusters_(clusters), opt_(options), last_z_(std::numeric_limits<double>::quiet_NaN()),
      last_psi_ratio_(std::numeric_limits<double>::quiet_NaN())
{
  reset(0);
}

void DriftDetector::reset(double now)
{
  reference_ = Sums{};
  window_    = Sums{};
  reference_.counts.assign(size_t(clusters_), 0);
  window_.counts.assign(size_t(clusters_), 0);
  samples_.clear();
  reference_end_s_ = now + opt_.window_s;
  monitor_from_s_  = reference_end_s_ + opt_.window_s;
}

bool DriftDetector::observe(double now, int nearest, double similarity)
{
  if (nearest < 0 || nearest >= clusters_)
    return false;
  if (now < reference_end_s_) {
    reference_.add(nearest, similarity, +1);
    return false;
  }
  samples_.push_back({now, nearest, similarity});
  window_.add(nearest, similarity, +1);
  while (samples_.front().t < now - opt_.window_s) {
    window_.add(samples_.front().nearest, samples_.front().similarity, -1);
    samples_.pop_front();
  }
  if (now < monitor_from_s_ || reference_.n < opt_.min_samples || window_.n < opt_.min_samples)
    return false;
  const double mean_ref = reference_.sum / double(reference_.n);
  const double var_ref  = std::max(0.0, reference_.sum_sq / double(reference_.n) - mean_ref * mean_ref);
  // The window's sum drifts from rounding as samples come and go; n is exact, the mean is close enough.
  last_z_ = similarity_drop_z(reference_.n, mean_ref, std::sqrt(var_ref), window_.n, window_.sum / double(window_.n));
  last_psi_ratio_ = psi_ratio(reference_.counts, window_.counts);
  ++checks_;
  z_sum_ += last_z_;
  z_sq_ += last_z_ * last_z_;
  r_sum_ += last_psi_ratio_;
  r_sq_ += last_psi_ratio_ * last_psi_ratio_;
  min_z_         = std::min(min_z_, last_z_);
  max_psi_ratio_ = std::max(max_psi_ratio_, last_psi_ratio_);
  if (last_z_ < -opt_.similarity_z || last_psi_ratio_ > opt_.psi_ratio) {
    ++fires_;
    return true;
  }
  return false;
}

static double sd_of(long n, double sum, double sq)
{
  if (n < 2)
    return 0;
  const double m = sum / double(n);
  return std::sqrt(std::max(0.0, sq / double(n) - m * m));
}

double DriftDetector::similarity_z_mean() const
{
  return checks_ ? z_sum_ / double(checks_) : 0;
}
double DriftDetector::similarity_z_sd() const
{
  return sd_of(checks_, z_sum_, z_sq_);
}
double DriftDetector::psi_ratio_mean() const
{
  return checks_ ? r_sum_ / double(checks_) : 0;
}
double DriftDetector::psi_ratio_sd() const
{
  return sd_of(checks_, r_sum_, r_sq_);
}

}  // namespace eldr
