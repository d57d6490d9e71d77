// Absorbed latent attention (kernels/latent_attention.h, spec §7.3) against Hugging Face
// transformers' own KimiLinearAttention (tools/gen_mla_goldens.py, float32, eager), which expands
// every cached latent into per-head keys and values before attending: one layer of §15's MLA
// widths decoded position by position over its causal cache, from HF's query, latent and shared
// key, through W_UK_hᵀ (a transposed copy of kv_b_proj's key rows, as a loader would keep it),
// the kernel and W_UV_h (kv_b_proj's value rows in place). §15 test 5 asks ≲ 1e-2 of layer
// outputs; in f32 the two forms agree to order noise. Negative control: the shared key part left
// out misses the bound by far.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/safetensors_file.h"
#include "kernels/latent_attention.h"
#include "kernels/weight_matrix.h"

namespace md {
namespace {

constexpr int64_t kNope = 32, kShared = 16, kValue = 32;

std::vector<float> values(const SafetensorsFile& file, const std::string& name,
                          std::vector<int64_t>* shape = nullptr) {
  const TensorView* view = file.find(name);
  if (view == nullptr || view->dtype != DType::kF32) throw std::runtime_error(name);
  if (shape != nullptr) shape->assign(view->shape.begin(), view->shape.end());
  std::vector<float> out(view->numel());
  std::memcpy(out.data(), view->data, view->nbytes);
  return out;
}

// max |attention − HF| / max |HF| over every position, head and channel.
double absorbed_error(bool with_shared_key) {
  SafetensorsFile file(std::string(MD_SOURCE_DIR) +
                       "/tests/goldens/kimi/mla-kimi-linear.safetensors");
  std::vector<int64_t> kv_shape, q_shape;
  const std::vector<float> kv_b = values(file, "kv_b_proj.weight", &kv_shape);
  const std::vector<float> query = values(file, "query", &q_shape);
  const std::vector<float> latent = values(file, "latent"), shared = values(file, "shared_key");
  const std::vector<float> expected = values(file, "attention");
  const int64_t tokens = q_shape[0], heads = q_shape[1], rank = kv_shape[1];
  const int64_t qk = kNope + kShared, per_head = kNope + kValue;
  if (q_shape[2] != qk || kv_shape[0] != heads * per_head) throw std::runtime_error("shapes");

  // W_UK_hᵀ [rank × nope] per head: the key rows of kv_b_proj transposed (exact copies).
  std::vector<std::vector<float>> uk_t(static_cast<std::size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) {
    uk_t[h].resize(static_cast<std::size_t>(rank * kNope));
    for (int64_t i = 0; i < kNope; ++i)
      for (int64_t r = 0; r < rank; ++r)
        uk_t[h][r * kNope + i] = kv_b[(h * per_head + i) * rank + r];
  }
  const kernels::WeightMatrix kv_b_matrix =
      kernels::f32_weight_matrix(kv_b.data(), heads * per_head, rank);
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk));

  double diff = 0, magnitude = 0;
  // The cache rows [c_t | s_t] as a decode step keeps them, and each head's query in that layout.
  std::vector<float> rows;
  for (int64_t t = 0; t < tokens; ++t) {
    rows.insert(rows.end(), latent.begin() + t * rank, latent.begin() + (t + 1) * rank);
    rows.insert(rows.end(), shared.begin() + t * kShared, shared.begin() + (t + 1) * kShared);
  }
  std::vector<float> q_absorbed(heads * (rank + kShared)), context(heads * rank);
  std::vector<float> scores(tokens), out(heads * per_head);  // indexed by kv_b_proj row
  for (int64_t p = 0; p < tokens; ++p) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* q = query.data() + (p * heads + h) * qk;
      float* row = q_absorbed.data() + h * (rank + kShared);
      kernels::matmul(kernels::f32_weight_matrix(uk_t[h].data(), rank, kNope), q, 1, row, nullptr);
      for (int64_t i = 0; i < kShared; ++i) row[rank + i] = with_shared_key ? q[kNope + i] : 0.0f;
    }
    kernels::latent_attention(q_absorbed.data(), heads, rank, kShared, rows.data(), p + 1, scale,
                              scores.data(), context.data());
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t first = h * per_head + kNope;  // W_UV_h: the head's value rows
      kernels::weight_tile(kv_b_matrix, first, first + kValue, &context[h * rank], rank, 1,
                           {out.data(), 0, false});
      for (int64_t j = 0; j < kValue; ++j) {
        const float want = expected[(p * heads + h) * kValue + j];
        diff = std::max(diff, double{std::fabs(out[first + j] - want)});
        magnitude = std::max(magnitude, double{std::fabs(want)});
      }
    }
  }
  return diff / magnitude;
}

TEST(MlaGolden, AbsorbedDecodeMatchesTransformersNonAbsorbedAttention) {
  const double error = absorbed_error(true);
  std::printf("  absorbed vs transformers' KimiLinearAttention: %.3g of the largest output\n",
              error);
  EXPECT_LE(error, 1e-5);
  EXPECT_GT(absorbed_error(false), 1e-2);
}

// Rows rounded to `mantissa_bits` (bf16: 7), to nearest even, as a cache of that precision holds
// them; the context over them against the f32 rows, relative to the largest |context|.
double rounded_cache_error(int mantissa_bits) {
  constexpr int64_t heads = 4, rank = 32, shared = 16, positions = 24;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> q(heads * (rank + shared)), rows(positions * (rank + shared));
  for (float& v : q) v = normal(rng);
  for (float& v : rows) v = normal(rng);
  std::vector<float> rounded = rows;
  const int drop = 23 - mantissa_bits;
  for (float& v : rounded) {
    uint32_t bits = std::bit_cast<uint32_t>(v);
    bits += (1u << (drop - 1)) - 1 + ((bits >> drop) & 1u);
    v = std::bit_cast<float>(bits & ~((1u << drop) - 1));
  }
  std::vector<float> scores(positions), exact(heads * rank), coarse(heads * rank);
  const float scale = 1.0f / std::sqrt(48.0f);
  kernels::latent_attention(q.data(), heads, rank, shared, rows.data(), positions, scale,
                            scores.data(), exact.data());
  kernels::latent_attention(q.data(), heads, rank, shared, rounded.data(), positions, scale,
                            scores.data(), coarse.data());
  double diff = 0, magnitude = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    diff = std::max(diff, double{std::fabs(exact[i] - coarse[i])});
    magnitude = std::max(magnitude, double{std::fabs(exact[i])});
  }
  return diff / magnitude;
}

// A bf16 cache's direct effect on the attention: each element rounded by at most 2^-9 of itself
// moves the context (a softmax-weighted mean of the rows, its weights from scores over them) by
// no more than bf16's ulp, 2^-8 of the largest |context| (the model-level effect, amplified by
// the fixtures, is in kimi_reference_test). Negative control: rows with two mantissa bits fewer.
TEST(LatentAttention, Bf16CacheRowsMoveTheContextByTheirRoundingOnly) {
  const double bf16 = rounded_cache_error(7);
  std::printf("  context over bf16 rows: %.3g of the largest |context|\n", bf16);
  EXPECT_LE(bf16, std::ldexp(1.0, -8));
  EXPECT_GT(bf16, 0.0);
  EXPECT_GT(rounded_cache_error(5), std::ldexp(1.0, -8));
}

}  // namespace
}  // namespace md
