// The Generator's cancellation on the tiny-qwen38 fixture: a request cancelled before its prefill
// produces nothing and leaves the generator usable.
#include <gtest/gtest.h>

#include <atomic>

#include "../../qwen38/qwen38_test_util.h"
#include "engine/generation.h"
#include "text/tokenizer.h"

namespace md::test {
namespace {

TEST(Qwen38Generation, CancelledBeforePrefillGeneratesNothing) {
  auto model = load_fixture("tiny-qwen38", KvCacheType::kF32);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir("tiny-qwen38"));
  engine::Generator generator(*model, *tokenizer, 1024);
  engine::GenerationRequest request;
  request.prompt.assign(600, 65);  // three prefill chunks
  request.sampling.temperature = 0;
  std::atomic<bool> cancel{true};
  engine::GenerationResult result = generator.generate(request, nullptr, &cancel);
  EXPECT_EQ(result.finish, engine::FinishReason::kCancelled);
  EXPECT_TRUE(result.tokens.empty());
  EXPECT_TRUE(generator.cached_tokens().empty());
  // The generator stays usable: the same request without cancellation runs normally.
  request.max_tokens = 3;
  request.ignore_eos = true;
  result = generator.generate(request, nullptr);
  EXPECT_EQ(result.tokens.size(), 3u);
  EXPECT_EQ(result.finish, engine::FinishReason::kLength);
}

}  // namespace
}  // namespace md::test
