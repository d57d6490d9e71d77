#include "kernels/top_k.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace md::kernels {

namespace {

// The ranking key: NaN counts as -inf, so that it never displaces a number.
double rank_value(float value) {
  return std::isnan(value) ? -std::numeric_limits<double>::infinity() : value;
}

}  // namespace

bool ranks_before(const Candidate& a, const Candidate& b) {
  const double va = rank_value(a.logit);
  const double vb = rank_value(b.logit);
  if (va != vb) return va > vb;
  return a.id < b.id;  // ids are distinct: the order is total even with NaN and -inf
}

int64_t top_k(const float* values, int64_t n, int64_t k, Candidate* out) {
  const int64_t keep = std::max<int64_t>(0, std::min(k, n));
  if (keep == 0) return 0;
  // One pass keeping a sorted list of the best: almost every id fails the comparison with the
  // current last, so for a small k this is a scan of the values.
  int64_t size = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Candidate c{static_cast<int32_t>(i), values[i]};
    if (size == keep && !ranks_before(c, out[size - 1])) continue;
    Candidate* at = std::upper_bound(out, out + size, c, ranks_before);
    if (size < keep) ++size;
    std::move_backward(at, out + size - 1, out + size);
    *at = c;
  }
  return size;
}

std::vector<Candidate> top_k(const float* values, int64_t n, int64_t k) {
  std::vector<Candidate> best(static_cast<std::size_t>(std::max<int64_t>(0, std::min(k, n))));
  best.resize(static_cast<std::size_t>(top_k(values, n, k, best.data())));
  return best;
}

}  // namespace md::kernels
