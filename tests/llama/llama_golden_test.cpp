// SmolLM2-135M-Instruct (Q4_1 GGUF) against Hugging Face transformers loading the same file
// (dequantised to float32); see tools/gen_smollm2_goldens.py. Prompts go through the reference
// forward (prefill); generated tokens through decode() with the default executor (the step
// program), as the engine runs them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "../support/golden_math.h"
#include "io/safetensors_file.h"
#include "models/llama/llama_gguf_model.h"

namespace md {
namespace {

// Both sides dequantise the same blocks exactly and compute in f32; what differs is summation
// order, ~1e-6 of the logit range. 1e-3 is the bound the Qwen3.8 goldens use.
constexpr double kBound = 1e-3;
constexpr float kNearTie = 1e-3f;

std::string smollm2_path() {
  return std::string(MD_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

using test::argmax;

// max |ours − theirs| / max |theirs| over the vocabulary.
double relative_error(const float* ours, const float* theirs, int64_t vocab) {
  return test::relative_error(ours, theirs, static_cast<std::size_t>(vocab));
}

class SmolLM2Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(smollm2_path())) {
      GTEST_SKIP() << smollm2_path() << " is absent: run scripts/setup";
    }
    model_ =
        std::make_unique<LlamaGgufModel>(smollm2_path(), ModelRunOptions{2, KvCacheType::kF32});
  }
  SafetensorsFile goldens_{std::string(MD_SOURCE_DIR) +
                           "/tests/goldens/smollm2/smollm2.safetensors"};
  std::unique_ptr<LlamaGgufModel> model_;
};

TEST_F(SmolLM2Golden, LogitsMatchTransformers) {
  int64_t vocab = model_->vocab_size();
  for (int p = 0; goldens_.find(fmt::format("p{}.ids", p)) != nullptr; ++p) {
    std::vector<int32_t> ids = test::tensor_values<int32_t>(goldens_, fmt::format("p{}.ids", p));
    std::vector<int32_t> positions = test::tensor_values<int32_t>(goldens_, fmt::format("p{}.positions", p));
    std::vector<float> expected = test::tensor_values<float>(goldens_, fmt::format("p{}.logits", p));
    auto state = model_->new_sequence(256);
    std::vector<float> logits;
    model_->forward(*state, ids, LogitRows::kAll, logits);
    for (std::size_t i = 0; i < positions.size(); ++i) {
      double error = relative_error(logits.data() + positions[i] * vocab,
                                    expected.data() + static_cast<int64_t>(i) * vocab, vocab);
      std::printf("prompt %d position %d: max |dlogit| / max |logit| = %.3g\n", p, positions[i],
                  error);
      EXPECT_LE(error, kBound) << "prompt " << p << " position " << positions[i];
    }
  }
}

// The same logits with every token from the first golden position on fed through decode() (the
// default executor's step program), one step per token.
TEST_F(SmolLM2Golden, DecodeStepLogitsMatchTransformers) {
  int64_t vocab = model_->vocab_size();
  for (int p = 0; goldens_.find(fmt::format("p{}.ids", p)) != nullptr; ++p) {
    std::vector<int32_t> ids = test::tensor_values<int32_t>(goldens_, fmt::format("p{}.ids", p));
    std::vector<int32_t> positions = test::tensor_values<int32_t>(goldens_, fmt::format("p{}.positions", p));
    std::vector<float> expected = test::tensor_values<float>(goldens_, fmt::format("p{}.logits", p));
    auto state = model_->new_sequence(256);
    std::vector<float> logits;
    model_->forward(*state, std::span(ids).first(static_cast<std::size_t>(positions[0])),
                    LogitRows::kLast, logits);
    SequenceState* states[] = {state.get()};
    std::size_t next = 0;
    for (int32_t at = positions[0]; at < static_cast<int32_t>(ids.size()); ++at) {
      model_->decode(states, std::span(&ids[static_cast<std::size_t>(at)], 1), logits);
      if (next == positions.size() || positions[next] != at) continue;
      double error = relative_error(logits.data(),
                                    expected.data() + static_cast<int64_t>(next) * vocab, vocab);
      EXPECT_LE(error, kBound) << "prompt " << p << " position " << at;
      ++next;
    }
    EXPECT_EQ(next, positions.size()) << "prompt " << p;
  }
}

// Greedy continuations agree until the golden's first near-tie. The first prompt's answer is
// "The capital of France is Paris."
TEST_F(SmolLM2Golden, GreedyContinuationsMatchTransformers) {
  int64_t vocab = model_->vocab_size();
  int compared = 0;
  for (int p : {0, 3}) {
    std::vector<int32_t> ids = test::tensor_values<int32_t>(goldens_, fmt::format("p{}.ids", p));
    std::vector<int32_t> greedy = test::tensor_values<int32_t>(goldens_, fmt::format("p{}.greedy", p));
    std::vector<float> margin = test::tensor_values<float>(goldens_, fmt::format("p{}.greedy_margin", p));
    auto state = model_->new_sequence(256);
    std::vector<float> logits;
    model_->forward(*state, ids, LogitRows::kLast, logits);
    for (std::size_t step = 0; step < 24 && margin[step] >= kNearTie; ++step) {
      int32_t token = argmax(logits.data(), vocab);
      ASSERT_EQ(token, greedy[step]) << "prompt " << p << " step " << step;
      ++compared;
      SequenceState* states[] = {state.get()};
      model_->decode(states, std::span(&token, 1), logits);
      EXPECT_EQ(model_->last_greedy().at(0), argmax(logits.data(), vocab));
    }
  }
  EXPECT_GE(compared, 24);
}

}  // namespace
}  // namespace md
