// The AVX-512 path (F + BW + FMA), compiled for those extensions alone (src/kernels/CMakeLists.txt)
// and entered only when CPUID reports them (kernels/isa.cpp). bf16 weights are widened to f32 in
// registers and multiplied with f32 activations; vdpbf16ps is not used because it would round the
// activations to bf16.
#if defined(__x86_64__)

#include "kernels/avx512_intrinsics.h"
#include "kernels/avx512_lane_sum.h"
#include "kernels/matmul_blocked.h"
#include "kernels/matmul_kernels.h"

namespace md::kernels {

namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  using Weights = Vec;  // widened to f32
  using Inputs = Vec;
  using InputElement = float;
  static constexpr int kStep = kLanes;
  // Up to 8 input rows at once; R weight rows × N input rows take R·N accumulators + R weight
  // vectors + 1 input vector + the widening index, of the 32 registers.
  static constexpr int kMaxGroup = 8;
  static constexpr int rows_for(int n) { return n <= 2 ? 8 : n == 3 ? 6 : n <= 6 ? 4 : 3; }
  // The many-row dense block (dense_panel.h): R × N accumulators, R weight vectors, 1 input.
  // 3 × 4 measured best of 3 × 8, 2 × 6, 3 × 4, 4 × 4 and 2 × 8 (106-118 GFLOP/s per thread at
  // 576 and 1,024 columns; 3 × 8's inputs and weights overflow L1).
  static constexpr int kPanelRows = 3;
  static constexpr int kPanelGroup = 4;
  static constexpr int64_t kRowBlock = 24;
  static constexpr int64_t kChunkBytes = 16 * 1024;
  // 1 KB ahead: +5-10 % at 1-4 input rows, and at 6-8 rows from memory 34 → 57 and 40 → 66
  // GFLOP/s on one thread (measured on the Xeon, 64 MB of bf16): the FMAs of 8 rows hide in the
  // weight stream only if that stream is requested ahead.
  static constexpr int64_t kPrefetch = 512;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec fma(Vec w, Vec x, Vec acc) { return _mm512_fmadd_ps(w, x, acc); }

  // bf16 is the top half of an f32: one word permute puts word i in the top half of lane i and
  // zeroes the bottom halves (one shuffle instead of zero-extend + shift).
  static Vec widen(__m256i bits) {
    const __m512i index = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7,
                                           0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
    return _mm512_castsi512_ps(
        _mm512_maskz_permutexvar_epi16(0xaaaaaaaau, index, _mm512_castsi256_si512(bits)));
  }
  static Vec weights(const uint16_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // Masked loads never touch the masked-off bytes, so the tail may end at a page boundary.
  static Vec weights_tail(const uint16_t* p, int k) {
    __m512i bits = _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1u << k) - 1), p);
    return widen(_mm512_castsi512_si256(bits));
  }
  // The empty asm keeps the input in a register: GCC would otherwise fold the load into each of
  // the R FMAs that use it, loading it R times and, at R = 3, halving the block's speed.
  static Vec inputs(const float* p) {
    Vec v = _mm512_loadu_ps(p);
    __asm__("" : "+v"(v));
    return v;
  }
  static Vec inputs_tail(const float* p, int k) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << k) - 1), p);
  }
  static void prefetch(const uint16_t* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }

  static float sum(Vec v) { return avx512_lane_sum(v); }
};

}  // namespace

const MatmulKernels kMatmulAvx512{blocked::dot<Avx512>, blocked::tile<Avx512>};

}  // namespace md::kernels

#endif  // __x86_64__
