// Balanced assignment as a min-cost flow, solved by successive shortest paths on the K-node cluster
// graph.
//
// The flow network is source -> point (capacity 1, cost 0) -> cluster (capacity 1, cost c[i][k]) ->
// sink (capacity cap[k], cost 0); a min-cost flow of value N is an optimal assignment. Successive
// shortest paths (SSP) adds the points one at a time, each along a shortest augmenting path in the
// residual network; by the classical SSP theorem the flow stays min-cost for its value after every
// augmentation, so the final flow is optimal.
//
// The residual network never needs its point nodes. A point j sitting in cluster a contributes the
// residual path a -> j -> b of cost c[j][b] - c[j][a] ("move j from a to b") for every b != a, and no
// other edge (its source edge is saturated). So the residual network collapses onto the K clusters
// with, for every ordered pair (a, b), the cheapest such move: a K x K table, updated as points join
// a cluster. It keeps the next cheapest move too where known, which takes over when the point the
// cheapest named leaves; only when neither is known is the entry found again from a's points (at 4x
// this cut those passes 4-fold: 190k -> 46k, reading 119M -> 29M list entries). A new point i reaches
// cluster b directly at cost c[i][b]; a cluster below capacity reaches the sink at cost 0. A simple
// path visits each cluster once, so it moves distinct points and collapsing loses nothing: the
// shortest path on the cluster graph is the shortest augmenting path of the full network.
//
// Dijkstra needs non-negative edge costs, so the clusters carry potentials p (the duals): the reduced
// cost of a move edge, w(a, b) + p[a] - p[b], stays >= 0, and after each search p[x] += min(d[x], D),
// where d are the reduced distances and D the distance to the chosen target (the standard update; it
// keeps every residual edge non-negative, including the edges created by the augmentation, which are
// tight). Clusters below capacity always share the sink's potential (complementary slackness), so the
// target is simply the first cluster below capacity that Dijkstra settles. Most points go straight
// to their cheapest cluster (at 64 clusters and 2000 points with 2.5% spare capacity, 90%): that
// search settles one node, and on a sparse instance reads only the point's allowed clusters.
//
// A warm start (the K-means step's, from the previous iteration's duals) places every point where
// those duals put it at least reduced cost, takes out the points that break the invariants above
// (Solver::warm_start) and inserts only those: at 64 clusters and 2000 points, about a fifth.
//
// Per point: O(K^2) for the search plus O(K) per move on the path (and O(N/K) per table entry found
// again). With integer-valued costs every quantity is an integer-valued double, so the result is
// exactly optimal; the tests compare it with Boost.Graph's min-cost flow on such instances.
#include "sim/routing/eldr/balanced_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

namespace eldr {
namespace {

// The cheapest move of a point from cluster a to cluster b: c[point][b] - c[point][a], ties by point.
struct Move {
  double delta;
  int point;  // -1: no point of a can move to b
  bool before(const Move& o) const { return o.point < 0 || delta < o.delta || (delta == o.delta && point < o.point); }
};

// Sparse: only the pairs of the allowed lists may be used (their moves alone enter the table, and a
// search that reaches no cluster with room reports the instance infeasible); costs are read from the
// lists. Dense: from the N x K matrix.
template <bool Sparse> class Solver {
 public:
  Solver(const double* cost, const AllowedLists* lists, int n, int k, std::span<const int> capacity)
      : c_(cost), lists_(lists), n_(n), k_(k), cap_(capacity.begin(), capacity.end()), size_(size_t(k), 0),
        cluster_(size_t(n), -1), pos_(size_t(n), -1), own_(size_t(n), 0.0), pot_(size_t(k), 0.0),
        best_(size_t(k) * size_t(k), Move{0, -1}), second_(best_.size(), Move{0, -1}), dirty_(best_.size(), 0),
        known_(best_.size(), 1), stale_(size_t(k), 0), members_(size_t(k)), dist_(size_t(k)), parent_(size_t(k)),
        via_(size_t(k)), settled_(size_t(k))
  {
  }

  // False when point i cannot be added (Sparse only).
  bool insert(int i)
  {
    // Potential of the new point: makes its cheapest reduced edge exactly 0, the others >= 0. Only
    // its allowed clusters count.
    double pi = -std::numeric_limits<double>::infinity();
    for_allowed(i, [&](int b, double c) { pi = std::max(pi, pot_[size_t(b)] - c); });
    if (Sparse && pi == -std::numeric_limits<double>::infinity())
      return false;  // no allowed cluster
    // The first cluster Dijkstra settles: the lowest index of least reduced cost. Most points stop
    // there (it has room): then the search below, O(K) per cluster it settles, is not needed.
    int first    = -1;
    double reach = 0, at = 0;
    for_allowed(i, [&](int b, double c) {
      const double d = c + pi - pot_[size_t(b)];
      if (first < 0 || d < reach) {
        first = b;
        reach = d;
        at    = c;
      }
    });
    if (size_[size_t(first)] < cap_[size_t(first)]) {
      if (reach != 0.0)  // (rounding: pi made it 0 up to an ulp) every potential moves by it, as below
        for (int b = 0; b < k_; ++b)
          pot_[size_t(b)] += reach;
      ++size_[size_t(first)];
      join(i, first, at);
      return true;
    }
    if constexpr (Sparse)  // (a pair not allowed is at +infinity, as its cost would be)
      std::fill(dist_.begin(), dist_.end(), std::numeric_limits<double>::infinity());
    for_allowed(i, [&](int b, double c) { dist_[size_t(b)] = c + pi - pot_[size_t(b)]; });
    std::fill(parent_.begin(), parent_.end(), -1);
    std::fill(settled_.begin(), settled_.end(), 0);
    // Dense Dijkstra over the K clusters (K is small: an O(K) scan beats a heap). The next cluster to
    // settle, the first of least distance among the unsettled, is found in the pass that relaxes.
    int target = -1;
    int a      = 0;
    for (int b = 1; b < k_; ++b)
      if (dist_[size_t(b)] < dist_[size_t(a)])
        a = b;
    for (;;) {
      if (Sparse && !(dist_[size_t(a)] < std::numeric_limits<double>::infinity()))
        return false;
      settled_[size_t(a)] = 1;
      if (size_[size_t(a)] < cap_[size_t(a)]) {
        target = a;
        break;
      }
      int next = -1;
      refresh(a);
      const Move* ba = best_.data() + size_t(a) * size_t(k_);
      for (int b = 0; b < k_; ++b) {
        if (settled_[size_t(b)])
          continue;
        if (const Move* e = ba + b; e->point >= 0) {
          const double nd = dist_[size_t(a)] + e->delta + pot_[size_t(a)] - pot_[size_t(b)];
          if (nd < dist_[size_t(b)]) {
            dist_[size_t(b)]   = nd;
            parent_[size_t(b)] = a;
            via_[size_t(b)]    = e->point;
          }
        }
        if (next < 0 || dist_[size_t(b)] < dist_[size_t(next)])
          next = b;
      }
      a = next;
    }
    // Settled clusters have their final distance (<= reach), the others at least reach. A point that
    // went straight to its cheapest cluster has reach 0 and leaves the potentials as they were.
    reach = dist_[size_t(target)];
    if (reach != 0.0) {
      for (int b = 0; b < k_; ++b)
        pot_[size_t(b)] += settled_[size_t(b)] ? dist_[size_t(b)] : reach;
    }
    // Augment: walk back from the target, moving each point one cluster along the path.
    ++size_[size_t(target)];
    int x = target;
    while (parent_[size_t(x)] >= 0) {
      const int a = parent_[size_t(x)], j = via_[size_t(x)];
      leave(j);
      join(j, x, cost_at(j, x));
      x = a;
    }
    join(i, x, cost_at(i, x));
    return true;
  }

  // Starts from the duals `warm` of a nearby instance instead of an empty assignment (Sparse only):
  // each point goes where its reduced cost under them is least, and the points that break the
  // solver's invariants are taken out into `out`, to be inserted as usual. What stays is a min-cost
  // assignment of its points: every point at a least reduced cost (each move edge >= 0), a cluster
  // below capacity at the common potential P, the others at most P. So P is the least potential of a
  // cluster below capacity, a cluster above it is lowered to it and loses the points that then prefer
  // another, and a cluster over capacity loses its excess. Lowering a cluster only makes it less
  // attractive to the other points, so nothing cascades. False when a point has no allowed cluster.
  bool warm_start(std::span<const double> warm, std::vector<int>& out)
  {
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<int> at(size_t(n_), -1), count(size_t(k_), 0);
    std::vector<double> regret(static_cast<size_t>(n_)), at_cost(static_cast<size_t>(n_));
    for (int i = 0; i < n_; ++i) {
      int b       = -1;
      double best = inf, second = inf, cost = 0;
      for_allowed(i, [&](int q, double c) {
        const double r = c - warm[size_t(q)];
        if (b < 0 || r < best) {
          second = best;
          b      = q;
          best   = r;
          cost   = c;
        } else {
          second = std::min(second, r);
        }
      });
      if (b < 0)
        return false;
      at[size_t(i)]      = b;
      at_cost[size_t(i)] = cost;
      regret[size_t(i)]  = second - best;
      ++count[size_t(b)];
    }
    // The excess of a cluster over capacity: the points that lose least elsewhere (they are the
    // ones that the shortest paths would move out).
    std::vector<std::vector<int>> over(static_cast<size_t>(k_));
    for (int i = 0; i < n_; ++i)
      if (count[size_t(at[size_t(i)])] > cap_[size_t(at[size_t(i)])])
        over[size_t(at[size_t(i)])].push_back(i);
    for (int b = 0; b < k_; ++b) {
      auto& m = over[size_t(b)];
      if (m.empty())
        continue;
      const size_t excess = size_t(count[size_t(b)] - cap_[size_t(b)]);
      std::partial_sort(m.begin(), m.begin() + std::ptrdiff_t(excess), m.end(), [&](int x, int y) {
        return regret[size_t(x)] < regret[size_t(y)] || (regret[size_t(x)] == regret[size_t(y)] && x < y);
      });
      for (size_t e = 0; e < excess; ++e)
        at[size_t(m[e])] = -1;
      count[size_t(b)] = cap_[size_t(b)];
    }
    double p   = inf;
    double top = -inf;
    for (int b = 0; b < k_; ++b) {
      top = std::max(top, warm[size_t(b)]);
      if (count[size_t(b)] < cap_[size_t(b)])
        p = std::min(p, warm[size_t(b)]);
    }
    if (p == inf)
      p = top;  // every cluster full: no sink edge, any P above all potentials
    for (int b = 0; b < k_; ++b)
      pot_[size_t(b)] = std::min(warm[size_t(b)], p);
    for (int i = 0; i < n_; ++i) {
      const int b = at[size_t(i)];
      if (b < 0 || !(warm[size_t(b)] > p))
        continue;
      // b was lowered: does the point still have a least reduced cost there?
      const double own = at_cost[size_t(i)] - pot_[size_t(b)];
      bool stays       = true;
      for_allowed(i, [&](int q, double c) { stays &= !(c - pot_[size_t(q)] < own); });
      if (!stays)
        at[size_t(i)] = -1;
    }
    for (int i = 0; i < n_; ++i) {
      const int b = at[size_t(i)];
      if (b < 0) {
        out.push_back(i);
        continue;
      }
      ++size_[size_t(b)];
      join(i, b, at_cost[size_t(i)]);
    }
    return true;
  }

  BalancedAssignment result() const
  {
    BalancedAssignment r;
    r.cluster = cluster_;
    for (int i = 0; i < n_; ++i)
      r.total_cost += own_[size_t(i)];
    r.duals = pot_;
    return r;
  }

 private:
  const double* row(int i) const { return c_ + size_t(i) * size_t(k_); }

  // Point j's cost in cluster x, one it may use (Sparse: found in its list, which is increasing).
  double cost_at(int j, int x) const
  {
    if constexpr (Sparse) {
      const int* allowed = lists_->allowed.data();
      const int *from = allowed + lists_->first[size_t(j)], *to = allowed + lists_->first[size_t(j) + 1];
      return lists_->cost[size_t(std::lower_bound(from, to, x) - allowed)];
    } else {
      return row(j)[x];
    }
  }

  // m enters the two cheapest moves (best, second) of one table entry, both known.
  static void rank(const Move& m, Move& best, Move& second)
  {
    if (m.before(best)) {
      second = best;
      best   = m;
    } else if (m.before(second)) {
      second = m;
    }
  }

  // The cheapest moves out of a whose point has left, found again from a's points. A settled
  // cluster's relaxation reads its whole row, so they are all found in one pass that reads each point's
  // costs once (one pass per entry read the points' rows K times over, a cache miss per entry). Each
  // entry is the first of a's moves to b in (delta, point) order, whatever order the points are read in;
  // the second ones are found with them (Sparse: also where only the second was unknown, at no extra
  // reads), so the next departure of an entry's point promotes its second instead of dirtying it.
  void refresh(int a)
  {
    if (!stale_[size_t(a)])
      return;
    stale_[size_t(a)] = 0;
    const size_t at   = size_t(a) * size_t(k_);
    Move* ba          = best_.data() + at;
    Move* sa          = second_.data() + at;
    char* da          = dirty_.data() + at;
    char* ka          = known_.data() + at;
    for (int b = 0; b < k_; ++b) {
      da[b] |= Sparse && !ka[b];  // (redo: the same best, and its second)
      if (da[b])
        ba[b] = sa[b] = Move{0, -1};
    }
    if constexpr (Sparse) {  // each point's list, short, against the dirty marks
      for (int j : members_[size_t(a)]) {
        const double ca = own_[size_t(j)];
        for_allowed(j, [&](int b, double c) {
          if (da[b])
            rank(Move{c - ca, j}, ba[b], sa[b]);
        });
      }
      for (int b = 0; b < k_; ++b)
        ka[b] |= da[b];
      std::fill(da, da + k_, 0);
      return;
    }
    cols_.clear();
    for (int b = 0; b < k_; ++b)
      if (da[b]) {
        da[b] = 0;
        ka[b] = 1;
        cols_.push_back(b);
      }
    for (int j : members_[size_t(a)]) {
      const double* cj = row(j);
      const double ca  = own_[size_t(j)];
      for (int b : cols_)
        rank(Move{cj[b] - ca, j}, ba[b], sa[b]);
    }
  }

  // f(b, cost) for every cluster b that point i may use, in index order.
  template <class F> void for_allowed(int i, F f) const
  {
    if constexpr (Sparse) {
      const int* allowed = lists_->allowed.data();
      const double* cost = lists_->cost.data();
      for (int e = lists_->first[size_t(i)]; e < lists_->first[size_t(i) + 1]; ++e)
        f(allowed[e], cost[e]);
    } else {
      const double* ci = row(i);
      for (int b = 0; b < k_; ++b)
        f(b, ci[b]);
    }
  }

  // Point j joins cluster x at cost cx (its first placement or a move): its moves out of x may be the
  // cheapest. A table of the cheapest moves, kept up to date, replaced K^2 heaps of every move ever
  // published (with lazy deletion), whose upkeep was most of the solver's time.
  void join(int j, int x, double cx)
  {
    cluster_[size_t(j)] = x;
    own_[size_t(j)]     = cx;
    pos_[size_t(j)]     = int(members_[size_t(x)].size());
    members_[size_t(x)].push_back(j);
    const size_t at = size_t(x) * size_t(k_);
    Move* bx        = best_.data() + at;
    Move* sx        = second_.data() + at;
    const char* dx  = dirty_.data() + at;
    char* kx        = known_.data() + at;
    for_allowed(j, [&](int b, double c) {
      const Move m{c - cx, j};
      if (b == x || dx[b])
        return;
      if (m.before(bx[b])) {  // the old best, the least of the others, becomes the second
        sx[b] = bx[b];
        bx[b] = m;
        kx[b] = 1;
      } else if (kx[b] && m.before(sx[b])) {
        sx[b] = m;
      }
    });
  }

  // Point j leaves its cluster: a cheapest move that was its is taken over by the second where that
  // is known (then the second is not), else found again when next needed; a second that was its is
  // no longer known.
  void leave(int j)
  {
    const int x                = cluster_[size_t(j)];
    auto& m                    = members_[size_t(x)];
    const int p                = pos_[size_t(j)];
    m[size_t(p)]               = m.back();
    pos_[size_t(m[size_t(p)])] = p;
    m.pop_back();
    const size_t at = size_t(x) * size_t(k_);
    for_allowed(j, [&](int b, double) {
      const size_t e = at + size_t(b);
      if (best_[e].point == j) {
        if (known_[e]) {
          best_[e]  = second_[e];
          known_[e] = 0;
        } else {
          dirty_[e]         = 1;
          stale_[size_t(x)] = 1;
        }
      } else if (second_[e].point == j) {
        known_[e] = 0;
      }
    });
  }

  const double* c_;            // Dense: the N x K costs
  const AllowedLists* lists_;  // Sparse: the allowed pairs and their costs
  int n_, k_;
  std::vector<int> cap_, size_, cluster_;
  std::vector<int> pos_;     // per point, its index in members_[cluster]
  std::vector<double> own_;  // per point, its cost in its cluster
  std::vector<double> pot_;
  std::vector<Move> best_;                 // [a * K + b]: the cheapest move from a to b
  std::vector<Move> second_;               // [a * K + b]: the next cheapest, where known_
  std::vector<char> dirty_;                // [a * K + b]: best_ must be found again (its point left)
  std::vector<char> known_;                // [a * K + b]: second_ holds the next cheapest move
  std::vector<char> stale_;                // per cluster: a dirty_ entry in its row
  std::vector<int> cols_;                  // scratch: refresh's columns (Dense)
  std::vector<std::vector<int>> members_;  // per cluster, its points
  std::vector<double> dist_;
  std::vector<int> parent_, via_;
  std::vector<char> settled_;
};

}  // namespace

int balanced_capacity(int n, int k)
{
  if (k <= 0)
    throw std::invalid_argument("balanced_capacity: k must be positive, got " + std::to_string(k));
  return n <= 0 ? 0 : (n + k - 1) / k;
}

BalancedAssignment balanced_assignment(std::span<const double> cost, int n, int k, std::span<const int> capacity)
{
  if (n < 0 || k <= 0)
    throw std::invalid_argument("balanced_assignment: need n >= 0 and k > 0, got n = " + std::to_string(n) +
                                ", k = " + std::to_string(k));
  if (cost.size() != size_t(n) * size_t(k))
    throw std::invalid_argument("balanced_assignment: cost has " + std::to_string(cost.size()) +
                                " entries, expected n * k = " + std::to_string(size_t(n) * size_t(k)));
  if (capacity.size() != size_t(k))
    throw std::invalid_argument("balanced_assignment: " + std::to_string(capacity.size()) +
                                " capacities for k = " + std::to_string(k) + " clusters");
  long total = 0;
  for (int c : capacity) {
    if (c < 0)
      throw std::invalid_argument("balanced_assignment: negative capacity " + std::to_string(c));
    total += c;
  }
  if (total < n)
    throw std::invalid_argument("balanced_assignment: capacities sum to " + std::to_string(total) +
                                ", fewer than the " + std::to_string(n) + " points");
  for (double v : cost)
    if (!std::isfinite(v))
      throw std::invalid_argument("balanced_assignment: cost matrix has a non-finite entry");

  // Points enter in index order. The order does not change the optimum, only the work, and
  // inserting by decreasing regret (second-cheapest minus cheapest cost) measured no faster.
  Solver<false> s(cost.data(), nullptr, n, k, capacity);
  for (int i = 0; i < n; ++i)
    s.insert(i);
  return s.result();
}

namespace {

void check_shapes(std::span<const double> cost, int n, int k, std::span<const int> capacity)
{
  if (n < 0 || k <= 0 || cost.size() != size_t(n) * size_t(k) || capacity.size() != size_t(k))
    throw std::invalid_argument("balanced_assignment_allowed: shapes do not match");
}

void check_lists(int n, int k, const AllowedLists& lists)
{
  const auto& first = lists.first;
  if (n < 0 || first.size() != size_t(n) + 1 || first[0] != 0 || size_t(first[size_t(n)]) > lists.allowed.size())
    throw std::invalid_argument("balanced_assignment_allowed: the allowed lists do not match the points");
  for (int i = 0; i < n; ++i) {
    if (first[size_t(i) + 1] < first[size_t(i)] || size_t(first[size_t(i) + 1]) > lists.allowed.size())
      throw std::invalid_argument("balanced_assignment_allowed: the allowed lists' offsets decrease or pass their end");
    for (int e = first[size_t(i)]; e < first[size_t(i) + 1]; ++e) {
      const int b = lists.allowed[size_t(e)];
      if (b < 0 || b >= k || (e > first[size_t(i)] && b <= lists.allowed[size_t(e) - 1]))
        throw std::invalid_argument(
            "balanced_assignment_allowed: the allowed lists are not increasing cluster indices");
    }
  }
}

// The lists' costs from the matrix: a copy of `lists` (empty: found, the finite entries) with them.
AllowedLists with_costs(std::span<const double> cost, int n, int k, const AllowedLists* lists)
{
  AllowedLists r;
  if (lists) {
    r.first.assign(lists->first.begin(), lists->first.end());
    r.allowed.assign(lists->allowed.begin(), lists->allowed.begin() + lists->first[size_t(n)]);
    r.cost.resize(r.allowed.size());
    for (int i = 0; i < n; ++i)
      for (int e = r.first[size_t(i)]; e < r.first[size_t(i) + 1]; ++e)
        r.cost[size_t(e)] = cost[size_t(i) * size_t(k) + size_t(r.allowed[size_t(e)])];
    return r;
  }
  r.first.reserve(size_t(n) + 1);
  for (int i = 0; i < n; ++i) {
    const double* ci = cost.data() + size_t(i) * size_t(k);
    for (int b = 0; b < k; ++b) {
      if (ci[b] < std::numeric_limits<double>::infinity()) {
        r.allowed.push_back(b);
        r.cost.push_back(ci[b]);
      } else if (ci[b] != std::numeric_limits<double>::infinity()) {
        throw std::invalid_argument("balanced_assignment_allowed: cost matrix has a NaN or -infinity");
      }
    }
    r.first.push_back(int(r.allowed.size()));
  }
  return r;
}

// The sparse solve on lists with their costs, started from the duals `warm` when given (K entries;
// empty: from nothing).
std::optional<BalancedAssignment> solve_lists(int n, int k, std::span<const int> capacity, const AllowedLists& lists,
                                              std::span<const double> warm)
{
  long total = 0;
  for (int c : capacity)
    total += c;
  if (total < n)
    return std::nullopt;
  Solver<true> s(nullptr, &lists, n, k, capacity);
  if (!warm.empty()) {
    std::vector<int> rest;
    if (!s.warm_start(warm, rest))
      return std::nullopt;
    for (int i : rest)
      if (!s.insert(i))
        return std::nullopt;
    return s.result();
  }
  for (int i = 0; i < n; ++i)
    if (!s.insert(i))
      return std::nullopt;
  return s.result();
}

void check_warm(int k, std::span<const double> warm)
{
  if (warm.size() != size_t(k))
    throw std::invalid_argument("balanced_assignment_lists: " + std::to_string(warm.size()) +
                                " duals for k = " + std::to_string(k) + " clusters");
  for (double v : warm)
    if (!std::isfinite(v))
      throw std::invalid_argument("balanced_assignment_lists: a dual is not finite");
}

}  // namespace

std::optional<BalancedAssignment> balanced_assignment_allowed(std::span<const double> cost, int n, int k,
                                                              std::span<const int> capacity)
{
  check_shapes(cost, n, k, capacity);
  return solve_lists(n, k, capacity, with_costs(cost, n, k, nullptr), {});
}

std::optional<BalancedAssignment> balanced_assignment_allowed(std::span<const double> cost, int n, int k,
                                                              std::span<const int> capacity, const AllowedLists& lists)
{
  check_lists(n, k, lists);
  check_shapes(cost, n, k, capacity);
  return solve_lists(n, k, capacity, with_costs(cost, n, k, &lists), {});
}

std::optional<BalancedAssignment> balanced_assignment_lists(int n, int k, std::span<const int> capacity,
                                                            const AllowedLists& lists, std::span<const double> warm)
{
  if (k <= 0 || capacity.size() != size_t(k))
    throw std::invalid_argument("balanced_assignment_lists: shapes do not match");
  check_lists(n, k, lists);
  if (lists.cost.size() < size_t(lists.first[size_t(n)]))
    throw std::invalid_argument("balanced_assignment_lists: the lists have fewer costs than allowed pairs");
  for (int e = 0; e < lists.first[size_t(n)]; ++e)
    if (!std::isfinite(lists.cost[size_t(e)]))
      throw std::invalid_argument("balanced_assignment_lists: an allowed pair's cost is not finite");
  if (!warm.empty())
    check_warm(k, warm);
  return solve_lists(n, k, capacity, lists, warm);
}

BalancedAssignment balanced_assignment(std::span<const double> cost, int n, int k)
{
  if (k <= 0)
    return balanced_assignment(cost, n, k, std::span<const int>{});  // throws the usual message
  const std::vector<int> cap(size_t(k), balanced_capacity(n, k));
  return balanced_assignment(cost, n, k, cap);
}

namespace {

// wa[b] = min(wa[b], ci[b] - ci[a] - margin) for every b (an AVX2 clone where the CPU has it: the
// same IEEE operations, min exact): the bulk of is_unique_optimum at 256 clusters.
__attribute__((target_clones("avx2", "default"))) void cheapest_moves(const double* ci, int a, int k, double margin,
                                                                      double* wa)
{
  const double ca = ci[a];
  for (int b = 0; b < k; ++b) {
    const double m = ci[b] - ca - margin;
    wa[b]          = m < wa[b] ? m : wa[b];
  }
}

}  // namespace

bool is_unique_optimum(std::span<const double> cost, int n, int k, std::span<const int> capacity,
                       std::span<const int> cluster, double margin)
{
  if (n < 0 || k <= 0 || cost.size() != size_t(n) * size_t(k) || capacity.size() != size_t(k) ||
      cluster.size() != size_t(n))
    throw std::invalid_argument("is_unique_optimum: shapes do not match");
  const double inf = std::numeric_limits<double>::infinity();
  const int t      = k;  // the sink
  std::vector<int> size(size_t(k), 0);
  for (int a : cluster) {
    if (a < 0 || a >= k)
      throw std::invalid_argument("is_unique_optimum: cluster index out of range");
    ++size[size_t(a)];
  }
  for (int a = 0; a < k; ++a)
    if (size[size_t(a)] > capacity[size_t(a)])
      return false;  // infeasible
  // w[a][b]: the cheapest move of a point from a to b, less the margin; the sink edges cost 0. (A
  // point's own cluster b = a is taken too, in one branchless pass, and put back to +infinity after.)
  std::vector<double> w(size_t(k + 1) * size_t(k + 1), inf);
  for (int i = 0; i < n; ++i) {
    const int a = cluster[size_t(i)];
    cheapest_moves(cost.data() + size_t(i) * size_t(k), a, k, margin, w.data() + size_t(a) * size_t(k + 1));
  }
  for (int a = 0; a < k; ++a)
    w[size_t(a) * size_t(k + 1) + size_t(a)] = inf;
  for (int a = 0; a < k; ++a) {
    if (size[size_t(a)] < capacity[size_t(a)])
      w[size_t(a) * size_t(k + 1) + size_t(t)] = 0;
    if (size[size_t(a)] > 0)
      w[size_t(t) * size_t(k + 1) + size_t(a)] = 0;
  }
  // Potentials from a virtual root at distance 0 to every node; a relaxation in round K + 1 means a
  // negative cycle. A cycle a -> sink -> a is an edge and its own reverse, not a different
  // assignment: a node's sink edges both cost 0 and carry no margin, so it never counts.
  // A cycle among the nodes' last relaxations is a negative cycle too (the predecessor graph of
  // Bellman-Ford is a tree until one forms): checked after each round, it ends most refusals in a
  // few rounds instead of K + 2 (O(K^3) at 64 clusters).
  std::vector<double> dist(size_t(k + 1), 0.0);
  std::vector<int> parent(size_t(k + 1), -1);
  std::vector<char> mark(size_t(k + 1));
  for (int round = 0; round <= k + 1; ++round) {
    bool changed = false;
    for (int a = 0; a <= k; ++a) {
      const double* wa = w.data() + size_t(a) * size_t(k + 1);
      for (int b = 0; b <= k; ++b)
        if (wa[b] < inf && dist[size_t(a)] + wa[b] < dist[size_t(b)]) {
          dist[size_t(b)]   = dist[size_t(a)] + wa[b];
          parent[size_t(b)] = a;
          changed           = true;
        }
    }
    if (!changed)
      return true;
    // Walk up from each node, marking the walk (1) until a finished node (2), the root or the walk.
    std::fill(mark.begin(), mark.end(), 0);
    for (int v = 0; v <= k; ++v) {
      int x = v;
      while (x >= 0 && mark[size_t(x)] == 0) {
        mark[size_t(x)] = 1;
        x               = parent[size_t(x)];
      }
      if (x >= 0 && mark[size_t(x)] == 1)
        return false;
      for (x = v; x >= 0 && mark[size_t(x)] == 1; x = parent[size_t(x)])
        mark[size_t(x)] = 2;
    }
  }
  return false;
}

}  // namespace eldr
