// Layer patterns no checkpoint fixture has: a model of Gated DeltaNet layers only and one of
// attention layers only (full_attention_interval > layers, and = 1; transformers runs both). The
// per-layer arithmetic is the golden-tested one; what these check is that the step program, the
// state and the executors hold together when one kind is absent.
#include <gtest/gtest.h>

#include "models/qwen38/qwen38_synthetic.h"
#include "qwen38_test_util.h"

namespace md::test {
namespace {

Qwen38Config tiny_with(Qwen38LayerKind kind) {
  Qwen38Config config = synthetic_qwen38_config("qwen38-tiny");
  config.num_layers = 3;
  config.layer_types.assign(3, kind);
  return config;
}

// Prefill 9 tokens, then 6 greedy decode steps; the logits of each step.
std::vector<std::vector<float>> greedy_run(const Qwen38Config& config, ExecutorKind executor,
                                           int threads) {
  ModelRunOptions run;
  run.threads = threads;
  run.kv_cache = KvCacheType::kF32;
  run.executor = executor;
  auto model = make_synthetic_qwen38(config, run);
  auto state = model->new_sequence(64);
  std::vector<float> logits;
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35, 89, 79, 32};
  model->forward(*state, prompt, LogitRows::kLast, logits);
  std::vector<std::vector<float>> steps;
  for (int s = 0; s < 6; ++s) {
    int32_t token = argmax(logits.data(), model->vocab_size());
    SequenceState* one = state.get();
    model->decode(std::span(&one, 1), std::span(&token, 1), logits);
    steps.push_back(logits);
  }
  return steps;
}

class Qwen38LayerPattern : public ::testing::TestWithParam<Qwen38LayerKind> {};

TEST_P(Qwen38LayerPattern, OneKindOnlyRunsAndEveryExecutorAgrees) {
  const Qwen38Config config = tiny_with(GetParam());
  const auto reference = greedy_run(config, ExecutorKind::kReference, 1);
  for (auto [executor, threads] :
       {std::pair{ExecutorKind::kMega, 1}, {ExecutorKind::kMega, 2}, {ExecutorKind::kOps, 2}}) {
    const auto run = greedy_run(config, executor, threads);
    ASSERT_EQ(run.size(), reference.size());
    for (std::size_t s = 0; s < run.size(); ++s) {
      EXPECT_TRUE(same_bits(run[s], reference[s]))
          << (executor == ExecutorKind::kMega ? "mega" : "ops") << " with " << threads
          << " threads, step " << s;
    }
  }
}

std::string kind_name(const ::testing::TestParamInfo<Qwen38LayerKind>& kind) {
  return kind.param == Qwen38LayerKind::kFullAttention ? "attention_only" : "deltanet_only";
}

INSTANTIATE_TEST_SUITE_P(Kinds, Qwen38LayerPattern,
                         ::testing::Values(Qwen38LayerKind::kLinearAttention,
                                           Qwen38LayerKind::kFullAttention),
                         kind_name);

}  // namespace
}  // namespace md::test
