// The Llama prefill program (models/llama/llama_step.h, RowMode::kPrefill) on
// SmolLM2-135M-Instruct: a prompt run as fused programs on the persistent team (mega) or op by op
// (ops) leaves bitwise the KV cache and gives bitwise the logits of the reference forward, for the
// last row or every row, whatever the chunk split (ModelRunOptions::prefill_rows, and how the
// caller splits the prompt), the thread count, or a prompt that starts after earlier tokens; decode
// steps after it agree.
#include <fmt/format.h>
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

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> prompt(int length, int seed = 1) {
  std::vector<int32_t> ids;
  for (int i = 0; i < length; ++i) ids.push_back((seed * 7919 + i * 104729 + 11) % 49152);
  return ids;
}

// Every layer's cached keys and values, as written.
std::vector<float> kv_contents(const SequenceState& sequence) {
  std::vector<float> out;
  for (const kernels::KvCache& cache : dynamic_cast<const LlamaState&>(sequence).kv) {
    for (const std::vector<float>& part : {cache.keys_f32(), cache.values_f32()})
      out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// What a prefill leaves: the logits it returned, the cache, the next decode step's logits.
struct Prefilled {
  std::vector<float> logits, kv, next;
};

class LlamaPrefillTest : public ::testing::Test {
 protected:
  static constexpr int64_t kContext = 96;

  void SetUp() override {
    if (!std::filesystem::exists(smollm2_path())) {
      GTEST_SKIP() << smollm2_path() << " is absent: run scripts/setup";
    }
  }
  static std::unique_ptr<LlamaGgufModel> open(
      int threads, ExecutorKind executor, int64_t prefill_rows,
      kernels::MatmulInputs inputs = kernels::MatmulInputs::kF32) {
    ModelRunOptions options{threads};
    options.executor = executor;
    options.prefill_rows = prefill_rows;
    options.matmul_inputs = inputs;
    return std::make_unique<LlamaGgufModel>(smollm2_path(), options);
  }
  // `tokens` fed in calls of `split` tokens each (the rest in the last), then one decode step.
  static Prefilled run(LlamaGgufModel& model, const std::vector<int32_t>& tokens, LogitRows rows,
                       std::vector<std::size_t> split = {}) {
    if (split.empty()) split = {tokens.size()};
    auto state = model.new_sequence(kContext);
    Prefilled out;
    std::vector<float> logits;
    std::size_t at = 0;
    for (std::size_t part : split) {
      model.forward(*state, std::span(tokens).subspan(at, part), rows, logits);
      out.logits.insert(out.logits.end(), logits.begin(), logits.end());
      at += part;
    }
    EXPECT_EQ(at, tokens.size());
    EXPECT_EQ(state->position(), static_cast<int64_t>(tokens.size()));
    out.kv = kv_contents(*state);
    SequenceState* states[] = {state.get()};
    model.decode(states, std::vector<int32_t>{4242}, out.next);
    return out;
  }
};

// Chunks of 16 rows over a 45-token prompt (three chunks, the last ragged): every row's logits,
// the cache and the next step equal the reference forward's, on both program executors, with f32
// and q8 matmul inputs; the programs did run (three of them), the reference ran none.
TEST_F(LlamaPrefillTest, ProgramsEqualTheReferenceForwardBitwise) {
  const std::vector<int32_t> tokens = prompt(45);
  for (kernels::MatmulInputs inputs : {kernels::MatmulInputs::kF32, kernels::MatmulInputs::kQ8}) {
    const int mode = static_cast<int>(inputs);
    std::unique_ptr<LlamaGgufModel> reference = open(2, ExecutorKind::kReference, 16, inputs);
    Prefilled expected = run(*reference, tokens, LogitRows::kAll);
    ASSERT_EQ(expected.logits.size(), 45u * 49152u);
    EXPECT_EQ(reference->prefill_program_runs(), 0);
    for (ExecutorKind kind : {ExecutorKind::kMega, ExecutorKind::kOps}) {
      std::unique_ptr<LlamaGgufModel> model = open(2, kind, 16, inputs);
      Prefilled got = run(*model, tokens, LogitRows::kAll);
      const std::string what = fmt::format("executor {}, inputs {}", static_cast<int>(kind), mode);
      EXPECT_EQ(model->prefill_program_runs(), 3) << what;
      EXPECT_TRUE(bitwise_equal(got.logits, expected.logits)) << what;
      EXPECT_TRUE(bitwise_equal(got.kv, expected.kv)) << what;
      EXPECT_TRUE(bitwise_equal(got.next, expected.next)) << what;
    }
  }
}

// The last row only, however the prompt is split: by the model (prefill_rows 1, 7, 256) or by the
// caller (1 + 30 + 14 tokens, each call's last row), at 1 and 3 threads.
TEST_F(LlamaPrefillTest, AnySplitAndThreadCountGiveTheSameBits) {
  const std::vector<int32_t> tokens = prompt(45, 2);
  Prefilled expected = run(*open(2, ExecutorKind::kReference, 256), tokens, LogitRows::kLast);
  ASSERT_EQ(expected.logits.size(), 49152u);
  for (int64_t rows : {1, 7, 256}) {
    Prefilled got = run(*open(2, ExecutorKind::kMega, rows), tokens, LogitRows::kLast);
    EXPECT_TRUE(bitwise_equal(got.logits, expected.logits)) << rows << " rows";
    EXPECT_TRUE(bitwise_equal(got.kv, expected.kv)) << rows << " rows";
    EXPECT_TRUE(bitwise_equal(got.next, expected.next)) << rows << " rows";
  }
  Prefilled by_reference =
      run(*open(2, ExecutorKind::kReference, 256), tokens, LogitRows::kLast, {1, 30, 14});
  for (int threads : {1, 3}) {
    Prefilled got =
        run(*open(threads, ExecutorKind::kMega, 16), tokens, LogitRows::kLast, {1, 30, 14});
    EXPECT_TRUE(bitwise_equal(got.logits, by_reference.logits)) << threads << " threads";
    EXPECT_TRUE(bitwise_equal(got.kv, expected.kv)) << threads << " threads";
    EXPECT_TRUE(bitwise_equal(got.next, expected.next)) << threads << " threads";
  }
}

// The same model prefills and decodes with either executor; its prefill programs are kept per
// logit mode, and a bad prompt changes nothing.
TEST_F(LlamaPrefillTest, RefusesBadPromptsBeforeChangingAnything) {
  std::unique_ptr<LlamaGgufModel> model = open(2, ExecutorKind::kMega, 8);
  auto state = model->new_sequence(16);
  std::vector<float> logits;
  EXPECT_THROW(model->forward(*state, std::vector<int32_t>{1, 2, 49152}, LogitRows::kLast, logits),
               Error);
  EXPECT_THROW(model->forward(*state, prompt(17), LogitRows::kLast, logits), Error);
  EXPECT_EQ(state->position(), 0);
  model->forward(*state, prompt(16), LogitRows::kLast, logits);
  EXPECT_EQ(state->position(), 16);
  EXPECT_THROW(model->forward(*state, std::vector<int32_t>{5}, LogitRows::kLast, logits), Error);
  EXPECT_EQ(state->position(), 16);
  for (int64_t rows : {0, 1025}) {
    EXPECT_THROW(open(1, ExecutorKind::kMega, rows), Error) << rows;
  }
}

}  // namespace
}  // namespace md
