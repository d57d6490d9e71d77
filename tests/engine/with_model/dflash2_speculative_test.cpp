// Speculative decoding with the real DFlash2 drafter (tiny-dflash2, random weights) on its target
// tiny-qwen38: greedy output and the target's final state equal plain greedy decoding exactly,
// over a run long enough to cross the drafter's 16-token window and several 64-row prefill
// chunks (spec §14 test 6), and the round accounting adds up.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../../qwen38/qwen38_test_util.h"
#include "engine/generation.h"
#include "models/drafters/dflash2/dflash2_drafter.h"
#include "models/tensor_parallel_model.h"
#include "tensor_parallel_speculation.h"

namespace md::test {
namespace {

std::string drafter_dir() {
  return std::string(MD_GOLDEN_DIR) + "/dflash2/tiny-dflash2";
}

TEST(DFlash2Speculative, GreedyOutputAndStateEqualPlainDecoding) {
  auto model = load_fixture("tiny-qwen38", KvCacheType::kF32, {}, 1);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir("tiny-qwen38"));
  std::unique_ptr<SpeculativeDrafter> drafter =
      load_dflash2_drafter(drafter_dir(), model->target_view());
  engine::GenerationRequest request;
  for (int i = 0; i < 70; ++i) request.prompt.push_back((i * 41 + 3) % 500);
  request.sampling.temperature = 0;
  request.max_tokens = 120;
  request.ignore_eos = true;

  engine::Generator plain(*model, *tokenizer, 512);
  engine::GenerationResult expected = plain.generate(request, nullptr);
  auto plain_state = plain.state().clone();
  engine::Generator spec(*model, *tokenizer, 512);
  spec.set_drafter(drafter.get());
  engine::GenerationResult got = spec.generate(request, nullptr);

  ASSERT_EQ(got.tokens.size(), expected.tokens.size());
  for (std::size_t i = 0; i < got.tokens.size(); ++i) {
    ASSERT_EQ(got.tokens[i].id, expected.tokens[i].id) << "token " << i;
  }
  EXPECT_EQ(got.text, expected.text);
  EXPECT_TRUE(same_state(*model, spec.state(), *plain_state));
  // The drafter's context follows the sequence: one entry per fed position.
  EXPECT_EQ(drafter->context_length(), spec.state().position());
  const engine::SpeculationStats& s = got.stats.speculation;
  EXPECT_GT(s.rounds, 10);
  EXPECT_EQ(s.drafted, 7 * s.rounds);
  // Every round commits its anchor and its accepted drafts: the rows fed after the prefill.
  EXPECT_EQ(s.produced, spec.state().position() - static_cast<int64_t>(request.prompt.size()));
  EXPECT_EQ(s.produced, s.rounds + s.accepted);
  EXPECT_DOUBLE_EQ(s.mean_acceptance_length(),
                   static_cast<double>(s.rounds + s.accepted) / static_cast<double>(s.rounds));
}

// Under tensor parallelism (two in-process ranks) the drafter runs beside rank 0 on the whole
// lm_head, and verify rows and commits run on every rank: greedy output equals the same ranks'
// plain decoding, and one rank's.
TEST(DFlash2Speculative, UnderTensorParallelismGreedyOutputEqualsPlainDecoding) {
  ModelRunOptions run;
  run.threads = 2;
  run.kv_cache = KvCacheType::kF32;
  TensorParallelModel tp(2, run, [](const ModelRunOptions& rank) -> std::unique_ptr<LanguageModel> {
    return std::make_unique<Qwen38Model>(qwen38_fixture_dir("tiny-qwen38"), rank);
  });
  auto one = load_fixture("tiny-qwen38", KvCacheType::kF32, {}, 1);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir("tiny-qwen38"));
  std::unique_ptr<SpeculativeDrafter> drafter =
      load_dflash2_drafter(drafter_dir(), tp.target_view());
  engine::GenerationRequest request;
  for (int i = 0; i < 40; ++i) request.prompt.push_back((i * 37 + 5) % 500);
  request.sampling.temperature = 0;
  request.max_tokens = 48;
  request.ignore_eos = true;

  expect_speculation_like_plain_decoding(*one, tp, *tokenizer, *drafter, request, 256);
}

}  // namespace
}  // namespace md::test
