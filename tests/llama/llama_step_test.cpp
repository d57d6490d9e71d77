// The Llama decode step program (models/llama/llama_step.h) on SmolLM2-135M-Instruct: the fused
// executor (mega), the same program op by op (ops) and the batched reference forward give every
// row bitwise the logits of the reference forward of that row alone, at 1 and several rows, rows
// at different positions, over several steps, whatever the thread count; the greedy token the
// program computes is the argmax of its logits.
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

int32_t argmax(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

// A prompt of `length` tokens that differs per sequence.
std::vector<int32_t> prompt(int seed, int length) {
  std::vector<int32_t> ids;
  for (int i = 0; i < length; ++i) ids.push_back((seed * 7919 + i * 104729 + 11) % 49152);
  return ids;
}

using Sequences = std::vector<std::unique_ptr<SequenceState>>;

std::vector<SequenceState*> pointers(const Sequences& sequences) {
  std::vector<SequenceState*> out;
  for (const auto& s : sequences) out.push_back(s.get());
  return out;
}

class LlamaStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(smollm2_path())) {
      GTEST_SKIP() << smollm2_path() << " is absent: run scripts/setup";
    }
    model_ = open(2);
  }
  static std::unique_ptr<LlamaGgufModel> open(
      int threads, kernels::MatmulInputs inputs = kernels::MatmulInputs::kF32) {
    ModelRunOptions options{threads};
    options.matmul_inputs = inputs;
    return std::make_unique<LlamaGgufModel>(smollm2_path(), options);
  }
  // `rows` sequences prefilled (reference forward) to different lengths, the longest `longest`.
  Sequences prefilled(int rows, int longest) {
    Sequences out;
    std::vector<float> logits;
    for (int s = 0; s < rows; ++s) {
      out.push_back(model_->new_sequence(128));
      model_->forward(*out.back(), prompt(s, longest - (s * 7) % longest), LogitRows::kLast,
                      logits);
    }
    return out;
  }
  static Sequences clones(const Sequences& sequences) {
    Sequences out;
    for (const auto& s : sequences) out.push_back(s->clone());
    return out;
  }
  // Each sequence alone: its logits from the reference forward of one token.
  std::vector<float> alone(const Sequences& sequences, const std::vector<int32_t>& tokens) {
    const int64_t vocab = model_->vocab_size();
    std::vector<float> all(sequences.size() * static_cast<std::size_t>(vocab)), one;
    for (std::size_t s = 0; s < sequences.size(); ++s) {
      model_->forward(*sequences[s], std::span(&tokens[s], 1), LogitRows::kLast, one);
      std::copy(one.begin(), one.end(), all.begin() + static_cast<int64_t>(s) * vocab);
    }
    return all;
  }
  std::unique_ptr<LlamaGgufModel> model_;
};

TEST_F(LlamaStepTest, EveryExecutorAcceptedAndMegaIsTheDefault) {
  EXPECT_EQ(model_->executor(), ExecutorKind::kMega);
  for (ExecutorKind kind : {ExecutorKind::kOps, ExecutorKind::kReference, ExecutorKind::kMega}) {
    EXPECT_TRUE(model_->set_executor(kind));
    EXPECT_EQ(model_->executor(), kind);
  }
}

// 1, 3 and 8 rows (sequences at different positions), three steps each: mega, ops and the batched
// reference against each row decoded alone.
TEST_F(LlamaStepTest, MegaOpsAndReferenceEqualEachRowAloneBitwise) {
  const int64_t vocab = model_->vocab_size();
  const ExecutorKind kinds[] = {ExecutorKind::kMega, ExecutorKind::kOps, ExecutorKind::kReference};
  for (int rows : {1, 3, 8}) {
    Sequences base = prefilled(rows, 23);
    Sequences single = clones(base);
    std::vector<Sequences> batched;
    for (std::size_t k = 0; k < std::size(kinds); ++k) batched.push_back(clones(base));
    std::vector<int32_t> tokens;
    for (int s = 0; s < rows; ++s) tokens.push_back(100 + 37 * s);
    std::vector<float> logits;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> expected = alone(single, tokens);
      for (std::size_t k = 0; k < std::size(kinds); ++k) {
        ASSERT_TRUE(model_->set_executor(kinds[k]));
        model_->decode(pointers(batched[k]), tokens, logits);
        ASSERT_EQ(logits.size(), expected.size());
        for (int s = 0; s < rows; ++s) {
          ASSERT_TRUE(bitwise_equal(logits.data() + s * vocab, expected.data() + s * vocab, vocab))
              << "executor " << k << ", " << rows << " rows, row " << s << ", step " << step;
          EXPECT_EQ(batched[k][static_cast<std::size_t>(s)]->position(),
                    single[static_cast<std::size_t>(s)]->position());
          if (kinds[k] != ExecutorKind::kReference) {
            EXPECT_EQ(model_->last_greedy()[static_cast<std::size_t>(s)],
                      argmax(logits.data() + s * vocab, vocab));
          }
        }
      }
      // The next tokens: each row's own greedy choice, so the rows keep diverging.
      for (int s = 0; s < rows; ++s) {
        tokens[static_cast<std::size_t>(s)] = argmax(expected.data() + s * vocab, vocab);
      }
    }
    model_->set_executor(ExecutorKind::kMega);
  }
}

// The q8 input mode (integer dot products over int8-quantised activations) keeps the same
// contracts: every executor equals each row alone, at any thread count.
TEST_F(LlamaStepTest, Q8InputsKeepTheBitwiseContracts) {
  model_ = open(2, kernels::MatmulInputs::kQ8);
  const int64_t vocab = model_->vocab_size();
  const int rows = 4;
  Sequences base = prefilled(rows, 19);
  std::vector<int32_t> tokens = {11, 2000, 30000, 49000};
  std::vector<float> expected = alone(clones(base), tokens);
  for (ExecutorKind kind : {ExecutorKind::kMega, ExecutorKind::kOps, ExecutorKind::kReference}) {
    ASSERT_TRUE(model_->set_executor(kind));
    Sequences batch = clones(base);
    std::vector<float> logits;
    model_->decode(pointers(batch), tokens, logits);
    EXPECT_TRUE(bitwise_equal(logits.data(), expected.data(), rows * vocab))
        << "executor " << static_cast<int>(kind);
  }
  std::unique_ptr<LlamaGgufModel> three = open(3, kernels::MatmulInputs::kQ8);
  Sequences batch = clones(base);
  std::vector<float> logits;
  three->decode(pointers(batch), tokens, logits);
  EXPECT_TRUE(bitwise_equal(logits.data(), expected.data(), rows * vocab)) << "3 threads";
  // The mode is engaged: the f32 mode's logits differ.
  std::unique_ptr<LlamaGgufModel> f32 = open(2);
  Sequences plain = clones(base);
  f32->decode(pointers(plain), tokens, logits);
  EXPECT_FALSE(bitwise_equal(logits.data(), expected.data(), rows * vocab));
}

// More rows than one step takes: the model runs them as steps of 8 and the rest.
TEST_F(LlamaStepTest, MoreRowsThanOneStepSplitIntoSteps) {
  const int64_t vocab = model_->vocab_size();
  Sequences batch = prefilled(11, 17);
  Sequences single = clones(batch);
  std::vector<int32_t> tokens;
  for (int s = 0; s < 11; ++s) tokens.push_back(500 + 3 * s);
  std::vector<float> logits;
  model_->decode(pointers(batch), tokens, logits);
  std::vector<float> expected = alone(single, tokens);
  ASSERT_EQ(logits.size(), expected.size());
  EXPECT_TRUE(bitwise_equal(logits.data(), expected.data(), 11 * vocab));
  ASSERT_EQ(model_->last_greedy().size(), 11u);
  for (int s = 0; s < 11; ++s) {
    EXPECT_EQ(model_->last_greedy()[static_cast<std::size_t>(s)],
              argmax(logits.data() + s * vocab, vocab));
  }
}

// The program is built per worker count; the tiles each worker takes differ, the results do not.
TEST_F(LlamaStepTest, ResultsDoNotDependOnThreadCount) {
  const int64_t vocab = model_->vocab_size();
  Sequences base = prefilled(5, 29);
  std::vector<int32_t> tokens = {7, 1000, 2000, 3000, 40000};
  std::vector<float> reference;
  Sequences sequences = clones(base);
  model_->decode(pointers(sequences), tokens, reference);
  for (int threads : {1, 3}) {
    std::unique_ptr<LlamaGgufModel> other = open(threads);
    for (ExecutorKind kind : {ExecutorKind::kMega, ExecutorKind::kOps}) {
      other->set_executor(kind);
      Sequences copy = clones(base);
      std::vector<float> logits;
      other->decode(pointers(copy), tokens, logits);
      EXPECT_TRUE(bitwise_equal(logits.data(), reference.data(), 5 * vocab))
          << threads << " threads, executor " << static_cast<int>(kind);
    }
  }
}

TEST_F(LlamaStepTest, StepRefusesBadRowsBeforeChangingAnything) {
  Sequences fresh;
  for (int s = 0; s < 2; ++s) fresh.push_back(model_->new_sequence(4));
  std::vector<float> logits;
  for (ExecutorKind kind : {ExecutorKind::kMega, ExecutorKind::kOps}) {
    model_->set_executor(kind);
    std::vector<int32_t> bad = {5, 49152};
    EXPECT_THROW(model_->decode(pointers(fresh), bad, logits), Error);
    std::vector<SequenceState*> twice = {fresh[0].get(), fresh[0].get()};
    EXPECT_THROW(model_->decode(twice, std::vector<int32_t>{5, 6}, logits), Error);
    EXPECT_EQ(fresh[0]->position(), 0);
    EXPECT_EQ(fresh[1]->position(), 0);
  }
}

}  // namespace
}  // namespace md
