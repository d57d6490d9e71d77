// The portable path of kernels/gguf_matmul.h: plain C++ for any CPU. Chunks of 512 weights (whole
// blocks) are dequantised by dequantize_row into a buffer on the stack and multiplied at once;
// the compiler may vectorise that for the baseline ISA without changing its order, since nothing
// is reassociated (and this file is compiled with -ffp-contract=off).
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_matmul_kernels.h"

namespace md::kernels {

namespace {

constexpr int kLanes = 16;
// Activation rows sharing one dequantised chunk.
constexpr int kGroup = 8;
// Weights dequantised at a time: a multiple of every block size (32, 256) and of kLanes.
constexpr int64_t kChunk = 512;

// acc[l] += w[i] · x[i] for i in [0, n), i % 16 == l (n a multiple of 16 except at the row's end).
void accumulate(const float* w, const float* x, int64_t n, float* acc) {
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += w[i + l] * x[i + l];
  }
  for (int64_t i = full; i < n; ++i) acc[i - full] += w[i] * x[i];
}

// Column c goes to lane c % 16, the lanes are summed pairwise (8+8, 4+4, 2+2, 1+1): the order
// every output of this path follows.
float lane_sum(float* acc) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// One weight row at a time, each chunk of it dequantised once for up to kGroup activation rows.
void tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t x_stride,
          int64_t n_rows, const MatmulOut& out) {
  const GgmlTypeInfo& info = ggml_type_info(w.type);
  const std::size_t chunk_bytes =
      static_cast<std::size_t>(kChunk / info.block_elems) * info.block_bytes;
  float weights[kChunk];
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t n0 = 0; n0 < n_rows; n0 += kGroup) {
      const int64_t group = n_rows - n0 < kGroup ? n_rows - n0 : kGroup;
      float acc[kGroup][kLanes] = {};
      for (int64_t c0 = 0; c0 < w.cols; c0 += kChunk) {
        const int64_t n = w.cols - c0 < kChunk ? w.cols - c0 : kChunk;
        // The format and row length were checked (gguf_matmul_accepts) before any call.
        (void)dequantize_row(w.type, w.row(r) + static_cast<std::size_t>(c0 / kChunk) * chunk_bytes,
                             weights, n);
        for (int64_t j = 0; j < group; ++j) {
          accumulate(weights, x + (n0 + j) * x_stride + c0, n, acc[j]);
        }
      }
      for (int64_t j = 0; j < group; ++j) {
        const float sum = lane_sum(acc[j]);
        float& y = out.y[(n0 + j) * out.y_stride + r];
        y = out.accumulate ? y + sum : sum;
      }
    }
  }
}

GgufTileFn tile_for(GgmlType type) {
  return gguf_matmul_supports(type) && type != GgmlType::kBF16 ? tile : nullptr;
}

}  // namespace

const GgufMatmulKernels kGgufMatmulScalar{tile_for};

}  // namespace md::kernels
