// The GGUF GEMV kernels against dequantise-then-multiply in double precision, for every format and
// every vector path the CPU has, on random blocks whose f16 scales include zero, negative values,
// subnormals and the largest f16. Also: bitwise independence from the batch and the row split,
// the documented reduction order, accumulate mode, and a negative control.
#include "kernels/gguf_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_matmul_kernels.h"
#include "kernels/isa.h"
#include "kernels/weight_matrix.h"
#include "kernels/weight_streaming_testing.h"

namespace md::kernels {
namespace {

using test::random_floats;

// f16 scales: mostly moderate, sometimes zero, negative zero, the largest f16, the smallest
// subnormal, the largest subnormal, the smallest normal.
constexpr std::uint16_t kExtremeF16[] = {0x0000, 0x8000, 0x7bff, 0xfbff, 0x0001,
                                         0x03ff, 0x83ff, 0x0400, 0x8400};

std::uint16_t random_f16_scale(std::mt19937_64& rng, bool extremes) {
  if (extremes && rng() % 4 == 0) return kExtremeF16[rng() % std::size(kExtremeF16)];
  // Exponents 5..19 (about 1e-3..16), either sign, any mantissa.
  const auto exponent = static_cast<std::uint16_t>(5 + rng() % 15);
  return static_cast<std::uint16_t>((rng() & 0x8000) | (exponent << 10) | (rng() & 0x3ff));
}

void put_u16(std::uint8_t* p, std::uint16_t bits) {
  p[0] = static_cast<std::uint8_t>(bits);
  p[1] = static_cast<std::uint8_t>(bits >> 8);
}

// Where each block format keeps its f16 scales.
std::vector<int> scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
      return {0};
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

bool is_plain(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

// A plain element: finite, mostly moderate, sometimes zero, tiny (subnormal in its format) or
// large.
void put_plain(GgmlType type, std::uint8_t* p, std::mt19937_64& rng, bool extremes) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (type == GgmlType::kF16) {
    put_u16(p, extremes && rng() % 8 == 0 ? kExtremeF16[rng() % std::size(kExtremeF16)]
                                          : random_f16_scale(rng, false));
    return;
  }
  float value = normal(rng);
  if (extremes && rng() % 8 == 0) {
    const float specials[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 1e20f, -1e20f};
    value = specials[rng() % std::size(specials)];
  }
  if (type == GgmlType::kF32) {
    std::memcpy(p, &value, sizeof(value));
  } else {
    put_u16(p, f32_to_bf16(value));
  }
}

// Random weights of `type` starting one byte past an allocation (a GGUF tensor needs no
// alignment here) with `pad` spare bytes after each row.
struct Weights {
  GgmlType type;
  int64_t rows, cols;
  std::size_t row_bytes;
  std::vector<std::uint8_t> storage;

  Weights(GgmlType t, int64_t r, int64_t c, std::uint64_t seed, bool extremes = true,
          std::size_t pad = 0)
      : type(t), rows(r), cols(c) {
    const GgmlTypeInfo& info = ggml_type_info(t);
    const std::size_t packed = static_cast<std::size_t>(c / info.block_elems) * info.block_bytes;
    row_bytes = packed + pad;
    storage.resize(1 + row_bytes * static_cast<std::size_t>(r));
    std::mt19937_64 rng(seed);
    for (auto& byte : storage) byte = static_cast<std::uint8_t>(rng());
    for (int64_t row = 0; row < r; ++row) {
      std::uint8_t* p = data() + static_cast<std::size_t>(row) * row_bytes;
      for (std::size_t b = 0; b < packed / info.block_bytes; ++b) {
        std::uint8_t* block = p + b * info.block_bytes;
        if (is_plain(t)) put_plain(t, block, rng, extremes);
        for (int offset : scale_offsets(t))
          put_u16(block + offset, random_f16_scale(rng, extremes));
      }
    }
  }
  std::uint8_t* data() { return storage.data() + 1; }
  GgufMatrix matrix() const { return {type, storage.data() + 1, rows, cols, row_bytes}; }
  // The reference weights: dequantize_row's f32 values (tested on their own in
  // gguf_dequant_test.cpp against an elementwise transcription of each layout).
  std::vector<float> row(int64_t r) const {
    std::vector<float> values(static_cast<std::size_t>(cols));
    EXPECT_TRUE(dequantize_row(type, matrix().row(r), values.data(), cols));
    return values;
  }
};

// Activations: `n` rows `stride` floats apart, one float past an allocation.
struct Inputs {
  int64_t n, cols, stride;
  std::vector<float> storage;
  Inputs(int64_t rows, int64_t c, std::uint64_t seed)
      : n(rows),
        cols(c),
        stride(c + 3),
        storage(random_floats(static_cast<std::size_t>(rows * stride + 1), seed)) {}
  const float* x() const { return storage.data() + 1; }
  const float* row(int64_t t) const { return x() + t * stride; }
};

struct TypeCase {
  GgmlType type;
  std::vector<int64_t> cols;
};

// Column counts: one block, a few, and the SmolLM2 widths (576, 1536); plain formats also around
// the 32-column group and the vector widths (tails).
const std::vector<TypeCase>& type_cases() {
  static const std::vector<TypeCase> cases = {
      {GgmlType::kQ4_0, {32, 64, 96, 576}},
      {GgmlType::kQ4_1, {32, 64, 160, 576, 1536}},
      {GgmlType::kQ8_0, {32, 96, 576}},
      {GgmlType::kQ4_K, {256, 512, 1536}},
      {GgmlType::kQ6_K, {256, 768}},
      {GgmlType::kQ5_0, {32, 64, 96, 576}},
      {GgmlType::kQ5_K, {256, 512, 1536}},
      {GgmlType::kF32, {1, 5, 8, 17, 31, 32, 33, 100, 576}},
      {GgmlType::kF16, {1, 7, 16, 31, 32, 47, 64, 577}},
  };
  return cases;
}

// The f32 accumulation error of one output is at most k·2^-24·(Σ|w·x| + |y0|), k the longest
// chain of roundings an input passes through: every path gives each column to one of at least 16
// lane accumulators (chains of cols/16 fmas, or multiply-adds in the scalar path), then adds the
// lanes in a tree of 5 levels and y0 once. The weights themselves are exact (gguf_matmul.h), so
// this standard bound needs no slack; a wrong element, scale or index is off by O(|w·x|).
double tolerance(int64_t cols, double magnitude) {
  const double chain = static_cast<double>(cols) / 16.0 + 8.0;
  return chain * 0x1p-24 * magnitude + 1e-35;
}

// max over outputs of |y − reference| / tolerance (> 1 means a mismatch), for y[t][r] at
// y[t * y_stride + r] over rows [r0, r1) and inputs [0, n), y0 the values before the call (when
// accumulating).
double worst_error(const Weights& w, const Inputs& in, int64_t n, int64_t r0, int64_t r1,
                   const std::vector<float>& y, int64_t y_stride, const std::vector<float>* y0) {
  double worst = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const std::vector<float> weights = w.row(r);
    for (int64_t t = 0; t < n; ++t) {
      const auto at = static_cast<std::size_t>(t * y_stride + r);
      double sum = y0 != nullptr ? (*y0)[at] : 0.0;
      double magnitude = std::abs(sum);
      for (int64_t c = 0; c < w.cols; ++c) {
        const double term = static_cast<double>(weights[static_cast<std::size_t>(c)]) *
                            static_cast<double>(in.row(t)[c]);
        sum += term;
        magnitude += std::abs(term);
      }
      worst = std::max(worst, std::abs(y[at] - sum) / tolerance(w.cols, magnitude));
    }
  }
  return worst;
}

std::string label(Isa isa, GgmlType type, int64_t cols) {
  return std::string(isa_name(isa)) + " " + std::string(ggml_type_name(type)) + " cols " +
         std::to_string(cols);
}

class GgufMatmulIsa : public ::testing::TestWithParam<Isa> {
 protected:
  GgufTileFn tile(GgmlType type) const { return gguf_matmul_kernels(GetParam()).tile_for(type); }

  // Every output computed on its own: one row, one input.
  std::vector<float> one_by_one(const Weights& w, const Inputs& in) const {
    std::vector<float> y(static_cast<std::size_t>(in.n * w.rows), -7.0f);
    for (int64_t t = 0; t < in.n; ++t) {
      for (int64_t r = 0; r < w.rows; ++r) {
        tile(w.type)(w.matrix(), r, r + 1, in.row(t), in.stride, 1,
                     MatmulOut{y.data() + t * w.rows, w.rows, false});
      }
    }
    return y;
  }
};

TEST_P(GgufMatmulIsa, MatchesDoubleReferenceForEveryFormat) {
  for (const TypeCase& tc : type_cases()) {
    ASSERT_NE(tile(tc.type), nullptr) << ggml_type_name(tc.type);
    for (int64_t cols : tc.cols) {
      for (int64_t n : {1, 3, 8, 17}) {  // 17: the many-row panels (gguf_matmul_panels.h)
        for (bool accumulate : {false, true}) {
          const auto seed = static_cast<std::uint64_t>(cols * 131 + n * 7 + accumulate);
          const Weights w(tc.type, 13, cols, seed, true, accumulate ? 5 : 0);
          const Inputs in(n, cols, seed + 1);
          const int64_t y_stride = w.rows + 2;
          std::vector<float> y = random_floats(static_cast<std::size_t>(n * y_stride), seed + 2);
          const std::vector<float> before = y;
          tile(tc.type)(w.matrix(), 0, w.rows, in.x(), in.stride, n,
                        MatmulOut{y.data(), y_stride, accumulate});
          EXPECT_LE(worst_error(w, in, n, 0, w.rows, y, y_stride, accumulate ? &before : nullptr),
                    1.0)
              << label(GetParam(), tc.type, cols) << " inputs " << n << " accumulate "
              << accumulate;
          // The padding between output rows is never written.
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = w.rows; r < y_stride; ++r) {
              const auto at = static_cast<std::size_t>(t * y_stride + r);
              ASSERT_EQ(y[at], before[at]) << label(GetParam(), tc.type, cols);
            }
          }
        }
      }
    }
  }
}

// The order gguf_matmul_blocked.h (vector paths) and gguf_matmul_scalar.cpp document, replayed on
// dequantize_row's weights: bitwise equality shows both that the in-register weights are exactly
// dequantize_row's and that the order is the documented one.
float documented_order(Isa isa, const std::vector<float>& w, const float* x) {
  const auto cols = static_cast<int64_t>(w.size());
  if (isa == Isa::kScalar) {
    float acc[16] = {};
    // Not contracted into an fma: this file is built for the baseline ISA, which has none.
    for (int64_t c = 0; c < cols; ++c) acc[c % 16] += w[static_cast<std::size_t>(c)] * x[c];
    for (int width = 8; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    }
    return acc[0];
  }
  const int lanes = isa == Isa::kAvx512 ? 16 : 8;
  float acc[2][16] = {};
  const int64_t padded = (cols + 31) / 32 * 32;  // plain tails: zero weights and inputs
  for (int64_t c = 0; c < padded; ++c) {
    const float wc = c < cols ? w[static_cast<std::size_t>(c)] : 0.0f;
    const float xc = c < cols ? x[c] : 0.0f;
    float& a = acc[(c / lanes) % 2][c % lanes];
    a = std::fma(wc, xc, a);
  }
  float lane[16];
  for (int l = 0; l < lanes; ++l) lane[l] = acc[0][l] + acc[1][l];
  for (int width = lanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

TEST_P(GgufMatmulIsa, FollowsTheDocumentedReductionOrderBitwise) {
  for (const TypeCase& tc : type_cases()) {
    for (int64_t cols : tc.cols) {
      const Weights w(tc.type, 6, cols, static_cast<std::uint64_t>(cols) + 17);
      // 2 rows take the register-blocked GEMV, 13 the many-row panels (on the vector paths).
      for (int64_t n : {2, 13}) {
        const Inputs in(n, cols, 23);
        std::vector<float> y(static_cast<std::size_t>(in.n * w.rows));
        tile(tc.type)(w.matrix(), 0, w.rows, in.x(), in.stride, in.n,
                      MatmulOut{y.data(), w.rows, false});
        for (int64_t r = 0; r < w.rows; ++r) {
          for (int64_t t = 0; t < in.n; ++t) {
            const float expected = documented_order(GetParam(), w.row(r), in.row(t));
            const float got = y[static_cast<std::size_t>(t * w.rows + r)];
            ASSERT_EQ(0, std::memcmp(&got, &expected, sizeof(float)))
                << label(GetParam(), tc.type, cols) << " row " << r << " input " << t << " of " << n
                << ": " << got << " vs " << expected;
          }
        }
      }
    }
  }
}

TEST_P(GgufMatmulIsa, OutputIsBitwiseIndependentOfBatchAndRowRanges) {
  for (const TypeCase& tc : type_cases()) {
    const int64_t cols = tc.cols.back();
    const Weights w(tc.type, 37, cols, static_cast<std::uint64_t>(cols) + 5);
    const Inputs in(17, cols, 9);
    const std::vector<float> reference = one_by_one(w, in);
    // Row ranges: whole, odd cuts through register blocks, single rows.
    const std::vector<std::vector<int64_t>> cuts_list = {
        {0, 37}, {0, 5, 13, 14, 35, 37}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 37}};
    for (int64_t batch : {1, 2, 3, 5, 8, 9, 17}) {
      for (const auto& cuts : cuts_list) {
        // The first `batch` inputs; outputs of a prefix must not see the inputs after it.
        std::vector<float> y(static_cast<std::size_t>(batch * w.rows), -7.0f);
        for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
          tile(tc.type)(w.matrix(), cuts[k], cuts[k + 1], in.x(), in.stride, batch,
                        MatmulOut{y.data(), w.rows, false});
        }
        ASSERT_EQ(0, std::memcmp(y.data(), reference.data(), y.size() * sizeof(float)))
            << label(GetParam(), tc.type, cols) << " batch " << batch << " ranges "
            << cuts.size() - 1;
      }
    }
    // Accumulating adds the same sum once: y0 + s in f32, whatever the batch.
    const std::vector<float> base = random_floats(reference.size(), 5);
    std::vector<float> y = base;
    tile(tc.type)(w.matrix(), 0, w.rows, in.x(), in.stride, in.n,
                  MatmulOut{y.data(), w.rows, true});
    for (std::size_t i = 0; i < y.size(); ++i) {
      const float expected = base[i] + reference[i];
      ASSERT_EQ(0, std::memcmp(&y[i], &expected, sizeof(float)))
          << label(GetParam(), tc.type, cols) << " accumulate, output " << i;
    }
  }
}

// The walk over the weight rows of a product with one or two activation rows
// (kernels/weight_streaming.h) is a performance choice: both walks give every output the bits of
// that output computed alone, for whole ranges, odd cuts, ranges of fewer rows than streams, a
// range longer than one 2 MiB window (Q4_1 at 576 columns: 360-byte rows, 5825 to a window), and
// when accumulating.
TEST_P(GgufMatmulIsa, BothWeightWalksGiveTheSameBits) {
  struct Case {
    GgmlType type;
    int64_t rows, cols;
  };
  std::vector<Case> cases;
  for (const TypeCase& tc : type_cases()) cases.push_back({tc.type, 37, tc.cols.back()});
  cases.push_back({GgmlType::kQ4_1, 6000, 576});
  for (const Case& c : cases) {
    const Weights w(c.type, c.rows, c.cols, static_cast<std::uint64_t>(c.cols) + 41);
    const Inputs in(3, c.cols, 43);
    const std::vector<float> reference = one_by_one(w, in);
    const std::vector<std::vector<int64_t>> cuts_list = {
        {0, c.rows}, {0, 3, c.rows / 2, c.rows / 2 + 1, c.rows}, {0, 2, 5, c.rows}};
    for (WeightStreaming walk : {WeightStreaming::kPrefetch, WeightStreaming::kHardware}) {
      md::testing::ForcedWeightStreaming forced(walk);
      // One and two activation rows take the four-part walk under kHardware, three do not.
      for (int64_t batch : {1, 2, 3}) {
        const auto size = static_cast<std::size_t>(batch * c.rows);
        for (const auto& cuts : cuts_list) {
          std::vector<float> y(size, -7.0f);
          for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
            tile(c.type)(w.matrix(), cuts[k], cuts[k + 1], in.x(), in.stride, batch,
                         MatmulOut{y.data(), w.rows, false});
          }
          ASSERT_EQ(0, std::memcmp(y.data(), reference.data(), size * sizeof(float)))
              << label(GetParam(), c.type, c.cols) << " " << weight_streaming_name(walk) << " rows "
              << c.rows << " inputs " << batch << " ranges " << cuts.size() - 1;
        }
        // Accumulating adds each output's sum once: y0 + s in f32.
        const std::vector<float> base = random_floats(size, 7);
        std::vector<float> y = base;
        tile(c.type)(w.matrix(), 0, c.rows, in.x(), in.stride, batch,
                     MatmulOut{y.data(), w.rows, true});
        for (std::size_t i = 0; i < size; ++i) {
          const float expected = base[i] + reference[i];
          ASSERT_EQ(0, std::memcmp(&y[i], &expected, sizeof(float)))
              << label(GetParam(), c.type, c.cols) << " " << weight_streaming_name(walk)
              << " accumulating, inputs " << batch << ", output " << i;
        }
      }
    }
  }
}

// Negative control: the reference check must notice weights that differ from the reference in one
// scale (quantised formats) or one group of elements (plain formats). Scales are all ±1 here, so
// the corrupted block's share of the output is not lost among much larger blocks.
TEST_P(GgufMatmulIsa, NoticesACorruptedScale) {
  for (const TypeCase& tc : type_cases()) {
    const int64_t cols = tc.cols.back();
    Weights w(tc.type, 5, cols, 77, false);
    const GgmlTypeInfo& info = ggml_type_info(tc.type);
    const int64_t blocks = cols / info.block_elems;
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        std::uint8_t* block = w.data() + r * w.row_bytes + b * info.block_bytes;
        for (int offset : scale_offsets(tc.type)) {
          put_u16(block + offset, static_cast<std::uint16_t>(0x3c00 | (b % 2) << 15));
        }
      }
    }
    Weights corrupted = w;
    std::uint8_t* p = corrupted.data() + 3 * w.row_bytes;  // row 3, last block
    const std::vector<int> offsets = scale_offsets(tc.type);
    if (offsets.empty()) {
      const float big = 64.0f;
      for (int64_t c = 0; c < std::min<int64_t>(cols, 32); ++c) {
        std::uint8_t* element = p + c * info.block_bytes;
        if (tc.type == GgmlType::kF32) std::memcpy(element, &big, sizeof(big));
        if (tc.type == GgmlType::kF16) put_u16(element, 0x5400);  // 64
      }
    } else {
      put_u16(p + (blocks - 1) * info.block_bytes + offsets[0], 0x4000);  // d = 2
    }
    const Inputs in(2, cols, 78);
    std::vector<float> y(static_cast<std::size_t>(in.n * w.rows));
    tile(tc.type)(corrupted.matrix(), 0, w.rows, in.x(), in.stride, in.n,
                  MatmulOut{y.data(), w.rows, false});
    EXPECT_GT(worst_error(w, in, in.n, 0, w.rows, y, w.rows, nullptr), 1.0)
        << label(GetParam(), tc.type, cols) << ": a corrupted scale went unnoticed";
    EXPECT_LE(worst_error(corrupted, in, in.n, 0, w.rows, y, w.rows, nullptr), 1.0)
        << label(GetParam(), tc.type, cols);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, GgufMatmulIsa, ::testing::ValuesIn(available_isas()),
                         [](const ::testing::TestParamInfo<Isa>& param) {
                           return std::string(isa_name(param.param));
                         });

TEST(GgufMatmul, ThreadedEntryPointEqualsTheActiveTile) {
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kF32}) {
    const Weights w(type, 301, 576, 3);
    const Inputs in(5, 576, 4);
    std::vector<float> packed(static_cast<std::size_t>(in.n * w.cols));
    for (int64_t t = 0; t < in.n; ++t) {
      std::memcpy(packed.data() + t * w.cols, in.row(t),
                  static_cast<std::size_t>(w.cols) * sizeof(float));
    }
    std::vector<float> expected(static_cast<std::size_t>(in.n * w.rows));
    gguf_matmul_kernels(active_isa_level())
        .tile_for(type)(w.matrix(), 0, w.rows, packed.data(), w.cols, in.n,
                        MatmulOut{expected.data(), w.rows, false});
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      // Each input alone and all together, split across the pool.
      std::vector<float> y(expected.size(), -1.0f);
      gguf_matmul(w.matrix(), packed.data(), in.n, y.data(), &pool);
      EXPECT_EQ(0, std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)))
          << ggml_type_name(type) << " threads " << threads;
      for (int64_t t = 0; t < in.n; ++t) {
        std::vector<float> alone(static_cast<std::size_t>(w.rows));
        gguf_matmul(w.matrix(), packed.data() + t * w.cols, 1, alone.data(), &pool);
        EXPECT_EQ(0, std::memcmp(alone.data(), expected.data() + t * w.rows,
                                 alone.size() * sizeof(float)))
            << ggml_type_name(type) << " input " << t << " alone, threads " << threads;
      }
    }
    std::vector<float> tiled(expected.size());
    gguf_matmul_tile(w.matrix(), 0, 100, packed.data(), w.cols, in.n,
                     MatmulOut{tiled.data(), w.rows, false});
    gguf_matmul_tile(w.matrix(), 100, w.rows, packed.data(), w.cols, in.n,
                     MatmulOut{tiled.data(), w.rows, false});
    EXPECT_EQ(0, std::memcmp(tiled.data(), expected.data(), tiled.size() * sizeof(float)));
  }
}

TEST(GgufMatmul, AcceptsOnlyWholeBlocksOfSupportedFormats) {
  std::vector<std::uint8_t> data(4096);
  EXPECT_TRUE(gguf_matmul_accepts({GgmlType::kQ4_1, data.data(), 2, 64, 40}));
  EXPECT_TRUE(gguf_matmul_accepts({GgmlType::kF16, data.data(), 2, 33, 66}));
  EXPECT_FALSE(gguf_matmul_accepts({GgmlType::kQ4_1, data.data(), 2, 48, 40}));  // 1.5 blocks
  EXPECT_FALSE(gguf_matmul_accepts({GgmlType::kQ4_1, data.data(), 2, 64, 39}));  // row too short
  EXPECT_FALSE(gguf_matmul_accepts({GgmlType::kQ3_K, data.data(), 2, 256, 110}));
  EXPECT_FALSE(gguf_matmul_accepts({GgmlType::kQ4_K, data.data(), 2, 128, 144}));
  EXPECT_FALSE(gguf_matmul_accepts({GgmlType::kQ5_K, data.data(), 2, 128, 176}));
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
        GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(gguf_matmul_supports(type)) << ggml_type_name(type);
    for (Isa isa : available_isas()) EXPECT_NE(gguf_matmul_kernels(isa).tile_for(type), nullptr);
  }
  EXPECT_FALSE(gguf_matmul_supports(GgmlType::kQ5_1));
  // BF16 is supported, through the bf16 kernels (next test), and only densely packed.
  EXPECT_TRUE(gguf_matmul_supports(GgmlType::kBF16));
  EXPECT_TRUE(gguf_matmul_accepts({GgmlType::kBF16, data.data(), 2, 33, 66}));
  EXPECT_FALSE(gguf_matmul_accepts({GgmlType::kBF16, data.data(), 2, 33, 68}));
  EXPECT_FALSE(gguf_matmul_accepts({GgmlType::kBF16, data.data() + 1, 2, 33, 66}));  // odd address
  for (Isa isa : available_isas())
    EXPECT_EQ(gguf_matmul_kernels(isa).tile_for(GgmlType::kBF16), nullptr);
}

// One bf16 path: a BF16 GGUF matrix gives exactly what the bf16 kernels (matmul.h) give for the
// same bits, through the tile entry, the threaded entry and the format-tagged WeightMatrix.
TEST(GgufMatmul, Bf16GoesThroughTheBf16Kernels) {
  for (int64_t cols : {3, 33, 250, 576}) {
    const Weights w(GgmlType::kBF16, 131, cols, 11);
    const Inputs in(3, cols, 12);
    // The same bits at an even address (Weights sits at an odd one to exercise unaligned blocks).
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(w.rows * cols));
    std::memcpy(bits.data(), w.matrix().data, bits.size() * 2);
    const GgufMatrix matrix_bits{GgmlType::kBF16,
                                 reinterpret_cast<const std::uint8_t*>(bits.data()), w.rows, cols,
                                 static_cast<std::size_t>(cols) * 2};
    ASSERT_TRUE(gguf_matmul_accepts(matrix_bits));
    const Bf16Matrix view = bf16_view(matrix_bits);
    ASSERT_EQ(view.data, bits.data());
    std::vector<float> expected(static_cast<std::size_t>(in.n * w.rows));
    matmul_tile(view, 0, w.rows, in.x(), in.stride, in.n, {expected.data(), w.rows, false});
    std::vector<float> tiled(expected.size(), -1.0f);
    gguf_matmul_tile(matrix_bits, 0, 50, in.x(), in.stride, in.n, {tiled.data(), w.rows, false});
    gguf_matmul_tile(matrix_bits, 50, w.rows, in.x(), in.stride, in.n,
                     {tiled.data(), w.rows, false});
    EXPECT_EQ(0, std::memcmp(tiled.data(), expected.data(), tiled.size() * sizeof(float))) << cols;
    std::vector<float> tagged(expected.size(), -1.0f);
    const WeightMatrix matrix = WeightMatrix::of(matrix_bits);
    EXPECT_EQ(matrix.format, WeightFormat::kBf16);
    weight_tile(matrix, 0, w.rows, in.x(), in.stride, in.n, {tagged.data(), w.rows, false});
    EXPECT_EQ(0, std::memcmp(tagged.data(), expected.data(), tagged.size() * sizeof(float)))
        << cols;
    // Accuracy of the bf16 kernel on these bits (its own contract, restated here).
    EXPECT_LE(worst_error(w, in, in.n, 0, w.rows, tiled, w.rows, nullptr), 1.0) << cols;
  }
}

}  // namespace
}  // namespace md::kernels
