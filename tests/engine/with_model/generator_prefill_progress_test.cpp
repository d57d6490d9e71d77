// The Generator tells how a prompt's prefill advances (what `run` and `chat` show on stderr): a
// start, then each chunk's end; a prefix reused from the previous request is not counted.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "../../qwen38/qwen38_test_util.h"
#include "engine/generation.h"
#include "text/tokenizer.h"

namespace md::test {
namespace {

TEST(Qwen38Generation, PrefillProgressCountsEachChunkOfTheFreshPrompt) {
  auto model = load_fixture("tiny-qwen38", KvCacheType::kF32);
  auto tokenizer = load_tokenizer(qwen38_fixture_dir("tiny-qwen38"));
  engine::Generator generator(*model, *tokenizer, 1024);
  std::vector<std::pair<int64_t, int64_t>> seen;
  generator.set_prefill_progress(
      [&](int64_t done, int64_t total) { seen.emplace_back(done, total); });
  engine::GenerationRequest request;
  request.prompt.assign(600, 65);
  request.sampling.temperature = 0;
  request.max_tokens = 1;
  (void)generator.generate(request, nullptr);
  const std::vector<std::pair<int64_t, int64_t>> cold = {
      {0, 600}, {256, 600}, {512, 600}, {600, 600}};
  EXPECT_EQ(seen, cold);
  // The same prompt and 10 more tokens: the cached prefix is reused, only the rest is prefilled.
  seen.clear();
  request.prompt.resize(610, 66);
  (void)generator.generate(request, nullptr);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().first, 0);
  EXPECT_EQ(seen.back().first, seen.back().second);
  EXPECT_LT(seen.back().second, 610);
}

}  // namespace
}  // namespace md::test
