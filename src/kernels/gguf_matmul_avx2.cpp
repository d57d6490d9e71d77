// The AVX2 + FMA path of kernels/gguf_matmul.h, compiled for those extensions alone
// (src/kernels/CMakeLists.txt) and entered only when CPUID reports them (kernels/isa.cpp). Each
// group of 32 weights is unpacked from its block into four registers of 8 f32 and multiplied with
// the f32 activations. F16C is not part of the dispatch check, so f16 values are widened with
// integer operations (exactly, subnormals included).
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/gguf_matmul_kernels.h"
#include "kernels/gguf_matmul_panels.h"

namespace md::kernels {

namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  // R weight rows × N activation rows take 2·R·N accumulators, plus scales and the unpacked
  // weights, of the 16 registers.
  static constexpr int kMaxGroup = 4;
  static constexpr int rows_for(int n) { return n <= 2 ? 2 : 1; }
  // The many-row dense block (gguf_matmul_panels.h): R × N × 2 accumulators, R weight vectors.
  static constexpr int kPanelRows = 2;
  static constexpr int kPanelGroup = 3;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec inputs(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }

  // Lanes l and l + 4, then l + 2, l + 1.
  static float sum(Vec v) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
  }
};

// f16 bits in the low half of each 32-bit lane, widened exactly: normal values rebias the
// exponent (+112), subnormals are m·2^-24 (exact in f32), infinities and NaNs keep an all-ones
// exponent.
__m256 widen_f16(__m256i h) {
  const __m256i magnitude = _mm256_and_si256(h, _mm256_set1_epi32(0x7fff));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
  const __m256i shifted = _mm256_slli_epi32(magnitude, 13);
  const __m256i normal = _mm256_add_epi32(shifted, _mm256_set1_epi32(112 << 23));
  const __m256i special = _mm256_or_si256(shifted, _mm256_set1_epi32(0x7f800000));
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), _mm256_set1_ps(0x1p-24f));
  const __m256i is_special = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7bff));
  const __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x0400), magnitude);
  __m256i bits = _mm256_blendv_epi8(normal, special, is_special);
  bits = _mm256_blendv_epi8(bits, _mm256_castps_si256(subnormal), is_subnormal);
  return _mm256_castsi256_ps(_mm256_or_si256(bits, sign));
}

// The f16 at p, widened like widen_f16. Branch-free (selects compile to cmov): signs and the rare
// subnormal scale follow no pattern a branch predictor could learn.
float f16_scalar(const std::uint8_t* p) {
  const std::uint32_t h = static_cast<std::uint32_t>(p[0] | (p[1] << 8));
  const std::uint32_t magnitude = h & 0x7fffu;
  const std::uint32_t normal = (magnitude << 13) + (112u << 23);
  const std::uint32_t special = (magnitude << 13) | 0x7f800000u;
  const float subnormal_value = static_cast<float>(magnitude) * 0x1p-24f;
  std::uint32_t subnormal;
  std::memcpy(&subnormal, &subnormal_value, sizeof(subnormal));
  std::uint32_t bits = magnitude < 0x7c00u ? normal : special;
  bits = magnitude < 0x0400u ? subnormal : bits;
  bits |= (h & 0x8000u) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// 8 bytes at p, zero- or sign-extended to 8 int32 lanes.
__m256i bytes_u32(const std::uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
__m256i bytes_i32(const std::uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

__m256 to_float(__m256i v) {
  return _mm256_cvtepi32_ps(v);
}

__m256i low_nibbles(__m256i v) {
  return _mm256_and_si256(v, _mm256_set1_epi32(15));
}

// Formats whose blocks are opened one row at a time.
template <class F>
struct OpenEachRow {
  template <int R, class Scales>
  static void open(const std::uint8_t* const* blocks, Scales* scales) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) scales[i] = F::open_one(blocks[i]);
  }
};

// Q4_0 (d, qs[16]) and Q4_1 (d, m, qs[16]): weight j is lo(qs[j])·d + m, weight j + 16 is
// hi(qs[j])·d + m, with m = −8·d for Q4_0. q·d is exact, so one fma rounds once, as
// dequantize_row's (q − 8)·d and q·d + m do.
template <bool kHasMin>
struct Q4 : OpenEachRow<Q4<kHasMin>> {
  static constexpr int kBlockElems = 32;
  static constexpr int kBlockBytes = kHasMin ? 20 : 18;
  static constexpr bool kPlain = false;
  struct Scales {
    __m256 d, m;
  };
  static Scales open_one(const std::uint8_t* block) {
    const float d = f16_scalar(block);
    return {_mm256_set1_ps(d), _mm256_set1_ps(kHasMin ? f16_scalar(block + 2) : -8.0f * d)};
  }
  static void group(const std::uint8_t* block, const Scales& s, int, __m256* w) {
    const std::uint8_t* qs = block + (kHasMin ? 4 : 2);
    for (int v = 0; v < 2; ++v) {
      __m256i q = bytes_u32(qs + 8 * v);
      w[v] = _mm256_fmadd_ps(to_float(low_nibbles(q)), s.d, s.m);
      w[v + 2] = _mm256_fmadd_ps(to_float(_mm256_srli_epi32(q, 4)), s.d, s.m);
    }
  }
};

// Blocks of 32 whose one f16 scale d comes first (Q8_0, Q5_0).
struct LeadingScale : OpenEachRow<LeadingScale> {
  static constexpr int kBlockElems = 32;
  static constexpr bool kPlain = false;
  struct Scales {
    __m256 d;
  };
  static Scales open_one(const std::uint8_t* block) { return {_mm256_set1_ps(f16_scalar(block))}; }
};

// Q8_0 (d, int8 qs[32]): weight j is qs[j]·d, exact.
struct Q8_0 : LeadingScale {
  static constexpr int kBlockBytes = 34;
  static void group(const std::uint8_t* block, const Scales& s, int, __m256* w) {
    for (int v = 0; v < 4; ++v) w[v] = _mm256_mul_ps(to_float(bytes_i32(block + 2 + 8 * v)), s.d);
  }
};

// Q5_0 (d, qh[4], qs[16]): weight j is (q − 16)·d with q the low nibble of qs[j] (j < 16) or the
// high nibble of qs[j − 16], plus bit j of the 32-bit qh as its fifth bit; exact.
struct Q5_0 : LeadingScale {
  static constexpr int kBlockBytes = 22;
  static void group(const std::uint8_t* block, const Scales& s, int, __m256* w) {
    std::uint32_t qh;
    std::memcpy(&qh, block + 2, sizeof(qh));
    const __m256i bits = _mm256_set1_epi32(static_cast<int>(qh));
    for (int v = 0; v < 4; ++v) {
      __m256i q = bytes_u32(block + 6 + 8 * (v % 2));
      q = v < 2 ? low_nibbles(q) : _mm256_srli_epi32(q, 4);
      const __m256i at =
          _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * v));
      const __m256i fifth =
          _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(bits, at), _mm256_set1_epi32(1)), 4);
      q = _mm256_sub_epi32(_mm256_or_si256(q, fifth), _mm256_set1_epi32(16));
      w[v] = _mm256_mul_ps(to_float(q), s.d);
    }
  }
};

// Q4_K (d, dmin, scales[12], qs[128]): sub-block g (weights 32g..32g+31) has a 6-bit scale and
// min, weight = (d·scale)·q − dmin·min with q the low (g even) or high (g odd) nibbles of
// qs[32(g/2)..]. Both products are exact, so the fmsub rounds once, as dequantize_row does.
struct Q4_K : OpenEachRow<Q4_K> {
  static constexpr int kBlockElems = 256;
  static constexpr int kBlockBytes = 144;
  static constexpr bool kPlain = false;
  struct Scales {
    alignas(32) float d[8];
    alignas(32) float m[8];
  };
  // The 12 scale bytes as three words a, b, c: scales 0-3 / mins 0-3 are the low 6 bits of the
  // bytes of a / b; scales 4-7 / mins 4-7 are the low / high nibbles of c's bytes plus the top
  // two bits of a's / b's bytes.
  static Scales open_one(const std::uint8_t* block) {
    std::uint32_t a, b, c;
    std::memcpy(&a, block + 4, 4);
    std::memcpy(&b, block + 8, 4);
    std::memcpy(&c, block + 12, 4);
    const std::uint64_t scales =
        (a & 0x3f3f3f3fu) | std::uint64_t{(c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u)} << 32;
    const std::uint64_t mins =
        (b & 0x3f3f3f3fu) | std::uint64_t{((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)}
                                << 32;
    Scales s;
    _mm256_store_ps(s.d, _mm256_mul_ps(eight(scales), _mm256_set1_ps(f16_scalar(block))));
    _mm256_store_ps(s.m, _mm256_mul_ps(eight(mins), _mm256_set1_ps(f16_scalar(block + 2))));
    return s;
  }
  static __m256 eight(std::uint64_t bytes) {
    return to_float(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))));
  }
  static void group(const std::uint8_t* block, const Scales& s, int g, __m256* w) {
    const __m256 d = _mm256_set1_ps(s.d[g]), m = _mm256_set1_ps(s.m[g]);
    for (int v = 0; v < 4; ++v) {
      __m256i q = bytes_u32(block + 16 + 32 * (g / 2) + 8 * v);
      q = g % 2 == 0 ? low_nibbles(q) : _mm256_srli_epi32(q, 4);
      w[v] = _mm256_fmsub_ps(to_float(q), d, m);
    }
  }
};

// Q5_K (d, dmin, scales[12], qh[32], qs[128]): Q4_K's sub-blocks with a fifth bit per weight,
// bit g of qh[l] for weight l of sub-block g; weight = (d·scale)·q − dmin·min, rounded once.
struct Q5_K : Q4_K {  // Q4_K's block start: its scales open as Q4_K's
  static constexpr int kBlockBytes = 176;
  static void group(const std::uint8_t* block, const Scales& s, int g, __m256* w) {
    const __m256 d = _mm256_set1_ps(s.d[g]), m = _mm256_set1_ps(s.m[g]);
    for (int v = 0; v < 4; ++v) {
      __m256i q = bytes_u32(block + 48 + 32 * (g / 2) + 8 * v);
      q = g % 2 == 0 ? low_nibbles(q) : _mm256_srli_epi32(q, 4);
      const __m256i high = _mm256_srli_epi32(bytes_u32(block + 16 + 8 * v), g);
      q = _mm256_or_si256(q, _mm256_slli_epi32(_mm256_and_si256(high, _mm256_set1_epi32(1)), 4));
      w[v] = _mm256_fmsub_ps(to_float(q), d, m);
    }
  }
};

// Q6_K (ql[128], qh[64], int8 sc[16], d): weight 32g + l (half h = g / 4, quarter k = g % 4) has
// low 4 bits from ql[64h + 32(k % 2) + l] (low nibble for k < 2) and top 2 bits from bits 2k of
// qh[32h + l]; weight = (d·sc[(32g + l) / 16])·(q − 32), both products exact.
struct Q6_K : OpenEachRow<Q6_K> {
  static constexpr int kBlockElems = 256;
  static constexpr int kBlockBytes = 210;
  static constexpr bool kPlain = false;
  struct Scales {
    alignas(32) float d[16];
  };
  static Scales open_one(const std::uint8_t* block) {
    const __m256 d = _mm256_set1_ps(f16_scalar(block + 208));
    Scales s;
    _mm256_store_ps(s.d, _mm256_mul_ps(to_float(bytes_i32(block + 192)), d));
    _mm256_store_ps(s.d + 8, _mm256_mul_ps(to_float(bytes_i32(block + 200)), d));
    return s;
  }
  static void group(const std::uint8_t* block, const Scales& s, int g, __m256* w) {
    const int h = g / 4, k = g % 4;
    for (int v = 0; v < 4; ++v) {
      __m256i low = bytes_u32(block + 64 * h + 32 * (k % 2) + 8 * v);
      low = k < 2 ? low_nibbles(low) : _mm256_srli_epi32(low, 4);
      __m256i high = _mm256_srli_epi32(bytes_u32(block + 128 + 32 * h + 8 * v), 2 * k);
      high = _mm256_slli_epi32(_mm256_and_si256(high, _mm256_set1_epi32(3)), 4);
      __m256i q = _mm256_sub_epi32(_mm256_or_si256(low, high), _mm256_set1_epi32(32));
      w[v] = _mm256_mul_ps(to_float(q), _mm256_set1_ps(s.d[2 * g + v / 2]));
    }
  }
};

// Plain formats in groups of 32 elements.
struct NoScales {};

__m128i load_128(const std::uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

struct F32 : OpenEachRow<F32> {
  static constexpr int kBlockElems = 32;
  static constexpr int kBlockBytes = 128;
  static constexpr bool kPlain = true;
  using Scales = NoScales;
  static Scales open_one(const std::uint8_t*) { return {}; }
  static void group(const std::uint8_t* block, const Scales&, int, __m256* w) {
    for (int v = 0; v < 4; ++v)
      w[v] = _mm256_loadu_ps(reinterpret_cast<const float*>(block + 32 * v));
  }
};

struct F16 : OpenEachRow<F16> {
  static constexpr int kBlockElems = 32;
  static constexpr int kBlockBytes = 64;
  static constexpr bool kPlain = true;
  using Scales = NoScales;
  static Scales open_one(const std::uint8_t*) { return {}; }
  static void group(const std::uint8_t* block, const Scales&, int, __m256* w) {
    for (int v = 0; v < 4; ++v) w[v] = widen_f16(_mm256_cvtepu16_epi32(load_128(block + 16 * v)));
  }
};

// This file's format structs, for the shared type dispatch.
struct Formats {
  using Q4_0 = Q4<false>;
  using Q4_1 = Q4<true>;
  using Q8_0 = md::kernels::Q8_0;
  using Q5_0 = md::kernels::Q5_0;
  using Q4_K = md::kernels::Q4_K;
  using Q5_K = md::kernels::Q5_K;
  using Q6_K = md::kernels::Q6_K;
  using F32 = md::kernels::F32;
  using F16 = md::kernels::F16;
};

}  // namespace

const GgufMatmulKernels kGgufMatmulAvx2{gguf_blocked::tile_for<Avx2, Formats>};

}  // namespace md::kernels

#endif  // __x86_64__
