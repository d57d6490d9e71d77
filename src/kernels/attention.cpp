#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/dtype.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace md::kernels {

namespace {

float dot(const float* q, const float* k, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += q[i] * k[i];
  return sum;
}
float dot(const float* q, const uint16_t* k, int64_t n) {
  return dot_bf16(k, q, n);
}

// out += p · v, element by element (one rounded product and one rounded sum each, on every path).
void add_scaled(float p, const float* v, float* out, int64_t n) {
  for (int64_t d = 0; d < n; ++d) out[d] += p * v[d];
}
void add_scaled(float p, const uint16_t* v, float* out, int64_t n) {
#if defined(__x86_64__)
  static const bool avx2 = active_isa_level() != Isa::kScalar;
  if (avx2) return add_scaled_bf16_avx2(p, v, out, n);
#endif
  for (int64_t d = 0; d < n; ++d) out[d] += p * bf16_to_f32(v[d]);
}

// Keys and values in runs of `run_rows` rows `stride` apart (the last run may be shorter): one
// run for a contiguous cache, one per block for kernels::KvCache. One function for both, so they
// sum in the same order and agree bitwise.
template <typename T>
struct Runs {
  const T* const* keys;
  const T* const* values;
  int64_t run_rows;
  int64_t stride;
};

// f(t, row) for t in [0, n_keys), row = the run's row of key t (keys or values).
template <typename T, typename F>
void for_each_row(const T* const* runs, int64_t run_rows, int64_t stride, int64_t n_keys, F f) {
  for (int64_t first = 0, r = 0; first < n_keys; first += run_rows, ++r) {
    const T* row = runs[r];
    const int64_t last = std::min(n_keys, first + run_rows);
    // The next run is elsewhere in memory: start fetching it now, as the hardware prefetcher
    // does not cross into it before its first miss.
    if (last < n_keys) {
      const auto* next = reinterpret_cast<const char*>(runs[r + 1]);
      for (int line = 0; line < 8; ++line) __builtin_prefetch(next + line * 64);
    }
    for (int64_t t = first; t < last; ++t, row += stride) f(t, row);
  }
}

template <typename T>
void attend_impl(const float* q, const Runs<T>& runs, int64_t n_keys, int64_t head_dim, float scale,
                 float* scores, float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  for_each_row(runs.keys, runs.run_rows, runs.stride, n_keys, [&](int64_t t, const T* key) {
    scores[t] = dot(q, key, head_dim) * scale;
    max_score = std::max(max_score, scores[t]);
  });
  double total = 0;
  for (int64_t t = 0; t < n_keys; ++t) {
    scores[t] = std::exp(scores[t] - max_score);
    total += scores[t];
  }
  float inv_total = static_cast<float>(1.0 / total);
  std::fill(out, out + head_dim, 0.0f);
  for_each_row(runs.values, runs.run_rows, runs.stride, n_keys, [&](int64_t t, const T* value) {
    add_scaled(scores[t] * inv_total, value, out, head_dim);
  });
}

template <typename T>
void attend_run(const float* q, const T* keys, const T* values, int64_t n_keys, int64_t stride,
                int64_t head_dim, float scale, float* scores, float* out) {
  attend_impl(q, Runs<T>{&keys, &values, n_keys, stride}, n_keys, head_dim, scale, scores, out);
}

template <typename T>
void attend_in_blocks(const float* q, const T* const* key_blocks, const T* const* value_blocks,
                      int64_t block_keys, int64_t n_keys, int64_t head_dim, float scale,
                      float* scores, float* out) {
  attend_impl(q, Runs<T>{key_blocks, value_blocks, block_keys, head_dim}, n_keys, head_dim, scale,
              scores, out);
}

}  // namespace

void attend(const float* q, const float* keys, const float* values, int64_t n_keys, int64_t stride,
            int64_t head_dim, float scale, float* scores, float* out) {
  attend_run(q, keys, values, n_keys, stride, head_dim, scale, scores, out);
}

void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t n_keys,
            int64_t stride, int64_t head_dim, float scale, float* scores, float* out) {
  attend_run(q, keys, values, n_keys, stride, head_dim, scale, scores, out);
}

void attend_blocks(const float* q, const float* const* key_blocks, const float* const* value_blocks,
                   int64_t block_keys, int64_t n_keys, int64_t head_dim, float scale, float* scores,
                   float* out) {
  attend_in_blocks(q, key_blocks, value_blocks, block_keys, n_keys, head_dim, scale, scores, out);
}

void attend_blocks(const float* q, const uint16_t* const* key_blocks,
                   const uint16_t* const* value_blocks, int64_t block_keys, int64_t n_keys,
                   int64_t head_dim, float scale, float* scores, float* out) {
  attend_in_blocks(q, key_blocks, value_blocks, block_keys, n_keys, head_dim, scale, scores, out);
}

}  // namespace md::kernels
