// Qwen3.8 with bf16 matmul inputs (--matmul-inputs bf16, kernels::MatmulInputs::kBf16) against the
// transformers float32 goldens. Every activation that enters a weight product is rounded to bf16
// there, so the logits move by far more than f32 summation order moves them: these tests bound that
// movement and check that it stays well apart from what a formula change costs. (The step-level
// determinism with bf16 inputs is in qwen38_step_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "../support/matmul_inputs_support.h"
#include "base/error.h"
#include "models/qwen38/qwen38_testing.h"
#include "qwen38_test_util.h"

namespace md::test {
namespace {

using md::testing::Qwen38Ablation;

constexpr int64_t kCapacity = 512;
constexpr auto kBf16 = kernels::MatmulInputs::kBf16;
// Rounding an input to bf16 moves it by up to 2^-8 of itself (about 2^-10 on average), so each
// product's output moves by ~1e-3 of its size, and the ~7 products of each layer add such
// independent errors to the residual stream layer after layer. Measured per position (max
// |Δlogit| at the position over the prompt's max |logit|), with either KV cache: median 6.5e-3 to
// 7.7e-3 per fixture; the worst position 1.3e-2 (tiny-qwen38-hd256), 2.6e-2 (tiny-qwen38) and
// 7.0e-2 (tiny-qwen38-text, one position of its 150-token prompt, whose 90th percentile is
// 1e-2). So bf16 inputs need more than the bf16-KV-cache bound (1e-2) at the worst position, while
// the typical position stays within it:
constexpr double kTypicalBound = 1e-2;  // the median position, the bf16-KV-cache bound
constexpr double kWorstBound = 1e-1;    // any position: 1.4x the worst measured
// The smallest formula change in the negative controls costs 0.57 (measured, bf16 inputs or not):
// the worst-position bound must stay well below that for the comparison to mean anything.
constexpr double kFormulaChangeFloor = 3 * kWorstBound;

class Qwen38Bf16InputsGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen38Bf16InputsGolden, PromptLogitsStayWithinTheInputRounding) {
  if (!bf16_matmul_inputs_supported()) GTEST_SKIP() << "bf16 matmul inputs cannot run here";
  std::vector<GoldenPrompt> goldens = load_goldens(GetParam());
  for (KvCacheType kv : {KvCacheType::kF32, KvCacheType::kBf16}) {
    const char* cache = kv == KvCacheType::kF32 ? "f32" : "bf16";
    auto model = load_fixture(GetParam(), kv, {}, 2, ExecutorKind::kMega, kBf16);
    std::vector<double> errors = position_errors(*model, goldens, kCapacity);
    ASSERT_FALSE(errors.empty());
    double typical = median(errors);
    double worst = *std::max_element(errors.begin(), errors.end());
    std::printf(
        "%s, bf16 matmul inputs, %s KV cache: |dlogit| / max |logit| "
        "median %.3g, max %.3g\n",
        GetParam().c_str(), cache, typical, worst);
    RecordProperty(std::string("median_relative_logit_error_") + cache, std::to_string(typical));
    RecordProperty(std::string("max_relative_logit_error_") + cache, std::to_string(worst));
    EXPECT_LE(typical, kTypicalBound) << cache << " KV cache";
    EXPECT_LE(worst, kWorstBound) << cache << " KV cache";
  }
}

// Negative controls: with bf16 inputs a changed formula still lands far beyond the bound.
TEST_P(Qwen38Bf16InputsGolden, PerturbedFormulasStillFailTheComparison) {
  if (!bf16_matmul_inputs_supported()) GTEST_SKIP() << "bf16 matmul inputs cannot run here";
  std::vector<GoldenPrompt> goldens = load_goldens(GetParam());
  const Qwen38Config config = load_fixture(GetParam(), KvCacheType::kF32)->config();
  for (Qwen38Ablation ablation : ablations_that_change(config)) {
    Qwen38Options options;
    options.ablation = ablation;
    auto model =
        load_fixture(GetParam(), KvCacheType::kF32, options, 2, ExecutorKind::kMega, kBf16);
    std::vector<double> errors = position_errors(*model, goldens, kCapacity);
    double worst = *std::max_element(errors.begin(), errors.end());
    EXPECT_GT(worst, kFormulaChangeFloor)
        << "ablation " << static_cast<int>(ablation) << " went unnoticed (error " << worst << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen38Bf16InputsGolden,
                         ::testing::ValuesIn(qwen38_fixture_names()), fixture_test_name);

// q8 inputs are for GGUF integer blocks; a bf16 checkpoint refuses them by name instead of
// silently running f32.
TEST(Qwen38MatmulInputs, RefusesQ8InputsForBf16Weights) {
  try {
    load_fixture(qwen38_fixture_names().front(), KvCacheType::kF32, {}, 1, ExecutorKind::kMega,
                 kernels::MatmulInputs::kQ8);
    FAIL() << "q8 inputs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "q8 matmul inputs apply to GGUF Q4_0, Q4_1 and Q8_0 weights; this model has none"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace md::test
