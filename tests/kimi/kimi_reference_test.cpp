// Kimi K3's reference forward (models/kimi/kimi_reference.h) against the float64 transcription
// of §5–§9 (tools/kimi_reference.py via tools/gen_kimi_goldens.py) on both scaled-down
// checkpoints: the logits at every position of three prompts within the bound of each fixture,
// the greedy continuations identical wherever the golden's margin exceeds 1e-3. Negative
// controls: an ordinary residual stream instead of the mixes, and the router without its
// correction bias, each miss the bound by more than tenfold.
//
// Bounds: the 1e-3 of the largest |logit| (f32 state) for kimi-k3-tiny, which is badly
// conditioned: rounding only each KDA sublayer's output to f32 inside the float64 reference
// already moves its logits by 1.6e-4 (its MXFP4 experts, scales up to 2^3 as §15 prescribes,
// amplify perturbations through SiTU); megadecode's f32 pipeline is at 6.5e-4 here. kimi-k3-small
// moves by 4e-6 under the same experiment, so it is held to 1e-4, which a subtly wrong formula
// would not meet.
#include "models/kimi/kimi_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/safetensors_file.h"
#include "kimi_test_util.h"

namespace md {
namespace {

template <typename T>
std::vector<T> values(const SafetensorsFile& file, const std::string& name) {
  const TensorView* view = file.find(name);
  if (view == nullptr) throw std::runtime_error(name);
  std::vector<T> out(view->nbytes / sizeof(T));
  std::memcpy(out.data(), view->data, view->nbytes);
  return out;
}

struct Loaded {
  KimiK3Config config;
  std::unique_ptr<Checkpoint> checkpoint;
  KimiK3Weights weights;
};

Loaded load(const std::string& name) {
  const std::string dir = test::kimi_fixture_path(name);
  Loaded l;
  l.config = parse_kimi_k3_config(read_config_files(dir));
  l.checkpoint = std::make_unique<Checkpoint>(dir);
  l.weights = bind_kimi_k3_weights(*l.checkpoint, l.config);
  return l;
}

// max over prompts and positions of |Δlogit| / max |golden logit|.
double worst_error(const Loaded& l, const std::string& name, KimiReferenceOptions options,
                   bool check_greedy) {
  SafetensorsFile goldens(std::string(MD_SOURCE_DIR) + "/tests/goldens/kimi/" + name +
                          "-reference.safetensors");
  const KimiReference model(l.config, l.weights, options);
  const int64_t vocab = l.config.vocab_size;
  double worst = 0;
  for (int p = 0; goldens.find("p" + std::to_string(p) + ".ids") != nullptr; ++p) {
    const std::string key = "p" + std::to_string(p) + ".";
    const std::vector<int32_t> ids = values<int32_t>(goldens, key + "ids");
    const std::vector<float> expected = values<float>(goldens, key + "logits");
    KimiSequenceState state = model.new_state();
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    double diff = 0, scale = 0;
    for (std::size_t t = 0; t < ids.size(); ++t) {
      model.step(ids[t], state, logits.data());
      for (int64_t v = 0; v < vocab; ++v) {
        diff = std::max(diff, double{std::fabs(logits[v] - expected[t * vocab + v])});
        scale = std::max(scale, double{std::fabs(expected[t * vocab + v])});
      }
    }
    worst = std::max(worst, diff / scale);
    if (!check_greedy) continue;
    const std::vector<int32_t> greedy = values<int32_t>(goldens, key + "greedy");
    const std::vector<float> margin = values<float>(goldens, key + "greedy_margin");
    for (std::size_t i = 0; i < greedy.size(); ++i) {
      const auto best =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (margin[i] <= 1e-3f) break;  // a near-tie: order noise may pick the other token
      EXPECT_EQ(best, greedy[i]) << name << " prompt " << p << " continuation " << i;
      if (best != greedy[i]) break;
      model.step(best, state, logits.data());
    }
  }
  return worst;
}

class KimiReferenceGolden : public testing::TestWithParam<std::string> {};

TEST_P(KimiReferenceGolden, LogitsMatchTheFloat64Transcription) {
  const Loaded l = load(GetParam());
  const double error = worst_error(l, GetParam(), {}, true);
  std::printf("  %s: %.3g of the largest |logit|\n", GetParam().c_str(), error);
  EXPECT_LE(error, GetParam() == "kimi-k3-tiny" ? 1e-3 : 1e-4);
}

TEST_P(KimiReferenceGolden, AblationsMissTheBound) {
  const Loaded l = load(GetParam());
  EXPECT_GT(worst_error(l, GetParam(), {.ablation = KimiAblation::kNoResidualMix}, false), 1e-2);
  EXPECT_GT(worst_error(l, GetParam(), {.ablation = KimiAblation::kNoCorrectionBias}, false), 1e-2);
}

// §15 test 5: MLA's non-absorbed form (§7.1: every position expanded into per-head keys and
// values) gives the same logits within the fixture's bound and the same greedy continuations as
// the absorbed default (§7.3), both against the transcription.
TEST_P(KimiReferenceGolden, TheNonAbsorbedMlaFormAgrees) {
  const Loaded l = load(GetParam());
  const double error = worst_error(l, GetParam(), {.absorbed_mla = false}, true);
  std::printf("  %s non-absorbed: %.3g of the largest |logit|\n", GetParam().c_str(), error);
  EXPECT_LE(error, GetParam() == "kimi-k3-tiny" ? 1e-3 : 1e-4);
}

// The bf16 latent cache (the engine's default cache type, half the bytes of §7.2's rows).
// Rounding to nearest moves each cached element by at most 2^-9 of itself; how far that carries
// to the logits is the fixture's conditioning, which is chaotic here (random MXFP4 experts; see the
// bounds above): the worst position's error depends on where the perturbation lands. So the bound
// is measured: twice the largest effect of four noise-like perturbations of every cached element
// by a full bf16 ulp (2^-8), on kimi-k3-small. kimi-k3-tiny saturates (such a perturbation moves
// its logits by about half the largest), so there only the rounding's presence is checked; the
// rounding's direct effect is bounded on the attention itself
// (LatentAttention.Bf16CacheRowsMoveTheContextByTheirRoundingOnly).
TEST_P(KimiReferenceGolden, TheBf16LatentCacheStaysWithinItsRounding) {
  const Loaded l = load(GetParam());
  const double f32 = worst_error(l, GetParam(), {}, false);
  const double bf16 = worst_error(l, GetParam(), {.bf16_latent_cache = true}, false);
  auto perturbed = [&](int exponent, uint64_t seed) {
    return worst_error(l, GetParam(),
                       {.latent_cache_perturbation = static_cast<float>(std::ldexp(1.0, exponent)),
                        .latent_cache_perturbation_seed = seed},
                       false);
  };
  double sensitivity = 0;
  for (uint64_t seed = 0; seed < 4; ++seed)
    sensitivity = std::max(sensitivity, perturbed(-8, seed));
  std::printf(
      "  %s bf16 latent cache: %.3g of the largest |logit| (f32 cache %.3g; one-ulp "
      "perturbations up to %.3g)\n",
      GetParam().c_str(), bf16, f32, sensitivity);
  EXPECT_GT(bf16, f32);  // the rows were rounded
  if (GetParam() == "kimi-k3-tiny") return;
  EXPECT_LE(bf16, 2 * sensitivity);
  // Negative control: a cache eight times as coarse (2^-5) misses the bound.
  EXPECT_GT(perturbed(-5, 0), 2 * sensitivity);
}

// Prefill ≡ token-by-token decode: a 13-token prompt prefilled with KDA's chunked form (chunks of
// 4: three whole and a partial one) against stepping it, at every position, and the next token
// decoded from each state. The chunked form changes rounding only (§6.3).
TEST_P(KimiReferenceGolden, PrefillEqualsTokenByTokenDecode) {
  const Loaded l = load(GetParam());
  const KimiReference model(l.config, l.weights, {.kda_chunk = 4});
  const int64_t vocab = l.config.vocab_size;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 13; ++i) ids.push_back((37 * i + 11) % 500);
  KimiSequenceState stepped = model.new_state(), prefilled = model.new_state();
  std::vector<float> step_logits(ids.size() * vocab), prefill_logits(ids.size() * vocab);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    model.step(ids[t], stepped, step_logits.data() + t * vocab);
  }
  model.prefill(ids, prefilled, prefill_logits.data());
  EXPECT_EQ(prefilled.position, stepped.position);
  std::vector<float> next_stepped(vocab), next_prefilled(vocab);
  model.step(7, stepped, next_stepped.data());
  model.step(7, prefilled, next_prefilled.data());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < step_logits.size(); ++i) {
    diff = std::max(diff, double{std::fabs(step_logits[i] - prefill_logits[i])});
    scale = std::max(scale, double{std::fabs(step_logits[i])});
  }
  for (int64_t v = 0; v < vocab; ++v) {
    diff = std::max(diff, double{std::fabs(next_stepped[v] - next_prefilled[v])});
  }
  std::printf("  %s: prefill vs decode %.3g of the largest |logit|\n", GetParam().c_str(),
              diff / scale);
  EXPECT_LE(diff / scale, GetParam() == "kimi-k3-tiny" ? 1e-3 : 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KimiReferenceGolden,
                         testing::Values("kimi-k3-tiny", "kimi-k3-small"), test::kimi_param_name);

}  // namespace
}  // namespace md
