// The portable path of kernels/gguf_matmul_q8.h and the definition of its numerics: plain C++,
// compiled with -ffp-contract=off (src/kernels/CMakeLists.txt) so that every fma below is the
// one written, and std::fma rounds once wherever it runs.
#include <cmath>
#include <cstring>

#include "base/dtype.h"
#include "kernels/gguf_matmul_q8.h"

namespace md::kernels {

namespace {

constexpr int kLanes = 8;
constexpr int kLaneCols = kQ8Block / kLanes;

float f16_at(const std::uint8_t* p) {
  return f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// Round half to even, as vcvtps2dq does under the default rounding mode. Values outside int8
// (only NaN and infinity can be: |x · 127 / a| <= 127 otherwise) become −128, as the vector
// path's saturating packs make of vcvtps2dq's 0x80000000.
std::int8_t to_int8(float v) {
  if (!(std::fabs(v) <= 127.5f)) return -128;
  return static_cast<std::int8_t>(std::nearbyint(v));
}

void quantize_row(const float* x, int64_t cols, std::int8_t* qs, float* d, float* s) {
  for (int64_t b = 0; b < cols / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    float amax = 0.0f;
    for (int k = 0; k < kQ8Block; ++k) amax = std::fmax(amax, std::fabs(xb[k]));
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int k = 0; k < kQ8Block; ++k) {
      qs[b * kQ8Block + k] = to_int8(xb[k] * inverse);
      sum += qs[b * kQ8Block + k];
    }
    d[b] = amax / 127.0f;
    s[b] = d[b] * static_cast<float>(sum);
  }
}

// The 32 integer weights of block `at` in column order, its scale and (Q4_1) minimum.
struct IntBlock {
  int w[kQ8Block];
  float d;
  float m;
};

IntBlock open_block(GgmlType type, const std::uint8_t* at) {
  IntBlock block{};
  block.d = f16_at(at);
  if (type == GgmlType::kQ8_0) {
    for (int k = 0; k < kQ8Block; ++k) block.w[k] = static_cast<std::int8_t>(at[2 + k]);
    return block;
  }
  const bool has_min = type == GgmlType::kQ4_1;
  const std::uint8_t* nibbles = at + (has_min ? 4 : 2);
  const int offset = has_min ? 0 : 8;
  for (int k = 0; k < kQ8Block / 2; ++k) {
    block.w[k] = (nibbles[k] & 15) - offset;
    block.w[k + kQ8Block / 2] = (nibbles[k] >> 4) - offset;
  }
  if (has_min) block.m = f16_at(at + 2);
  return block;
}

float row_dot(const GgufMatrix& w, int64_t r, const Q8Rows& x, int64_t n) {
  const std::size_t block_bytes = ggml_type_info(w.type).block_bytes;
  const std::int8_t* qs = x.qs + n * x.cols;
  const float* d = x.d + n * x.blocks();
  const float* s = x.s + n * x.blocks();
  float acc[kLanes] = {};
  float mins = 0.0f;
  for (int64_t b = 0; b < x.blocks(); ++b) {
    const IntBlock block = open_block(w.type, w.row(r) + b * block_bytes);
    const float scale = block.d * d[b];
    for (int u = 0; u < kLanes; ++u) {
      int sum = 0;
      for (int k = u * kLaneCols; k < (u + 1) * kLaneCols; ++k)
        sum += block.w[k] * qs[b * kQ8Block + k];
      acc[u] = std::fma(static_cast<float>(sum), scale, acc[u]);
    }
    if (w.type == GgmlType::kQ4_1) mins = std::fma(block.m, s[b], mins);
  }
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return w.type == GgmlType::kQ4_1 ? acc[0] + mins : acc[0];
}

void tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const Q8Rows& x,
          const MatmulOut& out) {
  for (int64_t n = 0; n < x.n_rows; ++n) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      float& y = out.y[n * out.y_stride + r];
      const float dot = row_dot(w, r, x, n);
      y = out.accumulate ? y + dot : dot;
    }
  }
}

}  // namespace

const GgufQ8Kernels kGgufQ8Scalar{tile, quantize_row};

}  // namespace md::kernels
