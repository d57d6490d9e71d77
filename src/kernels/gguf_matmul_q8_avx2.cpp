// The AVX2 path of kernels/gguf_matmul_q8.h, compiled with -mavx2 -mfma -mf16c alone
// (src/kernels/CMakeLists.txt) and entered only when CPUID reports them. A block's 32 weights
// are one register of bytes; vpmaddubsw multiplies them with the 32 int8 activations and adds
// adjacent pairs (int16, no overflow: |w| <= 128, |q| <= 127), vpmaddwd adds pairs again, which
// leaves exactly the eight four-column lane sums of the contract, converted to f32 exactly.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/gguf_matmul_q8.h"
#include "kernels/gguf_q8_packing.h"

namespace md::kernels {

namespace {

float f16_at(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return _cvtsh_ss(bits);  // exact, subnormals included
}

// Lanes l and l + 4, then l + 2, l + 1: the contract's tree.
float lane_sum(__m256 v) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

float lane_max(__m256 v) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  __m128 m1 = _mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1));
  return _mm_cvtss_f32(m1);
}

int lane_sum_i32(__m256i v) {
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  __m128i s1 = _mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1));
  return _mm_cvtsi128_si32(s1);
}

void quantize_row(const float* x, int64_t cols, std::int8_t* qs, float* d, float* s) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // vpackssdw / vpacksswb interleave the two 128-bit halves; this puts columns back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < cols / kQ8Block; ++b) {
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + b * kQ8Block + 8 * k);
    __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    const float amax = lane_max(m);
    const __m256 inverse = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], inverse));
    const int sum =
        lane_sum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQ8Block),
                        _mm256_permutevar8x32_epi32(packed, order));
    d[b] = amax / 127.0f;
    s[b] = d[b] * static_cast<float>(sum);
  }
}

__m256i nibbles(const std::uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
}

// Unsigned weights (0..15) times signed activations.
__m256i dot_unsigned(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// Signed weights: |w| times a with w's sign (vpsignb), so that vpmaddubsw's unsigned operand is
// the magnitude.
__m256i dot_signed(__m256i w, __m256i a) {
  return dot_unsigned(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

// Each format: its block size, where the quant bytes start in a block (after the f16 scale and
// minimum), how many there are, and how they become 32 weight bytes.
struct Q4_0 {
  static constexpr int kBytes = 18;
  static constexpr int kQuantOffset = 2;
  static constexpr int kQuantBytes = 16;
  static constexpr bool kHasMin = false;
  static __m256i quants(const std::uint8_t* q) {
    return _mm256_sub_epi8(nibbles(q), _mm256_set1_epi8(8));
  }
  static __m256i dot(__m256i w, __m256i a) { return dot_signed(w, a); }
};

struct Q4_1 {
  static constexpr int kBytes = 20;
  static constexpr int kQuantOffset = 4;
  static constexpr int kQuantBytes = 16;
  static constexpr bool kHasMin = true;
  static __m256i quants(const std::uint8_t* q) { return nibbles(q); }
  static __m256i dot(__m256i w, __m256i a) { return dot_unsigned(w, a); }
};

struct Q8_0 {
  static constexpr int kBytes = 34;
  static constexpr int kQuantOffset = 2;
  static constexpr int kQuantBytes = 32;
  static constexpr bool kHasMin = false;
  static __m256i quants(const std::uint8_t* q) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  }
  static __m256i dot(__m256i w, __m256i a) { return dot_signed(w, a); }
};

// Prefetch distance ahead of each weight row, as the f32 path (gguf_matmul_blocked.h).
constexpr int64_t kPrefetchBytes = 4096;
constexpr int kMaxGroup = 4;  // activation rows held at once
constexpr int rows_for(int n) {
  return n == 1 ? 4 : 2;
}
constexpr int kMaxRows = rows_for(1);

// R weight rows (from row0) × N quantised activation rows (from n0): sums[i·N + j].
template <class F, int R, int N>
void block(const GgufMatrix& w, int64_t row0, const Q8Rows& x, int64_t n0, float* sums) {
  __m256 acc[R][N];
  float mins[R][N];
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < N; ++j) acc[i][j] = _mm256_setzero_ps(), mins[i][j] = 0.0f;
  }
  const std::uint8_t* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = w.row(row0 + i);
  const int64_t blocks = x.blocks();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i a[N];
    float da[N];
    for (int j = 0; j < N; ++j) {
      a[j] = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(x.qs + (n0 + j) * x.cols + b * kQ8Block));
      da[j] = x.d[(n0 + j) * blocks + b];
    }
    for (int i = 0; i < R; ++i) {
      const std::uint8_t* at = rows[i] + b * F::kBytes;
      __builtin_prefetch(at + kPrefetchBytes);
      const __m256i wq = F::quants(at + F::kQuantOffset);
      const float dw = f16_at(at);
      for (int j = 0; j < N; ++j) {
        const __m256 lanes = _mm256_cvtepi32_ps(F::dot(wq, a[j]));
        acc[i][j] = _mm256_fmadd_ps(lanes, _mm256_set1_ps(dw * da[j]), acc[i][j]);
      }
      if constexpr (F::kHasMin) {
        const float m = f16_at(at + 2);
        for (int j = 0; j < N; ++j)
          mins[i][j] = std::fma(m, x.s[(n0 + j) * blocks + b], mins[i][j]);
      }
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < N; ++j) {
      sums[i * N + j] = F::kHasMin ? lane_sum(acc[i][j]) + mins[i][j] : lane_sum(acc[i][j]);
    }
  }
}

using BlockFn = void (*)(const GgufMatrix&, int64_t, const Q8Rows&, int64_t, float*);

// fn[N - 1][R - 1] for R up to rows_for(N): the ragged end of a range takes a shorter block.
struct BlockTable {
  BlockFn fn[kMaxGroup][kMaxRows];
};

template <class F, int... I>
constexpr BlockTable make_blocks(std::integer_sequence<int, I...>) {
  BlockTable table{};
  auto fill = [&]<int N, int R>() {
    if constexpr (R <= rows_for(N)) table.fn[N - 1][R - 1] = block<F, R, N>;
  };
  (fill.template operator()<I / kMaxRows + 1, I % kMaxRows + 1>(), ...);
  return table;
}

template <class F>
inline constexpr BlockTable kBlocks =
    make_blocks<F>(std::make_integer_sequence<int, kMaxGroup * kMaxRows>());

// With more activation rows than one group, passes of about this many weight bytes are re-read
// from L1 once per group.
constexpr int64_t kPassBytes = 16 * 1024;

template <class F>
void tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const Q8Rows& x,
          const MatmulOut& out) {
  int64_t pass = row_end - row_begin;
  if (x.n_rows > kMaxGroup) {
    pass = std::max<int64_t>(kMaxRows,
                             kPassBytes / static_cast<int64_t>(w.row_bytes) / kMaxRows * kMaxRows);
  }
  float sums[kMaxRows * kMaxGroup];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += pass) {
    const int64_t r1 = std::min(row_end, r0 + pass);
    for (int64_t n0 = 0; n0 < x.n_rows; n0 += kMaxGroup) {
      const int group = static_cast<int>(std::min<int64_t>(kMaxGroup, x.n_rows - n0));
      const int64_t block_rows = rows_for(group);
      const auto& fns = kBlocks<F>.fn[group - 1];
      for (int64_t i0 = r0; i0 < r1; i0 += block_rows) {
        const int64_t rr = std::min(block_rows, r1 - i0);
        fns[rr - 1](w, i0, x, n0, sums);
        for (int64_t i = 0; i < rr; ++i) {
          for (int j = 0; j < group; ++j) {
            float& y = out.y[(n0 + j) * out.y_stride + i0 + i];
            y = out.accumulate ? y + sums[i * group + j] : sums[i * group + j];
          }
        }
      }
    }
  }
}

// --- Packed rows (gguf_q8_packing.h): eight rows' scales convert in one instruction ------

template <class F>
struct Packed {
  static constexpr int kScaleBytes = F::kQuantOffset * kQ8PackRows;  // d[8] (+ m[8])
  static constexpr int kColumnBytes = F::kBytes * kQ8PackRows;
  static __m256 scales(const std::uint8_t* column, int which) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(column + 16 * which)));
  }
  static __m256i weights(const std::uint8_t* column, int row) {
    return F::quants(column + kScaleBytes + F::kQuantBytes * row);
  }
};

// Rows [row0, row0 + R) of one packed group × N activation rows from n0: sums[i·N + j]. The
// arithmetic per output is the per-row kernel's (block() above), in the same order.
// row0 is a template argument so that the scale addresses are constants (a run-time row0 cost
// the loop its pointer registers).
template <class F, int R, int N, int row0>
void packed_block(const std::uint8_t* group, const Q8Rows& x, int64_t n0, float* sums) {
  using P = Packed<F>;
  __m256 acc[R][N];
  __m256 mins[N];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) {
    mins[j] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) acc[i][j] = _mm256_setzero_ps();
  }
  const int64_t blocks = x.blocks();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::uint8_t* column = group + b * P::kColumnBytes;
    __builtin_prefetch(column + kPrefetchBytes);
    __builtin_prefetch(column + kPrefetchBytes + 64);
    __builtin_prefetch(column + kPrefetchBytes + 128);
    const __m256 d = P::scales(column, 0);
    alignas(32) float scale[N][kQ8PackRows];
    __m256i a[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      a[j] = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(x.qs + (n0 + j) * x.cols + b * kQ8Block));
      // dw·da for the eight rows, each rounded as the per-row kernel rounds it.
      _mm256_store_ps(scale[j], _mm256_mul_ps(d, _mm256_set1_ps(x.d[(n0 + j) * blocks + b])));
      if constexpr (F::kHasMin) {
        mins[j] = _mm256_fmadd_ps(P::scales(column, 1), _mm256_set1_ps(x.s[(n0 + j) * blocks + b]),
                                  mins[j]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256i wq = P::weights(column, row0 + i);
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        const __m256 lanes = _mm256_cvtepi32_ps(F::dot(wq, a[j]));
        acc[i][j] = _mm256_fmadd_ps(lanes, _mm256_broadcast_ss(&scale[j][row0 + i]), acc[i][j]);
      }
    }
  }
  for (int j = 0; j < N; ++j) {
    alignas(32) float m[kQ8PackRows];
    _mm256_store_ps(m, mins[j]);
    for (int i = 0; i < R; ++i) {
      sums[i * N + j] = F::kHasMin ? lane_sum(acc[i][j]) + m[row0 + i] : lane_sum(acc[i][j]);
    }
  }
}

// One activation row: whole groups of eight. Two to four: half groups (4 rows × 2 activation
// rows keep 8 accumulators, as 8 × 1 does).
template <class F>
void packed_tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const Q8Rows& x,
                 const MatmulOut& out) {
  const std::size_t group_bytes = static_cast<std::size_t>(x.blocks()) * Packed<F>::kColumnBytes;
  const int rows_per_block = x.n_rows == 1 ? kQ8PackRows : kQ8PackRows / 2;
  const int n_group = x.n_rows == 1 ? 1 : 2;
  float sums[kQ8PackRows * 2];
  // Passes over about kPassBytes of weights when several activation groups re-read them.
  int64_t pass = row_end - row_begin;
  if (x.n_rows > n_group) {
    pass = std::max<int64_t>(
        kQ8PackRows, kPassBytes / static_cast<int64_t>(w.row_bytes) / kQ8PackRows * kQ8PackRows);
  }
  for (int64_t p0 = row_begin; p0 < row_end; p0 += pass) {
    const int64_t p1 = std::min(row_end, p0 + pass);
    for (int64_t n0 = 0; n0 < x.n_rows; n0 += n_group) {
      const int group_n = static_cast<int>(std::min<int64_t>(n_group, x.n_rows - n0));
      // Register blocks aligned to the packing: a ragged tile edge computes the whole block and
      // keeps the rows it owns.
      for (int64_t r0 = p0 / rows_per_block * rows_per_block; r0 < p1; r0 += rows_per_block) {
        const std::uint8_t* group =
            w.packed + static_cast<std::size_t>(r0 / kQ8PackRows) * group_bytes;
        constexpr int kHalf = kQ8PackRows / 2;
        const bool upper = r0 % kQ8PackRows != 0;
        if (rows_per_block == kQ8PackRows) {
          packed_block<F, kQ8PackRows, 1, 0>(group, x, n0, sums);
        } else if (group_n == 2) {
          (upper ? packed_block<F, kHalf, 2, kHalf> : packed_block<F, kHalf, 2, 0>)(group, x, n0,
                                                                                    sums);
        } else {
          (upper ? packed_block<F, kHalf, 1, kHalf> : packed_block<F, kHalf, 1, 0>)(group, x, n0,
                                                                                    sums);
        }
        for (int64_t i = std::max(r0, p0); i < std::min(p1, r0 + rows_per_block); ++i) {
          for (int j = 0; j < group_n; ++j) {
            float& y = out.y[(n0 + j) * out.y_stride + i];
            const float v = sums[(i - r0) * group_n + j];
            y = out.accumulate ? y + v : v;
          }
        }
      }
    }
  }
}

void tile_any(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const Q8Rows& x,
              const MatmulOut& out) {
  switch (w.type) {
    case GgmlType::kQ4_0:
      if (w.packed != nullptr) return packed_tile<Q4_0>(w, row_begin, row_end, x, out);
      return tile<Q4_0>(w, row_begin, row_end, x, out);
    case GgmlType::kQ4_1:
      if (w.packed != nullptr) return packed_tile<Q4_1>(w, row_begin, row_end, x, out);
      return tile<Q4_1>(w, row_begin, row_end, x, out);
    default:
      if (w.packed != nullptr) return packed_tile<Q8_0>(w, row_begin, row_end, x, out);
      return tile<Q8_0>(w, row_begin, row_end, x, out);
  }
}

}  // namespace

const GgufQ8Kernels kGgufQ8Avx2{tile_any, quantize_row};

}  // namespace md::kernels

#endif  // defined(__x86_64__)
