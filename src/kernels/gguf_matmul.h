// Products of GGUF weights (ggml block formats read in place from the mapped file) with f32
// activations, dispatched at run time to the best vector path of the CPU (kernels/isa.h). The
// weights are dequantised in registers inside the dot-product loop; no f32 copy of a row exists.
//
// Numerics: every weight is first turned into exactly the f32 that dequantize_row
// (kernels/gguf_dequant.h) gives for it, then multiplied by the f32 activation and added to an f32
// accumulator (one fma on the vector paths); the activations are not quantised. The in-register
// weights can be exact because every product in the formats' definitions is exact in f32 (a 4-, 6-
// 5-, 6- or 8-bit integer times an f16 scale, itself times a 6- or 8-bit sub-block scale for Q4_K,
// Q5_K and Q6_K), so at most one rounding remains: the "+ m" of Q4_1 and "− dmin·min" of Q4_K and
// Q5_K, which the
// vector paths do with a single fma where dequantize_row rounds a product that is already exact.
// The only difference from dequantise-then-multiply in double is therefore f32 accumulation (tests
// check this bitwise against a replay of the documented order, gguf_matmul_test.cpp).
//
// Determinism: for a given path, each output is reduced in one fixed order that depends only on
// the number of columns, never on how many activation rows are passed together, which output rows
// share the call, or how rows are split across threads. A row computed inside a prefill or batch
// is therefore bitwise equal to the same row computed alone. The paths (scalar, AVX2, AVX-512)
// differ from each other in the last bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/ggml_type.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace md::kernels {

// A [rows][cols] weight matrix in a GGUF format (y = W·x): row r starts `row_bytes` after row r-1
// and holds cols / block_elems blocks of the type. No alignment is needed.
struct GgufMatrix {
  GgmlType type = GgmlType::kF32;
  const std::uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  std::size_t row_bytes = 0;
  // What the weights multiply (bf16_matrix.h): kBf16 applies to BF16 (the bf16 kernels' mode),
  // kQ8 to Q4_0, Q4_1 and Q8_0 (gguf_matmul_q8.h); every other pairing is kF32.
  MatmulInputs inputs = MatmulInputs::kF32;
  // Q4_0 / Q4_1 in the kQ8 mode, optionally: the same rows regrouped by pack_gguf_q8_rows
  // (gguf_q8_packing.h), which the vector q8 path reads instead of `data` (owned by the model).
  const std::uint8_t* packed = nullptr;

  const std::uint8_t* row(int64_t r) const {
    return data + static_cast<std::size_t>(r) * row_bytes;
  }
};

// Whether the kernels handle `type`: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K. BF16
// goes to the bf16 kernels of matmul.h (its numerics, its MatmulInputs mode), so bf16 weights have
// one path whether they come from safetensors or GGUF.
bool gguf_matmul_supports(GgmlType type);

// Whether `w` can be passed to the functions below: a supported type, cols a whole number of its
// blocks and row_bytes at least one row of them (BF16: exactly one, 2-byte aligned data). Loaders
// check this once when binding weights.
bool gguf_matmul_accepts(const GgufMatrix& w);

// A BF16 GgufMatrix as the Bf16Matrix the bf16 kernels read (rows densely packed).
Bf16Matrix bf16_view(const GgufMatrix& w);

// For output rows r in [row_begin, row_end) of W and activation rows n in [0, n_rows), with
// y_nr = out.y[n * out.y_stride + r]:
//   y_nr = (out.accumulate ? y_nr : 0) + Σ_c W[r][c] · x[n * x_stride + c]
// Each weight block is read from memory once for up to 8 activation rows (more rows take more
// passes over the range, which then comes from cache). `w` must satisfy gguf_matmul_accepts.
void gguf_matmul_tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// y[n][r] = Σ_c W[r][c] · x[n][c] for `n_rows` activation rows (x: [n_rows][W.cols], y:
// [n_rows][W.rows], both contiguous), output rows split across `pool` (may be null). Results do
// not depend on the pool's size.
void gguf_matmul(const GgufMatrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool);

}  // namespace md::kernels
