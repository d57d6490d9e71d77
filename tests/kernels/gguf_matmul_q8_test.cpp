// The q8 integer-dot mode (kernels/gguf_matmul_q8.h) for Q4_0, Q4_1 and Q8_0, on every path the
// CPU has: the quantiser and the products against a replay of the documented numerics written
// here from the header's words (bitwise), against the exact product in double (within the bound
// the quantisation implies), independence from the batch and the row split, the entry through
// gguf_matmul_tile, and negative controls.
#include "kernels/gguf_matmul_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_q8_packing.h"
#include "kernels/isa.h"

namespace md::kernels {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0};

std::vector<const GgufQ8Kernels*> every_path() {
  std::vector<const GgufQ8Kernels*> paths{&kGgufQ8Scalar};
#if defined(__x86_64__)
  if (best_isa() != Isa::kScalar && has_f16c()) paths.push_back(&kGgufQ8Avx2);
#endif
  return paths;
}

std::string path_name(const GgufQ8Kernels* k) {
  return k == &kGgufQ8Scalar ? "scalar" : "avx2";
}

// Random blocks: random quant bytes, f16 scales of either sign between ~1e-3 and 16, sometimes
// zero or subnormal.
struct Weights {
  GgmlType type;
  int64_t rows, cols;
  std::size_t row_bytes;
  std::vector<std::uint8_t> storage;

  Weights(GgmlType t, int64_t r, int64_t c, std::uint64_t seed) : type(t), rows(r), cols(c) {
    const GgmlTypeInfo& info = ggml_type_info(t);
    row_bytes = static_cast<std::size_t>(c / info.block_elems) * info.block_bytes;
    storage.resize(1 + row_bytes * static_cast<std::size_t>(r));  // unaligned on purpose
    std::mt19937_64 rng(seed);
    for (auto& byte : storage) byte = static_cast<std::uint8_t>(rng());
    const int scales = t == GgmlType::kQ4_1 ? 2 : 1;
    for (int64_t b = 0; b < r * c / 32; ++b) {
      for (int k = 0; k < scales; ++k) put_scale(data() + b * info.block_bytes + 2 * k, rng);
    }
  }
  static void put_scale(std::uint8_t* p, std::mt19937_64& rng) {
    std::uint16_t bits = static_cast<std::uint16_t>((rng() & 0x83ff) | ((5 + rng() % 15) << 10));
    if (rng() % 16 == 0) bits = rng() % 2 ? 0x0000 : 0x0201;  // zero, subnormal
    p[0] = static_cast<std::uint8_t>(bits);
    p[1] = static_cast<std::uint8_t>(bits >> 8);
  }
  std::uint8_t* data() { return storage.data() + 1; }
  GgufMatrix matrix() const {
    return {type, storage.data() + 1, rows, cols, row_bytes, MatmulInputs::kQ8};
  }
  std::vector<float> row(int64_t r) const {
    std::vector<float> values(static_cast<std::size_t>(cols));
    EXPECT_TRUE(dequantize_row(type, matrix().row(r), values.data(), cols));
    return values;
  }
};

// Activations: normal values, a block of zeros, a block with one large outlier, exact ties.
std::vector<float> activations(int64_t n, int64_t cols, std::uint64_t seed) {
  std::vector<float> x = test::random_floats(static_cast<std::size_t>(n * cols), seed, 2.0f);
  if (cols >= 96) {
    for (int64_t row = 0; row < n; ++row) {
      float* r = x.data() + row * cols;
      std::fill(r, r + 32, 0.0f);
      r[40] = 1000.0f;
      // amax 127 makes x·127/amax = x: halves are ties (2.5 → 2, 3.5 → 4, −0.5 → −0).
      r[64] = 127.0f, r[65] = 2.5f, r[66] = 3.5f, r[67] = -0.5f, r[68] = -126.5f;
    }
  }
  return x;
}

// --- The replay of the header's definition ---------------------------------------------------

struct Quantised {
  std::vector<std::int8_t> qs;
  std::vector<float> d, s;
  int64_t cols = 0, n = 0;
  Q8Rows rows() const { return {qs.data(), d.data(), s.data(), cols, n}; }
};

Quantised replay_quantise(const std::vector<float>& x, int64_t n, int64_t cols) {
  Quantised q{std::vector<std::int8_t>(x.size()), std::vector<float>(x.size() / 32),
              std::vector<float>(x.size() / 32), cols, n};
  for (std::size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    for (int k = 0; k < 32; ++k) amax = std::max(amax, std::abs(x[32 * b + k]));
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int k = 0; k < 32; ++k) {
      const float scaled = x[32 * b + k] * inverse;
      // Half to even, written out rather than left to the rounding mode.
      float whole = std::floor(scaled);
      const float fraction = scaled - whole;
      if (fraction > 0.5f || (fraction == 0.5f && std::fmod(whole, 2.0f) != 0.0f)) whole += 1.0f;
      q.qs[32 * b + k] = static_cast<std::int8_t>(whole);
      sum += q.qs[32 * b + k];
    }
    q.d[b] = amax / 127.0f;
    q.s[b] = q.d[b] * static_cast<float>(sum);
  }
  return q;
}

float f16_at(const std::uint8_t* p) {
  return f16_to_f32(static_cast<std::uint16_t>(p[0] | p[1] << 8));
}

// Weight k of a block as the integer the header names.
int weight_int(GgmlType type, const std::uint8_t* block, int k) {
  if (type == GgmlType::kQ8_0) return static_cast<std::int8_t>(block[2 + k]);
  const std::uint8_t byte = block[(type == GgmlType::kQ4_1 ? 4 : 2) + k % 16];
  const int nibble = k < 16 ? byte & 15 : byte >> 4;
  return type == GgmlType::kQ4_0 ? nibble - 8 : nibble;
}

float replay_dot(const GgufMatrix& w, int64_t r, const Quantised& q, int64_t n) {
  const std::size_t block_bytes = ggml_type_info(w.type).block_bytes;
  const int64_t blocks = w.cols / 32;
  float acc[8] = {};
  float mins = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const std::uint8_t* block = w.row(r) + b * block_bytes;
    const float da = q.d[n * blocks + b];
    for (int u = 0; u < 8; ++u) {
      int lane = 0;
      for (int k = 4 * u; k < 4 * u + 4; ++k) {
        lane += weight_int(w.type, block, k) * q.qs[n * w.cols + b * 32 + k];
      }
      acc[u] = std::fma(static_cast<float>(lane), f16_at(block) * da, acc[u]);
    }
    if (w.type == GgmlType::kQ4_1) mins = std::fma(f16_at(block + 2), q.s[n * blocks + b], mins);
  }
  const float a4[4] = {acc[0] + acc[4], acc[1] + acc[5], acc[2] + acc[6], acc[3] + acc[7]};
  const float a2[2] = {a4[0] + a4[2], a4[1] + a4[3]};
  const float total = a2[0] + a2[1];
  return w.type == GgmlType::kQ4_1 ? total + mins : total;
}

Quantised quantise_with(const GgufQ8Kernels& k, const std::vector<float>& x, int64_t n,
                        int64_t cols) {
  Quantised q{std::vector<std::int8_t>(x.size()), std::vector<float>(x.size() / 32),
              std::vector<float>(x.size() / 32), cols, n};
  for (int64_t row = 0; row < n; ++row) {
    k.quantize(x.data() + row * cols, cols, q.qs.data() + row * cols, q.d.data() + row * cols / 32,
               q.s.data() + row * cols / 32);
  }
  return q;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

TEST(GgufQ8, EveryPathQuantisesAsDefined) {
  for (const GgufQ8Kernels* k : every_path()) {
    for (int64_t cols : {32, 96, 576, 1536}) {
      const std::vector<float> x = activations(3, cols, 11 + cols);
      const Quantised expected = replay_quantise(x, 3, cols);
      const Quantised got = quantise_with(*k, x, 3, cols);
      EXPECT_EQ(got.qs, expected.qs) << path_name(k) << " cols " << cols;
      for (std::size_t b = 0; b < got.d.size(); ++b) {
        ASSERT_TRUE(same_bits(got.d[b], expected.d[b])) << path_name(k) << " block " << b;
        ASSERT_TRUE(same_bits(got.s[b], expected.s[b])) << path_name(k) << " block " << b;
      }
      // What the definition promises: each x within half a step of d·q.
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double d = got.d[i / 32];
        EXPECT_LE(std::abs(x[i] - d * got.qs[i]), 0.5 * d * (1 + 1e-6) + 1e-30)
            << path_name(k) << " element " << i;
      }
      if (cols >= 96) {  // the ties of activations(): 2.5 → 2, 3.5 → 4, −0.5 → 0, −126.5 → −126
        EXPECT_EQ(got.qs[65], 2);
        EXPECT_EQ(got.qs[66], 4);
        EXPECT_EQ(got.qs[67], 0);
        EXPECT_EQ(got.qs[68], -126);
        EXPECT_EQ(got.d[0], 0.0f);  // the block of zeros
      }
    }
  }
}

TEST(GgufQ8, EveryPathFollowsTheDefinitionBitwise) {
  for (const GgufQ8Kernels* k : every_path()) {
    for (GgmlType type : kTypes) {
      for (int64_t cols : {32, 64, 576, 1536}) {
        const Weights w(type, 11, cols, 5 + cols);
        for (int64_t n : {1, 2, 3, 4, 5, 9}) {
          const std::vector<float> x = activations(n, cols, 7 * n + cols);
          const Quantised q = replay_quantise(x, n, cols);
          std::vector<float> y(static_cast<std::size_t>(n * w.rows));
          k->tile(w.matrix(), 0, w.rows, q.rows(), MatmulOut{y.data(), w.rows, false});
          for (int64_t j = 0; j < n; ++j) {
            for (int64_t r = 0; r < w.rows; ++r) {
              const float expected = replay_dot(w.matrix(), r, q, j);
              ASSERT_TRUE(same_bits(y[j * w.rows + r], expected))
                  << path_name(k) << " " << ggml_type_info(type).name << " cols " << cols << " n "
                  << n << " row " << r << ": " << y[j * w.rows + r] << " vs " << expected;
            }
          }
        }
      }
    }
  }
}

// Within what the quantisation allows of the exact product: per block, Σ|w|·d/2 (each activation
// moves by at most half a step), plus f32 rounding of the sums. The bound is itself checked to be
// tight (about 1 % of Σ|w·x| for normal activations), so it could not hide a wrong formula.
TEST(GgufQ8, StaysWithinTheQuantisationBoundOfTheExactProduct) {
  for (GgmlType type : kTypes) {
    const int64_t cols = 576, rows = 7, n = 2;
    const Weights w(type, rows, cols, 21);
    const std::vector<float> x = test::random_floats(n * cols, 22);
    const Quantised q = replay_quantise(x, n, cols);
    std::vector<float> y(n * rows);
    gguf_q8_tile(w.matrix(), 0, rows, q.rows(), MatmulOut{y.data(), rows, false});
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> wr = w.row(r);
        double exact = 0, bound = 0, magnitude = 0;
        for (int64_t c = 0; c < cols; ++c) {
          exact += static_cast<double>(wr[c]) * x[j * cols + c];
          bound += std::abs(static_cast<double>(wr[c])) * 0.5 * q.d[(j * cols + c) / 32];
          magnitude += std::abs(static_cast<double>(wr[c]) * x[j * cols + c]);
        }
        bound = bound * (1 + 1e-5) + 1e-5 * magnitude;
        EXPECT_LE(std::abs(y[j * rows + r] - exact), bound)
            << ggml_type_info(type).name << " row " << r;
        EXPECT_LE(bound, 0.03 * magnitude) << ggml_type_info(type).name << " row " << r;
      }
    }
  }
}

// Rows packed by eight (gguf_q8_packing.h), as models hand them to the vector path: bitwise the
// definition for every row count (ragged last group), activation count and row range, including
// ranges that start and end inside a group.
TEST(GgufQ8, PackedRowsFollowTheDefinitionBitwise) {
  for (const GgufQ8Kernels* k : every_path()) {
    for (GgmlType type : kTypes) {
      for (int64_t rows : {1, 8, 13, 24}) {
        const int64_t cols = 192;
        const Weights w(type, rows, cols, 61 + rows);
        std::vector<std::uint8_t> packed(gguf_q8_packed_bytes(w.matrix()));
        pack_gguf_q8_rows(w.matrix(), packed.data());
        GgufMatrix m = w.matrix();
        m.packed = packed.data();
        for (int64_t n : {1, 2, 3, 5}) {
          const Quantised q = replay_quantise(activations(n, cols, 62 + n), n, cols);
          for (int64_t begin : {int64_t{0}, std::min<int64_t>(3, rows - 1)}) {
            const int64_t end = begin == 0 ? rows : std::max(begin + 1, rows - 2);
            std::vector<float> y(static_cast<std::size_t>(n * rows), -7.0f);
            k->tile(m, begin, end, q.rows(), MatmulOut{y.data(), rows, false});
            for (int64_t j = 0; j < n; ++j) {
              for (int64_t r = 0; r < rows; ++r) {
                const float expected = r >= begin && r < end ? replay_dot(m, r, q, j) : -7.0f;
                ASSERT_TRUE(same_bits(y[j * rows + r], expected))
                    << path_name(k) << " " << ggml_type_info(type).name << " rows " << rows << " n "
                    << n << " range " << begin << ".." << end << " row " << r;
              }
            }
          }
        }
      }
    }
  }
}

TEST(GgufQ8, OutputIsBitwiseIndependentOfBatchAndRowRanges) {
  for (const GgufQ8Kernels* k : every_path()) {
    for (GgmlType type : kTypes) {
      const int64_t cols = 192, rows = 23, n = 7;
      const Weights w(type, rows, cols, 31);
      const Quantised q = replay_quantise(activations(n, cols, 32), n, cols);
      std::vector<float> together(static_cast<std::size_t>(n * rows));
      k->tile(w.matrix(), 0, rows, q.rows(), MatmulOut{together.data(), rows, false});
      for (int64_t j = 0; j < n; ++j) {
        const Q8Rows one{q.qs.data() + j * cols, q.d.data() + j * cols / 32,
                         q.s.data() + j * cols / 32, cols, 1};
        // Alone, in ragged row ranges, accumulated onto zeros.
        std::vector<float> zeros(static_cast<std::size_t>(rows), 0.0f);
        for (int64_t begin = 0; begin < rows;) {
          const int64_t end = std::min(rows, begin + 1 + (begin * 7) % 5);
          k->tile(w.matrix(), begin, end, one, MatmulOut{zeros.data(), rows, true});
          begin = end;
        }
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_TRUE(same_bits(zeros[r], together[j * rows + r]))
              << path_name(k) << " " << ggml_type_info(type).name << " n " << j << " row " << r;
        }
      }
    }
  }
}

TEST(GgufQ8, MatmulTileEntersTheModeOnlyForTaggedIntegerBlocks) {
  const int64_t cols = 256, rows = 9, n = 3;
  const std::vector<float> x = activations(n, cols, 41);
  for (GgmlType type : kTypes) {
    const Weights w(type, rows, cols, 42);
    const Quantised q = quantise_with(*every_path().back(), x, n, cols);
    std::vector<float> direct(static_cast<std::size_t>(n * rows)), entered(direct.size()),
        plain(direct.size());
    gguf_q8_tile(w.matrix(), 0, rows, q.rows(), MatmulOut{direct.data(), rows, false});
    gguf_matmul_tile(w.matrix(), 0, rows, x.data(), cols, n,
                     MatmulOut{entered.data(), rows, false});
    GgufMatrix untagged = w.matrix();
    untagged.inputs = MatmulInputs::kF32;
    gguf_matmul_tile(untagged, 0, rows, x.data(), cols, n, MatmulOut{plain.data(), rows, false});
    EXPECT_EQ(entered, direct) << ggml_type_info(type).name;
    EXPECT_NE(plain, direct) << ggml_type_info(type).name << ": kF32 must not quantise";
  }
  EXPECT_FALSE(gguf_q8_supports(GgmlType::kQ4_K));
  EXPECT_FALSE(gguf_q8_supports(GgmlType::kF16));
}

// The entry keeps the rows it last quantised per thread: rows changed in place (the same
// pointer, as a program's buffers are) must be quantised afresh, unchanged ones may be reused.
TEST(GgufQ8, RowsChangedInPlaceAreQuantisedAfresh) {
  const int64_t cols = 128, rows = 6;
  const Weights w(GgmlType::kQ4_1, rows, cols, 71);
  std::vector<float> x = activations(1, cols, 72);
  auto product = [&] {
    std::vector<float> y(rows);
    gguf_matmul_tile(w.matrix(), 0, rows, x.data(), cols, 1, MatmulOut{y.data(), rows, false});
    return y;
  };
  auto expected = [&] {
    const Quantised q = replay_quantise(x, 1, cols);
    std::vector<float> y(rows);
    for (int64_t r = 0; r < rows; ++r) y[r] = replay_dot(w.matrix(), r, q, 0);
    return y;
  };
  EXPECT_EQ(product(), expected());
  EXPECT_EQ(product(), expected());  // the same rows again
  x[cols - 1] += 1.0f;               // the last column only: the first bytes still match
  EXPECT_EQ(product(), expected());
  x[0] = -x[0];
  EXPECT_EQ(product(), expected());
}

// Negative control for the bitwise replay: one changed weight byte shows in its row and no other.
TEST(GgufQ8, NoticesAChangedWeight) {
  for (const GgufQ8Kernels* k : every_path()) {
    for (GgmlType type : kTypes) {
      const int64_t cols = 64, rows = 5;
      Weights w(type, rows, cols, 51);
      const std::vector<float> ones(cols, 1.0f);  // every q = 127: no product vanishes
      const Quantised q = replay_quantise(ones, 1, cols);
      std::uint8_t* block = w.data() + 2 * w.row_bytes;
      std::memcpy(block, "\x00\x3c", 2);  // d = 1
      std::vector<float> before(rows), after(rows);
      k->tile(w.matrix(), 0, rows, q.rows(), MatmulOut{before.data(), rows, false});
      block[type == GgmlType::kQ4_1 ? 4 : 2] ^= 0x01;  // one weight moves by 1
      k->tile(w.matrix(), 0, rows, q.rows(), MatmulOut{after.data(), rows, false});
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(same_bits(after[r], before[r]), r != 2) << path_name(k) << " row " << r;
        EXPECT_TRUE(same_bits(after[r], replay_dot(w.matrix(), r, q, 0))) << path_name(k);
      }
    }
  }
}

}  // namespace
}  // namespace md::kernels
