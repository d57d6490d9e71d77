// The k largest of a row of logits, in a strict total order: larger value first, then lower id;
// NaN ranks as -inf (never above a number). A drafter's candidates (DFlash2 §11.6) and any other
// top-k over a vocabulary.
#pragma once

#include <cstdint>
#include <vector>

namespace md::kernels {

struct Candidate {
  int32_t id = 0;
  float logit = 0;
};

// Whether `a` ranks before `b` in that order.
bool ranks_before(const Candidate& a, const Candidate& b);

// The min(k, n) best of values[0, n) into out[0 ..], sorted; returns how many.
int64_t top_k(const float* values, int64_t n, int64_t k, Candidate* out);

// The same as a vector.
std::vector<Candidate> top_k(const float* values, int64_t n, int64_t k);

}  // namespace md::kernels
