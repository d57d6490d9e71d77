// The AVX-512 path (F + BW + FMA) of kernels/gguf_matmul.h, compiled for those extensions alone
// (src/kernels/CMakeLists.txt) and entered only when CPUID reports them (kernels/isa.cpp). Each
// group of 32 weights is unpacked from its block into two registers of 16 f32 and multiplied with
// the f32 activations; f16 scales and weights are widened with vcvtph2ps (AVX-512F), and 4-bit
// weights are looked up in a per-block table of their 16 possible values (vpermps).
#if defined(__x86_64__)

#include <cstring>

#include "kernels/avx512_intrinsics.h"
#include "kernels/avx512_lane_sum.h"
#include "kernels/gguf_matmul_kernels.h"
#include "kernels/gguf_matmul_panels.h"

namespace md::kernels {

namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  // R weight rows × N activation rows take 2·R·N accumulators, plus the R rows' scales and the
  // unpacked weights, of the 32 registers.
  static constexpr int kMaxGroup = 8;
  static constexpr int rows_for(int n) { return n <= 2 ? 4 : n <= 4 ? 2 : 1; }
  // The many-row dense block (dense_panel.h): R × N × 2 accumulators, R weight vectors. 3 × 4
  // measured best of 2 × 6, 3 × 4 and 4 × 3 (the 1,536-column down projection: its 4 input rows
  // and 3 weight rows stay in L1).
  static constexpr int kPanelRows = 3;
  static constexpr int kPanelGroup = 4;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec inputs(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }

  static float sum(Vec v) { return avx512_lane_sum(v); }
};

// 16 f16 values, widened exactly.
__m512 widen_f16(__m256i bits) {
  return _mm512_cvtph_ps(bits);
}

// The first two f16 values at p, as [p[0], p[1], ...] f32 lanes.
__m512 f16_pair(const std::uint8_t* p) {
  std::uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return widen_f16(_mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(bits))));
}

// The f16 at p (the last two bytes of a Q6_K block: nothing after it is read), in lane 0.
__m512 f16_single(const std::uint8_t* p) {
  const int bits = p[0] | (p[1] << 8);
  return widen_f16(_mm256_zextsi128_si256(_mm_cvtsi32_si128(bits)));
}

__m512 lane(__m512 v, int index) {
  return _mm512_permutexvar_ps(_mm512_set1_epi32(index), v);
}

// 16 bytes at p, zero-extended to 16 int32 lanes.
__m512i bytes_u32(const std::uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

__m512 to_float(__m512i v) {
  return _mm512_cvtepi32_ps(v);
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

// The first two f16 of each of R <= 4 blocks, widened by one vcvtph2ps: out[2i], out[2i + 1] for
// block i. (Built in registers: a vector loaded from four separate stores would stall on store
// forwarding.)
template <int R>
void f16_pairs(const std::uint8_t* const* blocks, float* out) {
  static_assert(R <= 4);
  std::uint32_t words[4] = {};
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) std::memcpy(&words[i], blocks[i], sizeof(std::uint32_t));
  const __m128i bits = _mm_setr_epi32(static_cast<int>(words[0]), static_cast<int>(words[1]),
                                      static_cast<int>(words[2]), static_cast<int>(words[3]));
  _mm256_storeu_ps(out, _mm512_castps512_ps256(widen_f16(_mm256_zextsi128_si256(bits))));
  // The scales are then broadcast from memory (vbroadcastss m32 takes only a load port), not
  // shuffled out of the register on port 5, which the nibble unpacking and lookups already load.
  __asm__("" : "+m"(*reinterpret_cast<float(*)[8]>(out)));
}

// [0, 1, ..., 15] and [-8, ..., 7]: the nibble values, as f32.
__m512 nibble_values(int offset) {
  return _mm512_add_ps(_mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                       _mm512_set1_ps(static_cast<float>(offset)));
}

// 4-bit weights are looked up in a table of the 16 values a block's nibbles can take, built with
// one fma (or mul) per block: vpermps replaces an int-to-float conversion and an fma per vector,
// and it reads only the low 4 bits of each index (no masking of the low nibbles).
__m512 lookup(__m512i nibbles, __m512 table) {
  return _mm512_permutexvar_ps(nibbles, table);
}

// Q4_0 (d, qs[16]) and Q4_1 (d, m, qs[16]): weight j is lo(qs[j])·d + m, weight j + 16 is
// hi(qs[j])·d + m (Q4_0: (q − 8)·d). q·d is exact, so the table's one fma rounds once, as
// dequantize_row's q·d + m does, and (q − 8)·d is exact.
template <bool kHasMin>
struct Q4 {
  static constexpr int kBlockElems = 32;
  static constexpr int kBlockBytes = kHasMin ? 20 : 18;
  static constexpr bool kPlain = false;
  struct Scales {
    __m512 table;
  };
  template <int R>
  static void open(const std::uint8_t* const* blocks, Scales* scales) {
    alignas(32) float dm[8];
    f16_pairs<R>(blocks, dm);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m512 d = _mm512_set1_ps(dm[2 * i]);
      scales[i].table = kHasMin
                            ? _mm512_fmadd_ps(nibble_values(0), d, _mm512_set1_ps(dm[2 * i + 1]))
                            : _mm512_mul_ps(nibble_values(-8), d);
    }
  }
  static void group(const std::uint8_t* block, const Scales& s, int, __m512* w) {
    __m512i q = bytes_u32(block + (kHasMin ? 4 : 2));
    w[0] = lookup(q, s.table);
    w[1] = lookup(_mm512_srli_epi32(q, 4), s.table);
  }
};

// Blocks of 32 whose one f16 scale d comes first (Q8_0, Q5_0).
struct LeadingScale {
  static constexpr int kBlockElems = 32;
  static constexpr bool kPlain = false;
  struct Scales {
    __m512 d;
  };
  template <int R>
  static void open(const std::uint8_t* const* blocks, Scales* scales) {
    alignas(32) float dm[8];
    f16_pairs<R>(blocks, dm);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) scales[i].d = _mm512_set1_ps(dm[2 * i]);
  }
};

// Q8_0 (d, int8 qs[32]): weight j is qs[j]·d, exact.
struct Q8_0 : LeadingScale {
  static constexpr int kBlockBytes = 34;
  static void group(const std::uint8_t* block, const Scales& s, int, __m512* w) {
    for (int v = 0; v < 2; ++v) {
      __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + 16 * v));
      w[v] = _mm512_mul_ps(to_float(_mm512_cvtepi8_epi32(q)), s.d);
    }
  }
};

// Q5_0 (d, qh[4], qs[16]): weight j is (q − 16)·d with q the low nibble of qs[j] (j < 16) or the
// high nibble of qs[j − 16], plus bit j of the 32-bit qh as its fifth bit; exact. The fifth bits
// of a half are a lane mask.
struct Q5_0 : LeadingScale {
  static constexpr int kBlockBytes = 22;
  static void group(const std::uint8_t* block, const Scales& s, int, __m512* w) {
    std::uint32_t qh;
    std::memcpy(&qh, block + 2, sizeof(qh));
    const __m512i q = bytes_u32(block + 6);
    const __m512i sixteen = _mm512_set1_epi32(16);
    const __m512i halves[2] = {_mm512_and_si512(q, _mm512_set1_epi32(15)), _mm512_srli_epi32(q, 4)};
    for (int v = 0; v < 2; ++v) {
      const auto fifth = static_cast<__mmask16>(qh >> (16 * v));
      const __m512i centred = _mm512_sub_epi32(halves[v], sixteen);
      w[v] = _mm512_mul_ps(to_float(_mm512_mask_add_epi32(centred, fifth, centred, sixteen)), s.d);
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
    const __m512 both = f16_pair(block);
    Scales s;
    _mm256_store_ps(s.d, _mm256_mul_ps(eight(scales), _mm512_castps512_ps256(lane(both, 0))));
    _mm256_store_ps(s.m, _mm256_mul_ps(eight(mins), _mm512_castps512_ps256(lane(both, 1))));
    return s;
  }
  static __m256 eight(std::uint64_t bytes) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))));
  }
  static void group(const std::uint8_t* block, const Scales& s, int g, __m512* w) {
    const __m512 table =
        _mm512_fmsub_ps(nibble_values(0), _mm512_set1_ps(s.d[g]), _mm512_set1_ps(s.m[g]));
    for (int v = 0; v < 2; ++v) {
      const __m512i q = bytes_u32(block + 16 + 32 * (g / 2) + 16 * v);
      w[v] = lookup(g % 2 == 0 ? q : _mm512_srli_epi32(q, 4), table);
    }
  }
};

// Q5_K (d, dmin, scales[12], qh[32], qs[128]): Q4_K's sub-blocks with a fifth bit per weight,
// bit g of qh[l] for weight l of sub-block g. Its 32 possible values (d·scale)·q − dmin·min are
// two tables of 16 (one fmsub each, rounding once as dequantize_row does) that vpermt2ps reads
// with the 5-bit q as index.
struct Q5_K : Q4_K {  // Q4_K's block start: its scales open as Q4_K's
  static constexpr int kBlockBytes = 176;
  static void group(const std::uint8_t* block, const Scales& s, int g, __m512* w) {
    const __m512 d = _mm512_set1_ps(s.d[g]), m = _mm512_set1_ps(s.m[g]);
    const __m512 low_table = _mm512_fmsub_ps(nibble_values(0), d, m);
    const __m512 high_table = _mm512_fmsub_ps(nibble_values(16), d, m);
    for (int v = 0; v < 2; ++v) {
      __m512i q = bytes_u32(block + 48 + 32 * (g / 2) + 16 * v);
      q = g % 2 == 0 ? _mm512_and_si512(q, _mm512_set1_epi32(15)) : _mm512_srli_epi32(q, 4);
      const __mmask16 fifth =
          _mm512_test_epi32_mask(bytes_u32(block + 16 + 16 * v), _mm512_set1_epi32(1 << g));
      q = _mm512_mask_or_epi32(q, fifth, q, _mm512_set1_epi32(16));
      w[v] = _mm512_permutex2var_ps(low_table, q, high_table);
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
    alignas(64) float d[16];
  };
  static Scales open_one(const std::uint8_t* block) {
    __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192));
    Scales s;
    _mm512_store_ps(
        s.d, _mm512_mul_ps(to_float(_mm512_cvtepi8_epi32(sc)), lane(f16_single(block + 208), 0)));
    return s;
  }
  static void group(const std::uint8_t* block, const Scales& s, int g, __m512* w) {
    const int h = g / 4, k = g % 4;
    for (int v = 0; v < 2; ++v) {
      __m512i low = bytes_u32(block + 64 * h + 32 * (k % 2) + 16 * v);
      low = k < 2 ? _mm512_and_si512(low, _mm512_set1_epi32(15)) : _mm512_srli_epi32(low, 4);
      __m512i high = _mm512_srli_epi32(bytes_u32(block + 128 + 32 * h + 16 * v), 2 * k);
      high = _mm512_slli_epi32(_mm512_and_si512(high, _mm512_set1_epi32(3)), 4);
      __m512i q = _mm512_sub_epi32(_mm512_or_si512(low, high), _mm512_set1_epi32(32));
      w[v] = _mm512_mul_ps(to_float(q), _mm512_set1_ps(s.d[2 * g + v]));
    }
  }
};

// Plain formats in groups of 32 elements.
struct NoScales {};

struct F32 : OpenEachRow<F32> {
  static constexpr int kBlockElems = 32;
  static constexpr int kBlockBytes = 128;
  static constexpr bool kPlain = true;
  using Scales = NoScales;
  static Scales open_one(const std::uint8_t*) { return {}; }
  static void group(const std::uint8_t* block, const Scales&, int, __m512* w) {
    w[0] = _mm512_loadu_ps(block);
    w[1] = _mm512_loadu_ps(block + 64);
  }
};

__m256i load_256(const std::uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

struct F16 : OpenEachRow<F16> {
  static constexpr int kBlockElems = 32;
  static constexpr int kBlockBytes = 64;
  static constexpr bool kPlain = true;
  using Scales = NoScales;
  static Scales open_one(const std::uint8_t*) { return {}; }
  static void group(const std::uint8_t* block, const Scales&, int, __m512* w) {
    w[0] = widen_f16(load_256(block));
    w[1] = widen_f16(load_256(block + 32));
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

const GgufMatmulKernels kGgufMatmulAvx512{gguf_blocked::tile_for<Avx512, Formats>};

}  // namespace md::kernels

#endif  // __x86_64__
