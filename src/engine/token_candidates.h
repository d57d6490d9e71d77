// Candidate tokens for sampling and log-probabilities: the one ordering every selection uses, top-k
// selection without a full sort, and the smallest high-probability prefix that reaches a mass (what
// both top-p and the inverse-CDF draw need) in linear time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace md::engine {

// A token and a score: its logit, or its unnormalised probability once exponentiated.
struct Candidate {
  float value;
  int32_t id;
};

// Higher value first, lower id first among equal values. A strict total order, so every selection
// below has exactly one answer whatever order the candidates arrive in.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// Replaces `out` with the k highest-ranked logits (NaN counts as -inf), in no particular order.
// Costs one pass over the logits plus O(k log k · log(n/k)) for typical inputs; k >= n keeps all.
void select_top_k(std::span<const float> logits, int32_t k, std::vector<Candidate>& out);

struct Prefix {
  std::size_t count;  // number of leading candidates in the prefix
  double mass;        // their summed value
};

namespace detail {
using MassHistogram = std::array<double, 0x1000>;  // MassSelector's mass per bucket of one level
}  // namespace detail

// Finds the smallest high-probability prefix holding a given fraction of the total mass: the top-p
// set, and the token an inverse-CDF draw lands on. Radix-style: a histogram of the float bit
// patterns (monotone for non-negative floats) finds the bucket the boundary lies in, so only that
// bucket is examined further and nothing is ever sorted in full. Keeps scratch memory between
// calls, so a sampler owns one.
//
// Values must be >= 0 with at least one positive; zeros are never part of a result. "Holding"
// means the prefix mass exceeds fraction * total, or reaches it when `inclusive`. When rounding
// leaves every prefix short, the prefix is every positive candidate.
class MassSelector {
 public:
  // Moves the prefix to the front of `candidates`, its lowest-ranked element last, and returns
  // its size and mass. Elements after the prefix are left unspecified.
  Prefix select_prefix(std::span<Candidate> candidates, double fraction, bool inclusive);
  // The lowest-ranked element of the prefix whose mass exceeds fraction * total: the inverse CDF
  // at `fraction` in ranking order. Leaves the candidates untouched.
  Candidate at_fraction(std::span<const Candidate> candidates, double fraction);

 private:
  Prefix select_level(std::span<Candidate> candidates, double target, bool inclusive,
                      std::size_t depth);
  Prefix split_level(std::span<Candidate> candidates, const detail::MassHistogram& mass,
                     double target, bool inclusive, std::size_t depth);

  std::array<std::vector<Candidate>, 3> scratch_;  // per radix level: the boundary bucket
};

}  // namespace md::engine
