// Integer-dot products of GGUF Q4_0, Q4_1 and Q8_0 weights with activations quantised to int8
// (MatmulInputs::kQ8, bf16_matrix.h): the mode llama.cpp runs these formats in, where 32 weights
// and 32 activations meet in one integer multiply-add (AVX2 vpmaddubsw) instead of being widened
// to f32. Opt-in per model (`--matmul-inputs q8`); gguf_matmul_tile() enters it for a matrix
// tagged kQ8 of one of these types.
//
// Numerics, the contract every path keeps bitwise (the scalar path is its definition):
// - Quantisation, per activation row and block of 32 columns: a = max |x|, d = a / 127,
//   q = round-half-even(x · (127 / a)) (all q = 0 when a = 0), s = d · Σ q. Each x is then d·q to
//   within d/2 (plus the f32 roundings of the scale).
// - Per block b of a weight row with scale dw (and minimum m for Q4_1), the 32 integer products
//   w_k·q_k (w: the nibble for Q4_1, nibble − 8 for Q4_0, the int8 for Q8_0) are summed exactly in
//   eight lanes of four columns (lane u: columns 4u..4u+3); lane u then accumulates
//   fma(float(lane sum), dw·d, acc_u) over the blocks in order, and Q4_1's minimum term
//   fma(m, s, mins) in a ninth accumulator.
// - The result is ((acc_l + acc_l+4) pairwise down to one) + mins.
// Nothing depends on the number of activation rows, which rows share a call or how rows are split
// across threads, so batch invariance holds as in the f32 mode; only the CPU path is free to
// differ, and here it does not (the AVX2 path equals the scalar one bitwise, tests check it).
#pragma once

#include <cstdint>

#include "kernels/gguf_matmul.h"
#include "kernels/isa.h"

namespace md::kernels {

constexpr int kQ8Block = 32;

// Whether `type` has an integer-dot path (Q4_0, Q4_1, Q8_0); other types ignore kQ8.
bool gguf_q8_supports(GgmlType type);

// Activation rows quantised as above, in caller-owned storage: row n's int8 values at
// qs + n·cols, its scales d and block sums s at d + n·blocks and s + n·blocks.
struct Q8Rows {
  const std::int8_t* qs = nullptr;
  const float* d = nullptr;
  const float* s = nullptr;
  int64_t cols = 0;
  int64_t n_rows = 0;

  int64_t blocks() const { return cols / kQ8Block; }
};

// Quantises one row of `cols` (a multiple of 32) activations into qs[cols], d[cols/32] and
// s[cols/32], with the active path (all paths give the same bits).
void quantize_q8_row(const float* x, int64_t cols, std::int8_t* qs, float* d, float* s);

// For output rows [row_begin, row_end) and the quantised rows n of x:
//   out.y[n·out.y_stride + r] (+)= the product above. w.type must pass gguf_q8_supports.
void gguf_q8_tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const Q8Rows& x,
                  const MatmulOut& out);

// The per-path implementations; tests reach the others through gguf_q8_kernels(isa).
using GgufQ8TileFn = void (*)(const GgufMatrix& w, int64_t row_begin, int64_t row_end,
                              const Q8Rows& x, const MatmulOut& out);
using QuantizeQ8Fn = void (*)(const float* x, int64_t cols, std::int8_t* qs, float* d, float* s);
struct GgufQ8Kernels {
  GgufQ8TileFn tile;
  QuantizeQ8Fn quantize;
};
extern const GgufQ8Kernels kGgufQ8Scalar;
extern const GgufQ8Kernels kGgufQ8Avx2;  // x86-64 only; needs AVX2, FMA and F16C

// The kernels for `isa` (AVX2 also serves the avx512 level; scalar where F16C is missing).
const GgufQ8Kernels& gguf_q8_kernels(Isa isa);

}  // namespace md::kernels
