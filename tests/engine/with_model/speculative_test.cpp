// Speculative decoding on the Qwen3.8 fixtures with test-double drafters (issue 7): greedy output
// is token-for-token the plain greedy output and the target's state after generation equals plain
// decoding's bitwise, for an oracle drafter with a planted error at every draft position k = 0..7
// and for a random drafter; sampled speculation leaves the distribution of the output unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../../qwen38/qwen38_test_util.h"
#include "base/error.h"
#include "engine/choice_decoder.h"
#include "engine/generation.h"
#include "engine/sampler.h"
#include "models/drafters/speculative_drafter.h"
#include "test_drafters.h"

namespace md::test {
namespace {

constexpr int64_t kContext = 512;
constexpr int64_t kBlock = 8;

struct Outcome {
  engine::GenerationResult result;
  std::unique_ptr<SequenceState> state;
};

engine::GenerationRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  engine::GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling.temperature = 0;
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  return request;
}

std::vector<int32_t> ids(const engine::GenerationResult& r) {
  std::vector<int32_t> out;
  for (const auto& t : r.tokens) out.push_back(t.id);
  return out;
}

Outcome generate(Qwen38Model& model, const Tokenizer& tokenizer,
                 const engine::GenerationRequest& request, SpeculativeDrafter* drafter,
                 float confidence_threshold = 0) {
  engine::Generator generator(model, tokenizer, kContext);
  generator.set_drafter(drafter, 0, 0, confidence_threshold);
  Outcome run;
  run.result = generator.generate(request, nullptr);
  run.state = generator.state().clone();
  return run;
}

// The prompt followed by what plain greedy decoding writes after it: an oracle's knowledge.
std::vector<int32_t> truth_of(const std::vector<int32_t>& prompt, const Outcome& plain) {
  std::vector<int32_t> truth = prompt;
  for (int32_t t : ids(plain.result)) truth.push_back(t);
  return truth;
}

std::vector<int32_t> prompt_of(int length, int step, int offset) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back((i * step + offset) % 500);
  return prompt;
}

class SpeculativeGreedy : public ::testing::TestWithParam<std::string> {};

// 70 prompt tokens + 90 generated: several 64-row chunks, and many rounds.
TEST_P(SpeculativeGreedy, OracleWithAnErrorAtEveryPositionIsLossless) {
  auto model = load_fixture(GetParam(), KvCacheType::kF32);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir(GetParam()));
  const std::vector<int32_t> prompt = prompt_of(70, 37, 11);
  engine::GenerationRequest request = greedy_request(prompt, 90);
  Outcome plain = generate(*model, *tokenizer, request, nullptr);
  const std::vector<int32_t> truth = truth_of(prompt, plain);
  for (int64_t error_at = 0; error_at < kBlock; ++error_at) {
    OracleDrafter drafter(truth, error_at, model->vocab_size());
    Outcome spec = generate(*model, *tokenizer, request, &drafter);
    ASSERT_EQ(ids(spec.result), ids(plain.result)) << "planted error at draft " << error_at;
    EXPECT_EQ(spec.result.text, plain.result.text);
    EXPECT_TRUE(same_state(*model, *spec.state, *plain.state)) << "error at " << error_at;
    const engine::SpeculationStats& s = spec.result.stats.speculation;
    EXPECT_GT(s.rounds, 0);
    // Every round accepts exactly error_at drafts (the last round may be cut by max_tokens).
    EXPECT_GE(s.accepted, (s.rounds - 1) * error_at);
    EXPECT_LE(s.accepted, s.rounds * error_at);
    // Acceptances never increase with the draft position, and stop at the planted error.
    for (std::size_t i = 1; i < s.accepted_at.size(); ++i) {
      EXPECT_LE(s.accepted_at[i], s.accepted_at[i - 1]);
    }
    if (error_at < kBlock - 1) {
      EXPECT_EQ(s.accepted_at[static_cast<std::size_t>(error_at)], 0);
    }
  }
}

TEST_P(SpeculativeGreedy, RandomDrafterIsLossless) {
  auto model = load_fixture(GetParam(), KvCacheType::kF32);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir(GetParam()));
  engine::GenerationRequest request = greedy_request(prompt_of(20, 53, 7), 100);
  Outcome plain = generate(*model, *tokenizer, request, nullptr);
  // The random drafter proposes from the tokens the greedy run actually uses, so some drafts hit.
  std::vector<int32_t> support = ids(plain.result);
  std::sort(support.begin(), support.end());
  support.erase(std::unique(support.begin(), support.end()), support.end());
  RandomDrafter drafter(support);
  request.sampling.seed = 5;  // drives the drafter's uniforms
  Outcome spec = generate(*model, *tokenizer, request, &drafter);
  EXPECT_EQ(ids(spec.result), ids(plain.result));
  EXPECT_TRUE(same_state(*model, *spec.state, *plain.state));
}

// --spec-confidence-threshold: a round verifies only the drafts before the first whose
// confidence is below the threshold (none: a plain decode step); the output and the state are
// plain decoding's either way.
TEST_P(SpeculativeGreedy, ConfidenceThresholdStopsBlocksWithoutChangingTheOutput) {
  auto model = load_fixture(GetParam(), KvCacheType::kF32);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir(GetParam()));
  const std::vector<int32_t> prompt = prompt_of(15, 41, 3);
  engine::GenerationRequest request = greedy_request(prompt, 40);
  Outcome plain = generate(*model, *tokenizer, request, nullptr);
  const std::vector<int32_t> truth = truth_of(prompt, plain);
  // Every draft is right; the confidences fall below 0.5 at draft 3.
  const std::vector<float> confidence{0.9f, 0.8f, 0.6f, 0.3f, 0.9f, 0.9f, 0.9f};
  OracleDrafter drafter(truth, kBlock, model->vocab_size(), confidence);

  Outcome off = generate(*model, *tokenizer, request, &drafter);
  EXPECT_EQ(ids(off.result), ids(plain.result));
  EXPECT_EQ(off.result.stats.speculation.drafted, off.result.stats.speculation.rounds * 7);

  Outcome stopped = generate(*model, *tokenizer, request, &drafter, 0.5f);
  ASSERT_EQ(ids(stopped.result), ids(plain.result));
  EXPECT_TRUE(same_state(*model, *stopped.state, *plain.state));
  const engine::SpeculationStats& s = stopped.result.stats.speculation;
  EXPECT_GT(s.rounds, 5);
  EXPECT_EQ(s.drafted, s.rounds * 3);         // drafts 0..2 only
  EXPECT_GE(s.accepted_at[2], s.rounds - 1);  // the last round may end at max_tokens
  EXPECT_EQ(s.accepted_at[3], 0);

  // Above every confidence: each step is the anchor alone (a plain step, not a round), still
  // plain decoding's output.
  Outcome none = generate(*model, *tokenizer, request, &drafter, 0.95f);
  ASSERT_EQ(ids(none.result), ids(plain.result));
  EXPECT_TRUE(same_state(*model, *none.state, *plain.state));
  EXPECT_EQ(none.result.stats.speculation.drafted, 0);
  EXPECT_EQ(none.result.stats.speculation.rounds, 0);
  EXPECT_GT(none.result.stats.speculation.draft_seconds, 0);

  // Refused: a threshold outside [0, 1], and one for a drafter without confidences.
  engine::Generator generator(*model, *tokenizer, kContext);
  EXPECT_THROW(generator.set_drafter(&drafter, 0, 0, 1.5f), Error);
  EXPECT_THROW(generator.set_drafter(&drafter, 0, 0, -0.1f), Error);
  EXPECT_THROW(generator.set_drafter(&drafter, 0, 4, 0.5f), Error);  // with --force-accept
  OracleDrafter blind(truth, kBlock, model->vocab_size());
  EXPECT_THROW(generator.set_drafter(&blind, 0, 0, 0.5f), Error);
  EXPECT_NO_THROW(generator.set_drafter(&blind, 0, 0, 0.0f));
}

// Stops inside an accepted block end the output exactly where plain decoding ends it.
TEST_P(SpeculativeGreedy, StopsInsideABlockTruncate) {
  auto model = load_fixture(GetParam(), KvCacheType::kF32);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir(GetParam()));
  std::vector<int32_t> prompt{5, 17, 99, 300};
  engine::GenerationRequest request = greedy_request(prompt, 40);
  Outcome plain = generate(*model, *tokenizer, request, nullptr);
  std::vector<int32_t> truth = prompt;
  for (int32_t t : ids(plain.result)) truth.push_back(t);
  // A stop token id in the middle of the continuation, a stop string, and max_tokens.
  engine::GenerationRequest stop_id = request;
  stop_id.stop_token_ids = {plain.result.tokens[13].id};
  engine::GenerationRequest stop_string = request;
  stop_string.stop = {plain.result.text.substr(plain.result.text.size() / 2, 3)};
  engine::GenerationRequest budget = request;
  budget.max_tokens = 11;
  for (const auto* r : {&stop_id, &stop_string, &budget}) {
    Outcome expected = generate(*model, *tokenizer, *r, nullptr);
    OracleDrafter drafter(truth, kBlock, model->vocab_size());  // never wrong
    Outcome spec = generate(*model, *tokenizer, *r, &drafter);
    EXPECT_EQ(ids(spec.result), ids(expected.result));
    EXPECT_EQ(spec.result.text, expected.result.text);
    EXPECT_EQ(spec.result.finish, expected.result.finish);
    EXPECT_EQ(spec.result.stats.generated_tokens, expected.result.stats.generated_tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeGreedy,
                         ::testing::Values("tiny-qwen38", "tiny-qwen38-hd256", "tiny-qwen35-moe"),
                         fixture_test_name);

// Sampled speculation is lossless in distribution: over many seeds, the token decided by the
// first speculative round follows the same distribution with and without a random drafter (whose
// q is not one-hot and often wrong), with temperature, top-k and top-p on. For two empirical
// distributions of n draws over k outcomes E[TV] <= sqrt(k / (pi n)); the bound is 2.5x that.
// Seeds are fixed, so the test is deterministic. Negative control: accepting every draft (the
// benchmark's --force-accept) must exceed the bound by far.
double total_variation(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b, int n) {
  std::map<int32_t, int> keys = a;
  for (const auto& entry : b) keys.emplace(entry.first, 0);
  double tv = 0;
  for (const auto& entry : keys) {
    double pa = a.count(entry.first) ? a.at(entry.first) : 0;
    double pb = b.count(entry.first) ? b.at(entry.first) : 0;
    tv += std::abs(pa - pb) / n;
  }
  return tv / 2;
}

std::map<int32_t, int> second_tokens(Qwen38Model& model, const Tokenizer& tokenizer,
                                     SpeculativeDrafter* drafter, int64_t force_accept, int draws,
                                     uint64_t seed_base) {
  engine::Generator generator(model, tokenizer, 64);
  generator.set_drafter(drafter, 0, force_accept);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) {
    engine::GenerationRequest request = greedy_request({12, 250, 7}, 2);
    request.sampling.temperature = 1.3f;
    request.sampling.top_k = 8;  // at most 8 × 8 (first, second) pairs: a tight TV bound
    request.sampling.top_p = 0.95f;
    request.sampling.seed = seed_base + static_cast<uint64_t>(i);
    // The first token comes from the prefill logits in every run; the second is the first one a
    // speculative round decides. Counted as (first, second) pairs.
    engine::GenerationResult result = generator.generate(request, nullptr);
    ++counts[result.tokens.at(0).id * 1000 + result.tokens.at(1).id];
  }
  return counts;
}

TEST(SpeculativeSampling, DistributionOfTheFirstRoundsTokenIsUnchanged) {
  auto model = load_fixture("tiny-qwen38", KvCacheType::kF32, {}, 1);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir("tiny-qwen38"));
  constexpr int kDraws = 1500;
  std::vector<int32_t> support;
  for (int32_t t = 0; t < 512; t += 3) support.push_back(t);
  RandomDrafter drafter(support);
  std::map<int32_t, int> plain = second_tokens(*model, *tokenizer, nullptr, 0, kDraws, 0);
  std::map<int32_t, int> spec = second_tokens(*model, *tokenizer, &drafter, 0, kDraws, 1u << 20);
  double k = static_cast<double>(std::max(plain.size(), spec.size()));
  double bound = 2.5 * std::sqrt(k / (M_PI * kDraws));
  double tv = total_variation(plain, spec, kDraws);
  EXPECT_LT(tv, bound) << "outcomes " << k;
  EXPECT_GT(plain.size(), 5u);
  std::map<int32_t, int> forced = second_tokens(*model, *tokenizer, &drafter, 8, kDraws / 4, 7);
  double forced_tv = 0;
  {
    // Compare proportions (the forced run has fewer draws).
    std::map<int32_t, int> keys = plain;
    for (const auto& entry : forced) keys.emplace(entry.first, 0);
    for (const auto& entry : keys) {
      double pa = plain.count(entry.first) ? plain.at(entry.first) / double(kDraws) : 0;
      double pb = forced.count(entry.first) ? forced.at(entry.first) / double(kDraws / 4) : 0;
      forced_tv += std::abs(pa - pb) / 2;
    }
  }
  EXPECT_GT(forced_tv, bound);
}

// The acceptance rule itself, at fixed logits (spec §14 test 8): over n seeds the committed token
// at one position follows p (the sampler's distribution after temperature, top-k and top-p)
// within 0.015 + 3/sqrt(n) per token, whatever the draft distribution q; a draft outside p's
// support is never emitted; and a rule that skips the residual (resampling from p after a
// rejection) is caught by the same bound.
TEST(SpeculativeSampling, AcceptanceRuleReproducesTheTargetDistribution) {
  auto tokenizer = load_tokenizer(qwen38_fixture_dir("tiny-qwen38"));
  constexpr int32_t kVocab = 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& v : logits) v = normal(rng);
  engine::GenerationRequest request = greedy_request({1, 2, 3}, 0);
  request.sampling.temperature = 1.3f;
  request.sampling.top_k = 20;
  request.sampling.top_p = 0.95f;
  // p, as the sampler sees it.
  engine::Sampler sampler(request.sampling, kVocab, 0);
  std::vector<float> scratch = logits;
  std::vector<double> p(kVocab, 0.0);
  for (const engine::Candidate& c : sampler.distribution(scratch))
    p[static_cast<std::size_t>(c.id)] = c.value;
  // q: skewed towards a few of p's tokens and one token p excludes.
  int32_t outside = 0;
  while (p[static_cast<std::size_t>(outside)] > 0) ++outside;
  std::vector<int32_t> ranked;
  for (int32_t t = 0; t < kVocab; ++t) {
    if (p[static_cast<std::size_t>(t)] > 0) ranked.push_back(t);
  }
  std::vector<std::pair<int32_t, float>> q = {
      {ranked[0], 0.1f}, {ranked[3], 0.5f}, {ranked[5], 0.2f}, {outside, 0.2f}};
  constexpr int kDraws = 40000;
  const double bound = 0.015 + 3.0 / std::sqrt(kDraws);
  // The guarantee holds for drafts drawn from q: draw one per seed, independently of the rule's
  // own uniforms.
  std::discrete_distribution<std::size_t> draw_q({0.1, 0.5, 0.2, 0.2});
  std::mt19937 draft_rng(11);
  std::vector<int> counts(kVocab, 0), skip_residual(kVocab, 0);
  for (int seed = 0; seed < kDraws; ++seed) {
    int32_t draft = q[draw_q(draft_rng)].first;
    engine::ChoiceDecoder decoder(request, {}, kVocab, *tokenizer, static_cast<uint64_t>(seed), 64);
    std::vector<float> row = logits;
    bool accepted = false;
    engine::TokenOutcome out = decoder.verify_draft(row, 10, draft, q, accepted);
    ++counts[static_cast<std::size_t>(out.token.id)];
    EXPECT_EQ(accepted, out.token.id == draft);
    // The broken rule: on rejection, a fresh draw from p instead of the residual.
    engine::ChoiceDecoder plain(request, {}, kVocab, *tokenizer,
                                static_cast<uint64_t>(seed) + (1u << 30), 64);
    row = logits;
    int32_t broken = accepted ? draft : plain.next(row, 10).token.id;
    ++skip_residual[static_cast<std::size_t>(broken)];
  }
  double worst = 0, worst_broken = 0;
  for (int32_t t = 0; t < kVocab; ++t) {
    auto i = static_cast<std::size_t>(t);
    worst = std::max(worst, std::abs(counts[i] / double(kDraws) - p[i]));
    worst_broken = std::max(worst_broken, std::abs(skip_residual[i] / double(kDraws) - p[i]));
  }
  EXPECT_LT(worst, bound);
  EXPECT_EQ(counts[static_cast<std::size_t>(outside)], 0) << "a token outside p was emitted";
  EXPECT_GT(worst_broken, bound) << "the negative control passed";
}

}  // namespace
}  // namespace md::test
