// Pearson's chi-square goodness-of-fit test for the sampler's distribution tests: the statistic,
// and the critical value computed from the chi-square distribution itself (regularised incomplete
// gamma function, inverted by bisection) rather than an approximation.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace md::engine::testing {

// Q(a, x) = Γ(a, x) / Γ(a): series for x < a + 1, Lentz's continued fraction otherwise
// (Numerical Recipes §6.2). Accurate to ~1e-14 relative, far more than a test needs.
inline double upper_incomplete_gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a;
    double sum = term;
    for (int n = 1; n < 10000 && std::fabs(term) > std::fabs(sum) * 1e-16; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - std::exp(log_prefix) * sum;
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1.0 - a;
  double c = 1.0 / kTiny;
  double d = 1.0 / b;
  double h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

// P(X > x) for X ~ chi-square with df degrees of freedom.
inline double chi_square_upper_tail(double x, int df) {
  return upper_incomplete_gamma_q(0.5 * df, 0.5 * x);
}

// The x with P(X > x) = p, by bisection (the tail is monotone in x).
inline double chi_square_critical(int df, double p) {
  double lo = 0.0;
  double hi = 10.0 * df + 200.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (chi_square_upper_tail(mid, df) > p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

struct GoodnessOfFit {
  double statistic = 0.0;
  int df = 0;
  double critical = 0.0;         // at the chosen significance level
  int64_t impossible_draws = 0;  // draws of tokens whose expected probability is 0
};

// Compares counts of draws with the expected probabilities. Tokens with expected probability 0
// are left out of the statistic and counted separately: they must never be drawn at all.
inline GoodnessOfFit chi_square_test(const std::vector<int64_t>& observed,
                                     const std::vector<double>& expected, double significance) {
  int64_t n = 0;
  for (int64_t o : observed) n += o;
  GoodnessOfFit fit;
  int categories = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] <= 0.0) {
      fit.impossible_draws += observed[i];
      continue;
    }
    const double e = expected[i] * static_cast<double>(n);
    const double diff = static_cast<double>(observed[i]) - e;
    fit.statistic += diff * diff / e;
    ++categories;
  }
  fit.df = categories - 1;
  fit.critical = chi_square_critical(fit.df, significance);
  return fit;
}

}  // namespace md::engine::testing
