// Speculative rounds with the real DSpark drafter (tools/make_dspark_fixtures.py, random weights)
// on its targets kimi-k3-tiny and muse-spark-tiny (kimi-k3-dspark.md §15 tests 8–10):
// - greedy rounds choose plain greedy decoding's tokens at prompt lengths 1, 7, 8, 13 and 24
//   (prompts shorter and longer than a block, and past the drafter's 16-position window), and
//   after every round the target's state is plain decoding's at the same position: Kimi K3's
//   KDA states and latent-cache rows bit for bit, and for both families the next step's logits
//   from either state bit for bit;
// - sampling at T → 0 reproduces greedy;
// - the lossless rule with DSpark's own draft distribution q (softmax of its logits at T, a whole
//   vocabulary): over 40 000 seeded draws the emitted token follows the target's p within
//   0.015 + 3/√n, a rejected draft is never the token emitted, and a rule that resamples from p
//   after a rejection (no residual) misses the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/choice_decoder.h"
#include "engine/sampler.h"
#include "engine/speculative_round.h"
#include "models/drafters/dspark/dspark_drafter.h"
#include "models/kimi/kimi_state.h"
#include "models/model_loader.h"
#include "models/tensor_parallel_model.h"
#include "tensor_parallel_speculation.h"
#include "text/tokenizer.h"

namespace md::test {
namespace {

constexpr int64_t kCapacity = 96;
constexpr int64_t kGenerated = 30;

struct Pair {
  std::string name;     // the test's
  std::string target;   // folder under MD_GOLDEN_DIR
  std::string drafter;  // folder under MD_GOLDEN_DIR/kimi (tests/kimi writes the drafters)
};

std::string golden(const std::string& path) {
  return std::string(MD_GOLDEN_DIR) + "/" + path;
}

std::vector<int32_t> prompt_of(int64_t length) {
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < length; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 11) % 480));
  return prompt;
}

engine::GenerationRequest request_of(std::vector<int32_t> prompt, float temperature) {
  engine::GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling.temperature = temperature;
  request.max_tokens = kGenerated + 8;
  request.ignore_eos = true;
  return request;
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Kimi K3's state at `position`: the KDA states whole, the latent cache's written rows (rows
// beyond it may hold rejected drafts, which nothing reads before they are overwritten).
void expect_same_kimi_state(const SequenceState& a, const SequenceState& b) {
  const auto* ka = dynamic_cast<const KimiState*>(&a);
  const auto* kb = dynamic_cast<const KimiState*>(&b);
  if (ka == nullptr || kb == nullptr) return;
  EXPECT_EQ(ka->data().conv_history, kb->data().conv_history);
  EXPECT_EQ(ka->data().delta_state, kb->data().delta_state);
  auto rows = [&](const auto& caches) {
    std::vector<std::vector<double>> out;
    for (const auto& cache : caches) {
      const std::size_t width = cache.size() / static_cast<std::size_t>(a.capacity());
      out.emplace_back(cache.begin(),
                       cache.begin() + static_cast<std::ptrdiff_t>(
                                           width * static_cast<std::size_t>(a.position())));
    }
    return out;
  };
  EXPECT_EQ(rows(ka->data().latent_cache), rows(kb->data().latent_cache));
  EXPECT_EQ(rows(ka->data().latent_cache_bf16), rows(kb->data().latent_cache_bf16));
}

class DSparkSpeculative : public ::testing::TestWithParam<Pair> {
 protected:
  void SetUp() override {
    model_ = load_language_model(golden(GetParam().target), ModelRunOptions{.threads = 2});
    tokenizer_ = load_tokenizer(golden(GetParam().target));
    drafter_ = load_dspark_drafter(golden("kimi/" + GetParam().drafter), model_->target_view());
    model_->set_tap_layers(drafter_->tap_layers());
  }

  // Plain greedy decoding: the tokens after the prompt and the state after each of them.
  void plain(const std::vector<int32_t>& prompt) {
    tokens_.clear();
    states_.clear();
    auto state = model_->new_sequence(kCapacity);
    std::vector<float> logits;
    model_->forward(*state, prompt, LogitRows::kLast, logits);
    SequenceState* one = state.get();
    for (int64_t i = 0; i < kGenerated + 8; ++i) {
      tokens_.push_back(argmax(logits));
      states_.push_back(state->clone());  // the state before tokens_.back() is fed
      model_->decode(std::span(&one, 1), std::span(&tokens_.back(), 1), logits);
    }
  }

  // Rounds from the prefill on: the tokens they choose, and after each round the state's
  // comparison with plain decoding's at the same position.
  std::vector<int32_t> speculate(const std::vector<int32_t>& prompt, float temperature,
                                 bool compare_states, float confidence_threshold = 0) {
    auto state = model_->new_sequence(kCapacity);
    drafter_->truncate_context(0);
    std::vector<float> logits;
    model_->forward(*state, prompt, LogitRows::kLast, logits);
    drafter_->append_context(model_->last_taps(), static_cast<int64_t>(prompt.size()));
    // The decoder keeps a reference to its request.
    const engine::GenerationRequest request = request_of(prompt, temperature);
    engine::ChoiceDecoder decoder(request, {}, static_cast<int32_t>(model_->vocab_size()),
                                  *tokenizer_, 1234, kCapacity);
    engine::TokenOutcome outcome = decoder.next(logits, state->position());
    std::vector<int32_t> chosen{outcome.token.id};
    int64_t plain_steps = 0;
    engine::SpeculativeRounds rounds(*model_, drafter_->block_size(), 0, confidence_threshold);
    engine::SpeculationStats stats;
    const auto start = static_cast<int64_t>(prompt.size());
    while (static_cast<int64_t>(chosen.size()) < kGenerated) {
      engine::SpeculativeRound round = rounds.run(*state, *drafter_, decoder, chosen.back(), stats);
      for (const engine::TokenOutcome& o : round.outcomes) chosen.push_back(o.token.id);
      plain_steps += round.drafted == 0 ? 1 : 0;
      EXPECT_EQ(drafter_->context_length(), state->position());
      if (!compare_states) continue;
      const auto fed = static_cast<std::size_t>(state->position() - start);
      if (fed >= states_.size()) break;
      SCOPED_TRACE(::testing::Message() << "after the round ending at " << state->position());
      expect_same_kimi_state(*state, *states_[fed]);
      // Either state decodes the next token to the same logits.
      EXPECT_EQ(next_logits(*state, tokens_[fed]), next_logits(*states_[fed], tokens_[fed]));
    }
    EXPECT_GT(stats.rounds, confidence_threshold > 0 ? 0 : 3);
    // A threshold mixes rounds that draft with steps that draft nothing; without one every
    // round drafts.
    if (confidence_threshold > 0) {
      EXPECT_GT(plain_steps, 0);
    } else {
      EXPECT_EQ(plain_steps, 0);
    }
    return chosen;
  }

  // The logits of feeding `token` to a copy of `state`.
  std::vector<float> next_logits(const SequenceState& state, int32_t token) {
    auto copy = state.clone();
    SequenceState* one = copy.get();
    std::vector<float> logits;
    model_->decode(std::span(&one, 1), std::span(&token, 1), logits);
    return logits;
  }

  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<SpeculativeDrafter> drafter_;
  std::vector<int32_t> tokens_;
  std::vector<std::unique_ptr<SequenceState>> states_;
};

TEST_P(DSparkSpeculative, GreedyRoundsArePlainDecodingAtEveryPromptLength) {
  for (int64_t length : {1, 7, 8, 13, 24}) {
    SCOPED_TRACE(::testing::Message() << "prompt of " << length);
    const std::vector<int32_t> prompt = prompt_of(length);
    plain(prompt);
    std::vector<int32_t> chosen = speculate(prompt, 0.0f, /*compare_states=*/true);
    chosen.resize(std::min(chosen.size(), tokens_.size()));
    EXPECT_EQ(chosen,
              std::vector<int32_t>(tokens_.begin(),
                                   tokens_.begin() + static_cast<std::ptrdiff_t>(chosen.size())));
  }
}

// With the confidence head stopping blocks early (some steps then draft nothing and feed the
// anchor alone): the same tokens, states and drafter context after every round or step.
TEST_P(DSparkSpeculative, ConfidenceThresholdKeepsPlainDecoding) {
  const std::vector<int32_t> prompt = prompt_of(13);
  plain(prompt);
  std::vector<int32_t> chosen = speculate(prompt, 0.0f, /*compare_states=*/true, 0.5f);
  chosen.resize(static_cast<std::size_t>(kGenerated));
  EXPECT_EQ(chosen, std::vector<int32_t>(tokens_.begin(), tokens_.begin() + kGenerated));
}

TEST_P(DSparkSpeculative, SamplingNearZeroTemperatureIsGreedy) {
  const std::vector<int32_t> prompt = prompt_of(13);
  plain(prompt);
  std::vector<int32_t> chosen = speculate(prompt, 1e-4f, /*compare_states=*/false);
  chosen.resize(static_cast<std::size_t>(kGenerated));
  EXPECT_EQ(chosen, std::vector<int32_t>(tokens_.begin(), tokens_.begin() + kGenerated));
}

// The acceptance rule at one position with DSpark's whole-vocabulary q (its first draft's
// distribution after a real context, at T = 0.5). The target's p is a flatter view of the same
// logits (T = 1.5, top-k 20): the rule does not care where p comes from, and a q that
// over-proposes p's top tokens makes the residual differ from p, so that the negative control can
// fail. (The random fixture target's own p hardly overlaps the random drafter's q: there every
// rule that accepts in proportion to p emits ≈ p.)
TEST_P(DSparkSpeculative, LosslessRuleWithTheDrafterDistribution) {
  const std::vector<int32_t> prompt = prompt_of(13);
  auto state = model_->new_sequence(kCapacity);
  std::vector<float> target_logits;
  model_->forward(*state, prompt, LogitRows::kLast, target_logits);
  drafter_->truncate_context(0);
  drafter_->append_context(model_->last_taps(), static_cast<int64_t>(prompt.size()));
  const std::vector<double> uniforms(static_cast<std::size_t>(drafter_->block_size() - 1), 0.5);
  const DraftProposal proposal =
      drafter_->propose(argmax(target_logits), 0.5f, uniforms, /*keep_logits=*/true);
  const std::vector<std::pair<int32_t, float>>& q = proposal.q[0];
  const auto vocab = static_cast<int32_t>(model_->vocab_size());
  const std::vector<float> logits(proposal.logits.begin(), proposal.logits.begin() + vocab);
  engine::GenerationRequest request = request_of(prompt, 1.5f);
  request.sampling.top_k = 20;
  engine::Sampler sampler(request.sampling, vocab, 0);
  std::vector<float> scratch = logits;
  std::vector<double> p(static_cast<std::size_t>(vocab), 0.0);
  for (const engine::Candidate& c : sampler.distribution(scratch))
    p[static_cast<std::size_t>(c.id)] = c.value;

  constexpr int kDraws = 40000;
  const double bound = 0.015 + 3.0 / std::sqrt(kDraws);
  std::vector<double> weights;
  for (const auto& entry : q) weights.push_back(entry.second);
  std::discrete_distribution<std::size_t> draw_q(weights.begin(), weights.end());
  std::mt19937 draft_rng(3);
  std::vector<int> counts(static_cast<std::size_t>(vocab), 0), broken(counts);
  int rejected = 0;
  for (int seed = 0; seed < kDraws; ++seed) {
    const int32_t draft = q[draw_q(draft_rng)].first;
    engine::ChoiceDecoder decoder(request, {}, vocab, *tokenizer_, static_cast<uint64_t>(seed),
                                  kCapacity);
    std::vector<float> row = logits;
    bool accepted = false;
    const engine::TokenOutcome out = decoder.verify_draft(row, 14, draft, q, accepted);
    ++counts[static_cast<std::size_t>(out.token.id)];
    if (!accepted) {
      ++rejected;
      EXPECT_NE(out.token.id, draft) << "a rejected draft was emitted";
    }
    // Negative control: after a rejection, a fresh draw from p instead of the residual.
    engine::ChoiceDecoder fresh(request, {}, vocab, *tokenizer_,
                                static_cast<uint64_t>(seed) + (1u << 30), kCapacity);
    row = logits;
    ++broken[static_cast<std::size_t>(accepted ? draft : fresh.next(row, 14).token.id)];
  }
  double worst = 0, worst_broken = 0;
  for (std::size_t t = 0; t < p.size(); ++t) {
    worst = std::max(worst, std::abs(counts[t] / double(kDraws) - p[t]));
    worst_broken = std::max(worst_broken, std::abs(broken[t] / double(kDraws) - p[t]));
  }
  std::printf(
      "  %d of %d drafts rejected; worst |count/n - p| %.4f (bound %.4f), without the "
      "residual %.4f\n",
      rejected, kDraws, worst, bound, worst_broken);
  EXPECT_GT(rejected, kDraws / 10);  // q is not p: the residual matters
  EXPECT_LT(worst, bound);
  EXPECT_GT(worst_broken, bound) << "the negative control passed";
}

// `target` (under MD_GOLDEN_DIR) over two in-process tensor-parallel ranks, its DSpark drafter
// (under MD_GOLDEN_DIR/kimi) beside rank 0 on the whole lm_head, reading the taps after the
// ranks' sums: greedy output through speculative rounds equals the same ranks' plain decoding and
// one rank's.
void expect_greedy_under_tensor_parallelism(const std::string& target_dir,
                                            const std::string& drafter) {
  const std::string target = golden(target_dir);
  ModelRunOptions run;
  run.threads = 2;
  run.kv_cache = KvCacheType::kF32;
  TensorParallelModel tp(
      2, run, [&](const ModelRunOptions& rank) { return load_language_model(target, rank); });
  const std::unique_ptr<LanguageModel> one = load_language_model(target, run);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(target);
  const std::unique_ptr<SpeculativeDrafter> draft =
      load_dspark_drafter(golden("kimi/" + drafter), tp.target_view());
  expect_speculation_like_plain_decoding(*one, tp, *tokenizer, *draft, request_of(prompt_of(13), 0),
                                         kCapacity);
}

TEST(DSparkSpeculativeTensorParallel, MuseSparkGreedyOutputEqualsPlainDecoding) {
  expect_greedy_under_tensor_parallelism("musespark/muse-spark-tiny", "dspark-muse-spark-tiny");
}

// Kimi K3's experts split among the ranks (expert parallelism) and its KDA and MLA heads too.
TEST(DSparkSpeculativeTensorParallel, KimiK3GreedyOutputEqualsPlainDecoding) {
  expect_greedy_under_tensor_parallelism("kimi/kimi-k3-tiny", "dspark-kimi-k3-tiny");
}

std::string pair_name(const ::testing::TestParamInfo<Pair>& param) {
  return param.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    Targets, DSparkSpeculative,
    ::testing::Values(Pair{"kimi_k3", "kimi/kimi-k3-tiny", "dspark-kimi-k3-tiny"},
                      Pair{"muse_spark", "musespark/muse-spark-tiny", "dspark-muse-spark-tiny"}),
    pair_name);

}  // namespace
}  // namespace md::test
