// Batch invariance of the Llama GGUF model on SmolLM2-135M-Instruct: a sequence's logits do not
// depend on which other rows share its weight passes (prefill rows, or other sequences in a batch
// decode step). The GGUF kernels reduce every output in a fixed order whatever the batch
// (kernels/gguf_matmul.h) and everything else is per row, so the comparisons are bitwise.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "models/llama/llama_gguf_model.h"

namespace md {
namespace {

std::string smollm2_path() {
  return std::string(MD_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

bool bitwise_equal(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

class SmolLM2Batch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(smollm2_path())) {
      GTEST_SKIP() << smollm2_path() << " is absent: run scripts/setup";
    }
    model_ = std::make_unique<LlamaGgufModel>(smollm2_path(), ModelRunOptions{2});
  }
  // A prompt of `length` tokens that differs per sequence.
  std::vector<int32_t> prompt(int seed, int length) const {
    std::vector<int32_t> ids;
    for (int i = 0; i < length; ++i) ids.push_back((seed * 7919 + i * 104729 + 11) % 49152);
    return ids;
  }
  std::unique_ptr<LlamaGgufModel> model_;
};

TEST_F(SmolLM2Batch, PrefillRowsEqualTokenByTokenDecoding) {
  const int64_t vocab = model_->vocab_size();
  const std::vector<int32_t> ids = prompt(1, 11);
  auto whole = model_->new_sequence(64);
  std::vector<float> all;
  model_->forward(*whole, ids, LogitRows::kAll, all);
  auto stepwise = model_->new_sequence(64);
  std::vector<float> one;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    model_->forward(*stepwise, std::span(&ids[t], 1), LogitRows::kLast, one);
    ASSERT_TRUE(bitwise_equal(one.data(), all.data() + static_cast<int64_t>(t) * vocab, vocab))
        << "position " << t;
  }
}

// Nine sequences (two groups of the kernels' 8 activation rows) at different positions, decoded
// together, against clones decoded one at a time.
TEST_F(SmolLM2Batch, BatchDecodeEqualsDecodingEachSequenceAlone) {
  const int64_t vocab = model_->vocab_size();
  constexpr int kSequences = 9;
  std::vector<std::unique_ptr<SequenceState>> batch, alone;
  std::vector<SequenceState*> states;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  for (int s = 0; s < kSequences; ++s) {
    batch.push_back(model_->new_sequence(64));
    model_->forward(*batch.back(), prompt(s, 1 + s % 4), LogitRows::kLast, logits);
    alone.push_back(batch.back()->clone());
    states.push_back(batch.back().get());
    tokens.push_back(100 + 37 * s);
  }
  std::vector<float> own;
  for (int step = 0; step < 2; ++step) {
    model_->decode(states, tokens, logits);
    ASSERT_EQ(logits.size(), static_cast<std::size_t>(kSequences * vocab));
    for (int s = 0; s < kSequences; ++s) {
      model_->forward(*alone[static_cast<std::size_t>(s)], std::span(&tokens[s], 1),
                      LogitRows::kLast, own);
      ASSERT_TRUE(bitwise_equal(own.data(), logits.data() + s * vocab, vocab))
          << "sequence " << s << " step " << step;
      EXPECT_EQ(states[static_cast<std::size_t>(s)]->position(),
                alone[static_cast<std::size_t>(s)]->position());
    }
    for (int s = 0; s < kSequences; ++s) tokens[static_cast<std::size_t>(s)] += 1000;
  }
}

TEST_F(SmolLM2Batch, DecodeRefusesBadBatchesBeforeChangingAnything) {
  auto a = model_->new_sequence(4), b = model_->new_sequence(4), c = model_->new_sequence(4);
  std::vector<float> logits;
  model_->forward(*b, prompt(2, 4), LogitRows::kLast, logits);  // b is full
  std::vector<int32_t> two = {5, 6};
  std::vector<SequenceState*> twice = {a.get(), a.get()};
  EXPECT_THROW(model_->decode(twice, two, logits), Error);
  std::vector<SequenceState*> with_full = {a.get(), b.get()};
  EXPECT_THROW(model_->decode(with_full, two, logits), Error);
  std::vector<int32_t> bad = {5, 49152};
  std::vector<SequenceState*> fresh = {a.get(), c.get()};
  EXPECT_THROW(model_->decode(fresh, bad, logits), Error);
  EXPECT_THROW(model_->decode(fresh, std::vector<int32_t>{5}, logits), Error);
  EXPECT_EQ(a->position(), 0);
  EXPECT_EQ(b->position(), 4);
  EXPECT_EQ(c->position(), 0);
}

}  // namespace
}  // namespace md
