#pragma once
// Spherical K-means over L2-normalised expert signatures: ELDR's offline clustering (docs/design.md
// section 1) and the online refit's warm-started re-run. Similarity is the dot product of unit
// vectors, a centroid is the normalised mean of its points, and the objective is the total cosine
// distance sum_i (1 - x_i . c_{a(i)}).
//
// Each iteration assigns, then recomputes the centroids, and the fit stops when the assignment no
// longer changes. The `balanced` variant assigns by the exact capacity-constrained optimum (each
// cluster at most ceil(N/K) points; balanced_assignment.hpp), so every decode worker's profile
// stands for an equal share of the traffic; `vanilla` (argmax) is the ablation. Both steps never
// increase the objective, so the fit converges or stops at max_iterations.
//
// Input rows must be unit vectors (|norm - 1| <= 1e-3) or all-zero. A zero row (a request whose
// signature is empty, e.g. every expert it activated has IDF 0) has cosine 0 to every centroid: it
// is assigned like any point (distance 1 everywhere, so it fills spare capacity), never seeds a
// cluster and adds nothing to a centroid. Anything else (wrong norm, NaN, all rows zero) throws
// std::invalid_argument.
#include "sim/routing/eldr/balanced_assignment.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace eldr {

// Row-major dense float matrix: row r is values[r * cols, (r + 1) * cols). Signatures are dense
// (a prompt of a few hundred tokens activates most experts of a layer), so no sparse format.
struct DenseMatrix {
  int rows = 0;
  int cols = 0;
  std::vector<float> values;

  DenseMatrix() = default;
  DenseMatrix(int r, int c) : rows(r), cols(c), values(size_t(r) * size_t(c), 0.0f) {}
  std::span<float> row(int r) { return {values.data() + size_t(r) * size_t(cols), size_t(cols)}; }
  std::span<const float> row(int r) const { return {values.data() + size_t(r) * size_t(cols), size_t(cols)}; }
};

// A read-only view of contiguous row-major floats, so a caller's buffer (e.g. the refit window)
// need not be copied into a DenseMatrix.
struct DenseMatrixView {
  const float* data = nullptr;
  int rows          = 0;
  int cols          = 0;

  DenseMatrixView() = default;
  DenseMatrixView(const float* d, int r, int c) : data(d), rows(r), cols(c) {}
  DenseMatrixView(const DenseMatrix& m) : data(m.values.data()), rows(m.rows), cols(m.cols) {}
  std::span<const float> row(int r) const { return {data + size_t(r) * size_t(cols), size_t(cols)}; }
};

enum class KMeansVariant {
  balanced,  // exact assignment with every cluster at most ceil(N/K) points (the ELDR default)
  vanilla,   // each point to its most similar centroid; an empty cluster keeps its centroid
};

struct KMeansOptions {
  KMeansVariant variant = KMeansVariant::balanced;
  int max_iterations    = 50;
  uint64_t seed         = 1;  // k-means++ draws from Rng(seed, "kmeans.init")
  // false: KMeansResult::objective is left 0. A fit stopped by max_iterations would otherwise compute
  // the dots of its last centroids just for it (the online refit only takes the centroids).
  bool objective = true;
  // Compute only the dots an assignment can depend on, once each point has one with every centroid
  // (bounds from how far a centroid moved since; balanced_kmeans.cpp): the same result as computing
  // them all (false: the plain fit, for the tests and benches that compare the two).
  bool bounds = true;
};

struct KMeansResult {
  DenseMatrix centroids;        // K x D unit vectors; centroid k is decode worker k's profile
  std::vector<int> assignment;  // point -> cluster in [0, K)
  int iterations   = 0;         // assignment steps run (the last one found nothing to change when converged)
  bool converged   = false;     // the assignment stopped changing within max_iterations
  double objective = 0;         // sum_i (1 - x_i . centroid[assignment[i]]) for the returned centroids
                                // (0 when options.objective is false)
};

// What a warm fit leaves for the next warm fit on a sliding window (the online refit, whose windows
// share most of their points): each point's dots with the centroids, exact or with a bound on their
// distance from the exact ones, and the last assignment's duals. The next fit takes them over for the
// points it shares (recognised by id and checked by a hash of the row), so it need not compare every
// point with every centroid again. Only the work changes: a fit with a carry returns exactly what it
// returns without one.
struct WindowCarry {
  long first = 0;  // set by the caller before each fit: the id of point row 0 (row r is id first + r)

  // Reorders the carried centroids as the caller reorders the fit's: centroid j goes to slot[j]
  // (nothing when nothing is carried; throws std::invalid_argument when slot has the wrong size).
  void reorder(std::span<const int> slot);

  // Filled by the fit (empty: nothing carried).
  long rows_first = 0;
  DenseMatrix centroids;  // the fit's returned centroids
  std::vector<uint64_t> row_hash;
  std::vector<float> sim;                      // rows x K
  std::vector<int> version;                    // rows x K: the centroid version of the entry (-1: none)
  std::vector<std::vector<double>> travelled;  // per centroid, per version: the distance moved before it
  std::vector<double> duals;                   // the last balanced assignment's, if any

  // Work arrays the fits reuse, kept at their largest (contents meaningless between fits): at 256
  // clusters a refit's N x K costs alone are 16 MB, which a fit would otherwise allocate and clear.
  struct Buffers {
    std::vector<double> cost;    // the balanced step's N x K costs
    AllowedLists lists, merged;  // its sparse instance's allowed pairs, and their scratch
  } buffers;
};

// A point's checks (unit or all-zero) and its hash, as a warm fit makes them: a caller that fits
// overlapping windows of the same rows (the online refit) checks each row once and hands the checks
// to every fit, which then reads a row only for its dots.
struct PointCheck {
  bool zero     = false;  // all-zero
  uint64_t hash = 0;      // of the row's bits (a carried row is taken over only if it is the same)
};
// Throws std::invalid_argument unless `row` is a unit vector (|norm - 1| <= 1e-3) or all-zero.
PointCheck check_point(std::span<const float> row);

// K clusters from k-means++ seeds on cosine distance. N < K is allowed: clusters left without a
// point keep their seed (which then duplicates another seed). Throws std::invalid_argument on bad
// input (see the top of this file), K <= 0, N = 0 or max_iterations <= 0.
KMeansResult fit_spherical_kmeans(DenseMatrixView points, int k, const KMeansOptions& options = {});

// The same iterations warm-started from given centroids (K = initial.rows, rows need not be unit:
// they are normalised; a zero row is rejected): the online refit's re-run on its sliding window,
// started from the current profiles. options.seed is unused. With a carry (and options.bounds),
// the fit starts from the previous fit's dots and leaves its own there. `checked` (empty: the fit
// checks the rows itself) is check_point of each row, the same result with no pass over the rows.
KMeansResult fit_spherical_kmeans_warm(DenseMatrixView points, DenseMatrixView initial,
                                       const KMeansOptions& options = {}, WindowCarry* carry = nullptr,
                                       std::span<const PointCheck> checked = {});

// slot[j] = the index in `old_centroids` that new centroid j takes over, a permutation maximising
// sum_j cos(new_j, old_slot[j]) (an exact K x K assignment), so that a refit moves each decode
// worker's profile as little as possible. Both sets must have the same shape.
std::vector<int> match_centroids(DenseMatrixView old_centroids, DenseMatrixView new_centroids);

namespace detail {
// out[i * k + c] = points.row(i) . centroids.row(c). Bit-identical whether or not the CPU has
// AVX2/FMA (the portable path emulates the same fused operations in the same order), so fits are
// reproducible across machines. Exposed for the tests.
enum class DotKernel { best, portable };
void dot_products(DenseMatrixView points, DenseMatrixView centroids, std::span<float> out,
                  DotKernel kernel = DotKernel::best);
}  // namespace detail

}  // namespace eldr
