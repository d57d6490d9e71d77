#include "engine/token_candidates.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace md::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float nan_as_neg_inf(float v) {
  return std::isnan(v) ? kNegInf : v;
}

// Below this size a range is sorted and scanned: cheaper than more partitioning passes.
constexpr std::size_t kSortBelow = 32;
// Below this size quickselect beats a histogram pass (whose fixed cost is clearing its buckets).
constexpr std::size_t kQuickselectBelow = 1024;

// Radix levels over the float bits: exponent and 3 mantissa bits (a bucket spans a factor of at
// most 1.125), then 12 more bits, then the last 8, after which a bucket holds one value only.
struct RadixLevel {
  int shift;
  uint32_t mask;
};
constexpr std::array<RadixLevel, 3> kLevels = {{{20, 0x7FF}, {8, 0xFFF}, {0, 0xFF}}};

uint32_t bucket_of(float value, const RadixLevel& level) {
  return (std::bit_cast<uint32_t>(value) >> level.shift) & level.mask;
}

const Candidate& median_of_three(const Candidate& a, const Candidate& b, const Candidate& c) {
  if (ranks_before(a, b)) {
    if (ranks_before(b, c)) return b;
    return ranks_before(a, c) ? c : a;
  }
  if (ranks_before(a, c)) return a;
  return ranks_before(b, c) ? c : b;
}

// Moves the elements of [lo, hi) that rank before c[hi - 1] (the pivot) to the front, then the
// pivot right after them; returns the pivot's index and adds the moved elements' mass to `mass`.
// Branch-free Lomuto: the comparison is unpredictable, so a branch would mispredict half the time.
std::size_t partition_with_mass(std::span<Candidate> c, std::size_t lo, std::size_t hi,
                                double& mass) {
  const Candidate pivot = c[hi - 1];
  std::size_t store = lo;
  for (std::size_t i = lo; i + 1 < hi; ++i) {
    const Candidate x = c[i];
    const bool before = ranks_before(x, pivot);
    c[i] = c[store];
    c[store] = x;
    mass += before ? static_cast<double>(x.value) : 0.0;
    store += before ? 1 : 0;
  }
  std::swap(c[store], c[hi - 1]);
  return store;
}

bool reaches(double mass, double target, bool inclusive) {
  return inclusive ? mass >= target : mass > target;
}

// Sorts [lo, hi) and walks it: the prefix ends at the first element whose addition reaches target.
// Short of it (rounding), the prefix ends at the last positive element: zeros sort last.
Prefix finish_by_sorting(std::span<Candidate> c, std::size_t lo, std::size_t hi, double acc,
                         double target, bool inclusive) {
  std::sort(c.begin() + static_cast<std::ptrdiff_t>(lo),
            c.begin() + static_cast<std::ptrdiff_t>(hi), ranks_before);
  std::size_t end = std::max<std::size_t>(lo, 1);
  for (std::size_t i = lo; i < hi; ++i) {
    acc += c[i].value;
    if (reaches(acc, target, inclusive)) return {i + 1, acc};
    if (c[i].value > 0.0f) end = i + 1;
  }
  return {end, acc};
}

// Quickselect weighted by mass: partitions around a pivot and continues only on the side that
// holds the boundary. Expected linear time.
Prefix quickselect_prefix(std::span<Candidate> c, double target, bool inclusive) {
  // Weighted quickselect. Invariant: c[0, lo) are the lo best candidates with mass `acc`, which
  // does not reach target, and the answer's last element lies in [lo, hi).
  std::size_t lo = 0;
  std::size_t hi = c.size();
  double acc = 0.0;
  // Median-of-three makes quadratic behaviour implausible; the budget makes it impossible.
  int budget = 2 * std::bit_width(c.size()) + 8;
  while (hi - lo > kSortBelow && budget-- > 0) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const Candidate pivot = median_of_three(c[lo], c[mid], c[hi - 1]);
    // Move the pivot to the end of the range (find it among the three sampled positions).
    for (std::size_t at : {lo, mid}) {
      if (c[at].id == pivot.id) std::swap(c[at], c[hi - 1]);
    }
    double upper = 0.0;
    const std::size_t p = partition_with_mass(c, lo, hi, upper);
    if (reaches(acc + upper, target, inclusive)) {
      hi = p;  // the answer is among the candidates ranked before the pivot
      continue;
    }
    acc += upper + static_cast<double>(c[p].value);
    if (reaches(acc, target, inclusive)) return {p + 1, acc};
    lo = p + 1;
  }
  return finish_by_sorting(c, lo, hi, acc, target, inclusive);
}

// Mass per bucket; returns the total, summed in bucket order (from the highest) so that it agrees
// with the running sums of the boundary search to the last bit.
double fill_histogram(std::span<const Candidate> c, const RadixLevel& level,
                      detail::MassHistogram& mass) {
  std::fill_n(mass.begin(), level.mask + 1, 0.0);
  for (const Candidate& x : c) mass[bucket_of(x.value, level)] += x.value;
  double total = 0.0;
  for (uint32_t b = level.mask + 1; b-- > 0;) total += mass[b];
  return total;
}

struct Boundary {
  uint32_t bucket;    // the bucket that holds the prefix's last element
  double mass_above;  // mass of all higher buckets
};

Boundary find_boundary(const detail::MassHistogram& mass, const RadixLevel& level, double target,
                       bool inclusive) {
  double acc = 0.0;
  uint32_t lowest = 0;
  for (uint32_t b = level.mask + 1; b-- > 0;) {
    if (mass[b] == 0.0) continue;  // empty, or zeros only
    if (reaches(acc + mass[b], target, inclusive)) return {b, acc};
    acc += mass[b];
    lowest = b;
  }
  return {lowest, acc - mass[lowest]};  // short by rounding: the prefix is everything
}

double total_mass(std::span<const Candidate> c) {
  double total = 0.0;
  for (const Candidate& x : c) total += x.value;
  return total;
}

}  // namespace

void select_top_k(std::span<const float> logits, int32_t k, std::vector<Candidate>& out) {
  out.clear();
  const std::size_t n = logits.size();
  const std::size_t keep = std::min(n, static_cast<std::size_t>(std::max(k, 0)));
  if (keep == 0) return;
  // A large k is cheaper as one nth_element over everything than as a heap with many updates.
  if (keep * 16 >= n) {
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back({nan_as_neg_inf(logits[i]), static_cast<int32_t>(i)});
    }
    std::nth_element(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(keep - 1), out.end(),
                     ranks_before);
    out.resize(keep);
    return;
  }
  // Heap of the best `keep` so far with the worst at the front. Later ids lose ties, so a new
  // logit enters only when strictly greater than the worst value: one compare for most tokens.
  out.reserve(keep);
  for (std::size_t i = 0; i < keep; ++i) {
    out.push_back({nan_as_neg_inf(logits[i]), static_cast<int32_t>(i)});
  }
  std::make_heap(out.begin(), out.end(), ranks_before);
  float worst = out.front().value;
  for (std::size_t i = keep; i < n; ++i) {
    const float v = logits[i];
    if (!(v > worst)) continue;  // also skips NaN
    std::pop_heap(out.begin(), out.end(), ranks_before);
    out.back() = {v, static_cast<int32_t>(i)};
    std::push_heap(out.begin(), out.end(), ranks_before);
    worst = out.front().value;
  }
}

Prefix MassSelector::select_level(std::span<Candidate> c, double target, bool inclusive,
                                  std::size_t depth) {
  if (c.size() < kQuickselectBelow || depth == kLevels.size()) {
    return quickselect_prefix(c, target, inclusive);
  }
  detail::MassHistogram mass;
  fill_histogram(c, kLevels[depth], mass);
  return split_level(c, mass, target, inclusive, depth);
}

Prefix MassSelector::split_level(std::span<Candidate> c, const detail::MassHistogram& mass,
                                 double target, bool inclusive, std::size_t depth) {
  const RadixLevel& level = kLevels[depth];
  const Boundary boundary = find_boundary(mass, level, target, inclusive);
  // One branch-free pass: higher buckets compact (stably) to the front, the boundary bucket goes
  // to scratch; both writes trail the read position, so working in place is safe.
  std::vector<Candidate>& side = scratch_[depth];
  side.resize(c.size());
  std::size_t above = 0;
  std::size_t inside = 0;
  for (const Candidate x : c) {
    const uint32_t b = bucket_of(x.value, level);
    c[above] = x;
    above += b > boundary.bucket ? 1 : 0;
    side[inside] = x;
    inside += b == boundary.bucket ? 1 : 0;
  }
  const Prefix rest =
      select_level({side.data(), inside}, target - boundary.mass_above, inclusive, depth + 1);
  std::copy_n(side.begin(), rest.count, c.begin() + static_cast<std::ptrdiff_t>(above));
  return {above + rest.count, boundary.mass_above + rest.mass};
}

Prefix MassSelector::select_prefix(std::span<Candidate> c, double fraction, bool inclusive) {
  if (c.size() < kQuickselectBelow) {
    return quickselect_prefix(c, fraction * total_mass(c), inclusive);
  }
  detail::MassHistogram mass;
  const double total = fill_histogram(c, kLevels[0], mass);
  return split_level(c, mass, fraction * total, inclusive, 0);
}

Candidate MassSelector::at_fraction(std::span<const Candidate> c, double fraction) {
  std::vector<Candidate>& side = scratch_[0];
  if (c.size() < kQuickselectBelow) {
    side.assign(c.begin(), c.end());
    const double target = fraction * total_mass(side);
    return side[quickselect_prefix(side, target, false).count - 1];
  }
  // As select_level's first level, but only the boundary bucket is copied out.
  detail::MassHistogram mass;
  const double target = fraction * fill_histogram(c, kLevels[0], mass);
  const Boundary boundary = find_boundary(mass, kLevels[0], target, false);
  side.resize(c.size());
  std::size_t inside = 0;
  for (const Candidate x : c) {
    side[inside] = x;
    inside += bucket_of(x.value, kLevels[0]) == boundary.bucket ? 1 : 0;
  }
  const Prefix rest = select_level({side.data(), inside}, target - boundary.mass_above, false, 1);
  return side[rest.count - 1];
}

}  // namespace md::engine
