// The opt-in bf16-input path (MatmulInputs::kBf16, kernels/matmul.h), compiled for AVX-512 F + BW
// + BF16 alone (src/kernels/CMakeLists.txt) and entered only when CPUID reports AVX512-BF16
// (kernels/isa.cpp). Each input row's f32 values are rounded to bf16, round-to-nearest-even, 32
// columns at a time (vcvtne2ps2bf16), into a staging buffer once per row block of 24 weight rows
// and column chunk (stage() below, kernels/matmul_blocked.h); `vdpbf16ps` then multiplies them
// with the bf16 weights, 32 products per instruction where the f32 paths do 16 FMAs, so several
// input rows cost about half as much arithmetic. (Rounding in the block loop instead, once per
// 32 columns per group of up to 8 weight rows, left n = 8 at 1.05x the f32 path's speed.)
//
// Numerics: a product of two bf16 values is exact in f32, so the only roundings are those of the
// inputs (at most 2^-8 of each, as llama.cpp's bf16 vec_dot_type does) and of the f32 additions.
// vdpbf16ps ignores MXCSR: it always rounds to nearest even and treats denormal inputs and
// results as zero (DAZ and FTZ); vcvtne2ps2bf16 likewise flushes denormal inputs to zero. Values
// that small (below 2^-126) are far below anything a logit depends on.
//
// Reduction order, the determinism contract: in every output, columns 2l and 2l + 1 of each step
// of 32 go to f32 lane l, which adds the step's two products with one vdpbf16ps (the order inside
// the instruction is the CPU's, fixed for a given CPU model), steps in increasing column order;
// the 16 lanes are then added in the tree of the AVX-512 path. The tail (columns past the last
// multiple of 32) continues the pattern with zero-filled masked loads, whose 0 · 0 pairs add
// exactly 0. Nothing else enters the order: not the tile split, the number of input rows, the
// row range, the threads or the column chunks (kernels/matmul_blocked.h), so verify rows stay
// bitwise equal to decode steps and batches stay invariant. The results differ from the f32
// paths' (rounded inputs) and may differ between CPU vendors (the pair order inside vdpbf16ps).
#if defined(__x86_64__)

#include "kernels/avx512_intrinsics.h"
#include "kernels/avx512_lane_sum.h"
#include "kernels/matmul_blocked.h"
#include "kernels/matmul_kernels.h"

namespace md::kernels {

namespace {

// f32 inputs rounded to bf16, 32 at a time: columns 0-15 become elements 0-15 and columns 16-31
// elements 16-31, the weights' order. Masked loads never touch the masked-off bytes, so a row may
// end at a page boundary.
__m512bh round_to_bf16(const float* p, int k) {
  const __mmask16 low = k >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << k) - 1);
  const __mmask16 high = k > 16 ? static_cast<__mmask16>((1u << (k - 16)) - 1) : __mmask16{0};
  return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(high, p + 16), _mm512_maskz_loadu_ps(low, p));
}

__m512i bits(__m512bh v) {
  return reinterpret_cast<__m512i>(v);
}

struct Avx512Bf16 {
  using Vec = __m512;
  using Weights = __m512bh;  // 32 bf16 weights, 16 pairs
  using Inputs = __m512bh;   // 32 inputs rounded to bf16, paired as the weights
  using InputElement = uint16_t;
  [[maybe_unused]] static constexpr int kLanes = 16;  // part of the traits (matmul_blocked.h)
  static constexpr int kStep = 32;
  // R weight rows × N input rows take R·N accumulators + R weight vectors + 1 input vector of the
  // 32 registers: the AVX-512 path's shapes fit.
  static constexpr int kMaxGroup = 8;
  static constexpr int rows_for(int n) { return n <= 2 ? 8 : n == 3 ? 6 : n <= 6 ? 4 : 3; }
  static constexpr int64_t kRowBlock = 24;
  static constexpr int64_t kChunkBytes = 16 * 1024;
  // 1 KB ahead: the prefetches took n = 8 from 16 to 20 GB/s on one thread (measured).
  static constexpr int64_t kPrefetch = 512;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec fma(Weights w, Inputs x, Vec acc) { return _mm512_dpbf16_ps(acc, w, x); }

  // Rounds a chunk of one input row, once for all the weight rows of the row block. The last
  // step's unused elements are left as they are: inputs_tail() does not read them.
  static void stage(const float* x, int64_t n, uint16_t* out) {
    int64_t i = 0;
    for (; i + kStep <= n; i += kStep)
      _mm512_storeu_si512(out + i, bits(round_to_bf16(x + i, kStep)));
    if (i < n) {
      const int k = static_cast<int>(n - i);
      _mm512_mask_storeu_epi16(out + i, static_cast<__mmask32>((1u << k) - 1),
                               bits(round_to_bf16(x + i, k)));
    }
  }

  // The empty asms keep each vector in a register: GCC would otherwise fold the load into each
  // vdpbf16ps that uses it (R of them for an input, N for a weight) and load it that many times.
  static Weights weights(const uint16_t* p) {
    __m512i v = _mm512_loadu_si512(p);
    __asm__("" : "+v"(v));
    return reinterpret_cast<Weights>(v);
  }
  static Weights weights_tail(const uint16_t* p, int k) {
    return reinterpret_cast<Weights>(
        _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1u << k) - 1), p));
  }
  static Inputs inputs(const uint16_t* p) { return weights(p); }
  static Inputs inputs_tail(const uint16_t* p, int k) { return weights_tail(p, k); }
  static void prefetch(const uint16_t* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }

  static float sum(Vec v) { return avx512_lane_sum(v); }
};

}  // namespace

const MatmulKernels kMatmulAvx512Bf16{blocked::dot<Avx512Bf16>, blocked::tile<Avx512Bf16>};

}  // namespace md::kernels

#endif  // __x86_64__
