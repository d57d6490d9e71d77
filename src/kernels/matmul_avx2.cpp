// The AVX2 + FMA path, compiled for those extensions alone (src/kernels/CMakeLists.txt) and
// entered only when CPUID reports them (kernels/isa.cpp). bf16 weights are widened to f32 in
// registers and multiplied with f32 activations.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/matmul_blocked.h"
#include "kernels/matmul_kernels.h"

namespace md::kernels {

namespace {

// _mm256_maskload_ps mask for the first k lanes: 8 - k entries into this table.
alignas(64) constexpr int32_t kTailMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                               0,  0,  0,  0,  0,  0,  0,  0};

struct Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  using Weights = Vec;  // widened to f32
  using Inputs = Vec;
  using InputElement = float;
  static constexpr int kStep = kLanes;
  // Up to 4 input rows at once; R weight rows × N input rows take R·N accumulators + R weight
  // vectors + 1 input vector, of the 16 registers.
  static constexpr int kMaxGroup = 4;
  static constexpr int rows_for(int n) { return n == 1 ? 6 : n == 2 ? 4 : 3; }
  // The many-row dense block (dense_panel.h): R × N accumulators, R weight vectors, 1 input.
  static constexpr int kPanelRows = 3;
  static constexpr int kPanelGroup = 3;
  static constexpr int64_t kRowBlock = 12;
  static constexpr int64_t kChunkBytes = 16 * 1024;
  // 1 KB ahead: +10 % at 1-2 input rows, and 25-74 % at 4 rows from memory (measured with this
  // path on the AVX-512 Xeon: 4 rows are not bound by the FMAs there after all).
  static constexpr int64_t kPrefetch = 512;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec fma(Vec w, Vec x, Vec acc) { return _mm256_fmadd_ps(w, x, acc); }

  // bf16 is the top half of an f32: zero-extend each 16-bit word and shift it up.
  static Vec widen(__m128i bits) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
  static Vec weights(const uint16_t* p) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // AVX2 has no 16-bit masked load: the few tail words go through a zeroed copy.
  static Vec weights_tail(const uint16_t* p, int k) {
    alignas(16) uint16_t words[kLanes] = {};
    for (int i = 0; i < k; ++i) words[i] = p[i];
    return widen(_mm_load_si128(reinterpret_cast<const __m128i*>(words)));
  }
  // The empty asm keeps the input in a register: GCC would otherwise fold the load into each of
  // the R FMAs that use it and load it R times.
  static Vec inputs(const float* p) {
    Vec v = _mm256_loadu_ps(p);
    __asm__("" : "+x"(v));
    return v;
  }
  // maskload never touches the masked-off bytes, so the tail may end at a page boundary.
  static Vec inputs_tail(const float* p, int k) {
    __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTailMask + kLanes - k));
    return _mm256_maskload_ps(p, mask);
  }
  static void prefetch(const uint16_t* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }

  // Lanes l and l + 4, then l + 2, l + 1.
  static float sum(Vec v) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
  }
};

}  // namespace

const MatmulKernels kMatmulAvx2{blocked::dot<Avx2>, blocked::tile<Avx2>};

}  // namespace md::kernels

#endif  // __x86_64__
