// SmolLM2-135M-Instruct (Q4_1 GGUF) against Hugging Face transformers loading the same file
// (dequantised to float32); see tools/gen_smollm2_goldens.py.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

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

template <typename T>
std::vector<T> values(const SafetensorsFile& file, const std::string& name) {
  const TensorView* view = file.find(name);
  if (view == nullptr) throw std::runtime_error("golden tensor missing: " + name);
  std::vector<T> out(view->nbytes / sizeof(T));
  std::memcpy(out.data(), view->data, view->nbytes);
  return out;
}

int32_t argmax(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

class SmolLM2Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(smollm2_path())) {
      GTEST_SKIP() << smollm2_path() << " is absent: run scripts/setup";
    }
    model_ = std::make_unique<LlamaGgufModel>(smollm2_path(), ModelRunOptions{2, KvCacheType::kF32});
  }
  SafetensorsFile goldens_{std::string(MD_SOURCE_DIR) + "/tests/goldens/smollm2/smollm2.safetensors"};
  std::unique_ptr<LlamaGgufModel> model_;
};

TEST_F(SmolLM2Golden, LogitsMatchTransformers) {
  int64_t vocab = model_->vocab_size();
  for (int p = 0; goldens_.find(fmt::format("p{}.ids", p)) != nullptr; ++p) {
    std::vector<int32_t> ids = values<int32_t>(goldens_, fmt::format("p{}.ids", p));
    std::vector<int32_t> positions = values<int32_t>(goldens_, fmt::format("p{}.positions", p));
    std::vector<float> expected = values<float>(goldens_, fmt::format("p{}.logits", p));
    auto state = model_->new_sequence(256);
    std::vector<float> logits;
    model_->forward(*state, ids, LogitRows::kAll, logits);
    for (std::size_t i = 0; i < positions.size(); ++i) {
      const float* ours = logits.data() + positions[i] * vocab;
      const float* theirs = expected.data() + static_cast<int64_t>(i) * vocab;
      double diff = 0, scale = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        diff = std::max(diff, std::abs(static_cast<double>(ours[v]) - theirs[v]));
        scale = std::max(scale, std::abs(static_cast<double>(theirs[v])));
      }
      std::printf("prompt %d position %d: max |dlogit| / max |logit| = %.3g\n", p, positions[i],
                  diff / scale);
      EXPECT_LE(diff / scale, kBound) << "prompt " << p << " position " << positions[i];
    }
  }
}

// Greedy continuations agree until the golden's first near-tie. The first prompt's answer is
// "The capital of France is Paris."
TEST_F(SmolLM2Golden, GreedyContinuationsMatchTransformers) {
  int64_t vocab = model_->vocab_size();
  int compared = 0;
  for (int p : {0, 3}) {
    std::vector<int32_t> ids = values<int32_t>(goldens_, fmt::format("p{}.ids", p));
    std::vector<int32_t> greedy = values<int32_t>(goldens_, fmt::format("p{}.greedy", p));
    std::vector<float> margin = values<float>(goldens_, fmt::format("p{}.greedy_margin", p));
    auto state = model_->new_sequence(256);
    std::vector<float> logits;
    model_->forward(*state, ids, LogitRows::kLast, logits);
    for (std::size_t step = 0; step < 24 && margin[step] >= kNearTie; ++step) {
      int32_t token = argmax(logits.data(), vocab);
      ASSERT_EQ(token, greedy[step]) << "prompt " << p << " step " << step;
      ++compared;
      model_->forward(*state, std::span(&token, 1), LogitRows::kLast, logits);
    }
  }
  EXPECT_GE(compared, 24);
}

}  // namespace
}  // namespace md
