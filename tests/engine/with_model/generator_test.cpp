// The Generator on the tiny-qwen38 fixture: cancellation before the prefill, and the prefill
// progress it reports (what `run` and `chat` show on stderr).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "../../qwen38/qwen38_test_util.h"
#include "engine/generation.h"
#include "text/tokenizer.h"

namespace md::test {
namespace {

class Qwen38Generation : public ::testing::Test {
 protected:
  Qwen38Generation()
      : model_(load_fixture("tiny-qwen38", KvCacheType::kF32)),
        tokenizer_(load_tokenizer(qwen38_fixture_dir("tiny-qwen38"))),
        generator_(*model_, *tokenizer_, 1024) {
    request_.prompt.assign(600, 65);  // three prefill chunks
    request_.sampling.temperature = 0;
  }

  std::unique_ptr<Qwen38Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  engine::Generator generator_;
  engine::GenerationRequest request_;
};

// A request cancelled before its prefill produces nothing and leaves the generator usable.
TEST_F(Qwen38Generation, CancelledBeforePrefillGeneratesNothing) {
  std::atomic<bool> cancel{true};
  engine::GenerationResult result = generator_.generate(request_, nullptr, &cancel);
  EXPECT_EQ(result.finish, engine::FinishReason::kCancelled);
  EXPECT_TRUE(result.tokens.empty());
  EXPECT_TRUE(generator_.cached_tokens().empty());
  // The same request without cancellation runs normally.
  request_.max_tokens = 3;
  request_.ignore_eos = true;
  result = generator_.generate(request_, nullptr);
  EXPECT_EQ(result.tokens.size(), 3u);
  EXPECT_EQ(result.finish, engine::FinishReason::kLength);
}

// A start, then each chunk's end; a prefix reused from the previous request is not counted.
TEST_F(Qwen38Generation, PrefillProgressCountsEachChunkOfTheFreshPrompt) {
  std::vector<std::pair<int64_t, int64_t>> seen;
  generator_.set_prefill_progress(
      [&](int64_t done, int64_t total) { seen.emplace_back(done, total); });
  request_.max_tokens = 1;
  (void)generator_.generate(request_, nullptr);
  const std::vector<std::pair<int64_t, int64_t>> cold = {
      {0, 600}, {256, 600}, {512, 600}, {600, 600}};
  EXPECT_EQ(seen, cold);
  // The same prompt and 10 more tokens: the cached prefix is reused, only the rest is prefilled.
  seen.clear();
  request_.prompt.resize(610, 66);
  (void)generator_.generate(request_, nullptr);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().first, 0);
  EXPECT_EQ(seen.back().first, seen.back().second);
  EXPECT_LT(seen.back().second, 610);
}

}  // namespace
}  // namespace md::test
