// The server's scheduler with speculative decoding (tiny-dflash2 drafting for tiny-qwen38): each
// generating row runs its own rounds, so greedy output equals the plain scheduler's token for
// token (log-probabilities included), seeded sampled output equals `run --draft`'s (the
// Generator's rounds) and does not depend on what else runs, sibling choices that share a
// prefill get a copy of the drafter's context, and the round counters add up.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../qwen38/qwen38_test_util.h"
#include "engine/batch_scheduler.h"
#include "engine/generation.h"
#include "models/drafters/dflash2/dflash2_drafter.h"
#include "scheduler_test_util.h"
#include "test_drafters.h"

namespace md::test {
namespace {

constexpr int64_t kContext = 512;

std::string drafter_dir() {
  return std::string(MD_GOLDEN_DIR) + "/dflash2/tiny-dflash2";
}

class SpeculativeSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = load_fixture("tiny-qwen38", KvCacheType::kF32, {}, 1);
    tokenizer_ = load_tokenizer(qwen38_fixture_dir("tiny-qwen38"));
    drafter_ = load_dflash2_drafter(drafter_dir(), model_->target_view());
  }
  engine::SchedulerOptions options(int rows, bool speculate) {
    engine::SchedulerOptions o;
    o.rows = rows;
    o.context = kContext;
    o.prefill_chunk = 64;
    if (speculate) {
      o.drafter = drafter_.get();
      o.spec_max_rows = rows;  // every row speculates (the crowded policy has its own test)
      o.on_round = [this](int64_t drafted, int64_t accepted) {
        std::lock_guard lock(rounds_mutex_);
        ++rounds_seen_;
        drafted_seen_ += drafted;
        accepted_seen_ += accepted;
        EXPECT_LE(accepted, drafted);
      };
    }
    return o;
  }
  // Prompts of 1, 2, 40 and 150 tokens (the last crosses two 64-token prefill chunks and the
  // drafter's 16-position window).
  std::vector<std::vector<int32_t>> prompts() const {
    std::vector<std::vector<int32_t>> out{{7}, {11, 300}};
    for (int64_t n : {40, 150}) {
      std::vector<int32_t> p;
      for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + n) % 500));
      out.push_back(std::move(p));
    }
    return out;
  }
  std::vector<ChoiceResult> run_all(BatchScheduler& scheduler,
                                    const std::vector<ChoiceWork>& works) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const ChoiceWork& w : works) {
      streams.push_back(std::make_shared<RequestStream>());
      EXPECT_EQ(scheduler.submit(streams.back(), {w}), BatchScheduler::Admission::kAccepted);
    }
    std::vector<ChoiceResult> results;
    for (auto& stream : streams) results.push_back(collect(*stream, 1).at(0));
    return results;
  }

  std::unique_ptr<Qwen38Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<SpeculativeDrafter> drafter_;
  std::mutex rounds_mutex_;
  int64_t rounds_seen_ = 0, drafted_seen_ = 0, accepted_seen_ = 0;
};

TEST_F(SpeculativeSchedulerTest, GreedyOutputEqualsThePlainScheduler) {
  std::vector<ChoiceWork> works;
  int i = 0;
  for (auto& p : prompts()) works.push_back(make_work(p, 60 + 13 * i++, 0.0f, 1));
  std::vector<ChoiceResult> plain;
  {
    BatchScheduler scheduler(*model_, *tokenizer_, options(3, false));
    plain = run_all(scheduler, works);
  }
  BatchScheduler scheduler(*model_, *tokenizer_, options(3, true));
  std::vector<ChoiceResult> spec = run_all(scheduler, works);
  for (std::size_t r = 0; r < works.size(); ++r) {
    EXPECT_EQ(spec[r].error, "") << r;
    EXPECT_EQ(spec[r].ids, plain[r].ids) << "request " << r;
    // Verify rows compute exactly what decode steps compute.
    EXPECT_EQ(spec[r].logprobs, plain[r].logprobs) << "request " << r;
    EXPECT_EQ(spec[r].text, plain[r].text) << "request " << r;
    EXPECT_EQ(spec[r].ids.size(), static_cast<std::size_t>(works[r].request.max_tokens));
  }
  engine::SchedulerSnapshot s = scheduler.snapshot();
  EXPECT_GT(s.spec_rounds, 20);
  EXPECT_EQ(s.spec_drafted, 7 * s.spec_rounds);  // far from the context's end: full blocks
  EXPECT_LE(s.spec_accepted, s.spec_drafted);
  std::lock_guard lock(rounds_mutex_);
  EXPECT_EQ(rounds_seen_, s.spec_rounds);
  EXPECT_EQ(drafted_seen_, s.spec_drafted);
  EXPECT_EQ(accepted_seen_, s.spec_accepted);
  EXPECT_EQ(scheduler.draft_positions(), 7);
}

// A seeded sampled request speculates the same way in the server as in `run --draft`, and alone
// or among others.
TEST_F(SpeculativeSchedulerTest, SampledOutputEqualsTheGeneratorAndIsBatchInvariant) {
  std::vector<ChoiceWork> works;
  int i = 0;
  for (auto& p : prompts()) works.push_back(make_work(p, 50, 0.9f, 500 + i++));
  std::vector<std::vector<int32_t>> generated;
  for (const ChoiceWork& w : works) {
    engine::Generator generator(*model_, *tokenizer_, kContext);
    generator.set_drafter(drafter_.get());
    engine::GenerationRequest request = w.request;
    request.sampling.seed = w.seed;
    std::vector<int32_t> ids;
    for (const engine::GeneratedToken& t : generator.generate(request, nullptr).tokens) {
      ids.push_back(t.id);
    }
    generated.push_back(std::move(ids));
  }
  std::vector<ChoiceResult> alone;
  {
    BatchScheduler scheduler(*model_, *tokenizer_, options(1, true));
    alone = run_all(scheduler, works);
  }
  BatchScheduler scheduler(*model_, *tokenizer_, options(4, true));
  std::vector<ChoiceResult> together = run_all(scheduler, works);
  for (std::size_t r = 0; r < works.size(); ++r) {
    EXPECT_EQ(alone[r].ids, generated[r]) << "request " << r;
    EXPECT_EQ(together[r].ids, alone[r].ids) << "request " << r;
    EXPECT_EQ(together[r].logprobs, alone[r].logprobs) << "request " << r;
  }
  // Negative control: without speculation the same seeds give other tokens (the acceptance
  // lanes differ from the plain draw), so the comparisons above are not vacuous.
  BatchScheduler plain(*model_, *tokenizer_, options(4, false));
  std::vector<ChoiceResult> unspeculated = run_all(plain, works);
  int differing = 0;
  for (std::size_t r = 0; r < works.size(); ++r) differing += unspeculated[r].ids != alone[r].ids;
  EXPECT_GT(differing, 0);
}

// Choices 1 and 2 of one prompt follow choice 0's prefill (cloned state and drafter context) and
// still produce what each produces alone.
TEST_F(SpeculativeSchedulerTest, SiblingChoicesCloneTheDrafterContext) {
  std::vector<int32_t> prompt = prompts().back();
  std::vector<ChoiceWork> three;
  for (int j = 0; j < 3; ++j) {
    ChoiceWork w = make_work(prompt, 40, 0.8f, engine::choice_seed(3, 0, j));
    w.choice = j;
    three.push_back(w);
  }
  std::vector<ChoiceResult> alone;
  for (const ChoiceWork& w : three) {
    BatchScheduler solo(*model_, *tokenizer_, options(1, true));
    ChoiceWork single = w;
    single.choice = 0;
    alone.push_back(run_all(solo, {single}).at(0));
  }
  BatchScheduler scheduler(*model_, *tokenizer_, options(3, true));
  auto stream = std::make_shared<RequestStream>();
  ASSERT_EQ(scheduler.submit(stream, three), BatchScheduler::Admission::kAccepted);
  std::vector<ChoiceResult> got = collect(*stream, 3);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(got[j].ids, alone[j].ids) << "choice " << j;
  EXPECT_EQ(scheduler.snapshot().prefill_tokens, static_cast<int64_t>(prompt.size()));
}

// Stop tokens and max_tokens that fall inside a round end the choice exactly where plain decoding
// ends it (same tokens, text and finish reason); the rows are then free.
TEST_F(SpeculativeSchedulerTest, StopsInsideARoundTruncateLikePlainDecoding) {
  std::vector<int32_t> prompt = prompts()[2];
  BatchScheduler plain(*model_, *tokenizer_, options(1, false));
  std::vector<int32_t> greedy = run_all(plain, {make_work(prompt, 40, 0.0f, 1)}).at(0).ids;
  ASSERT_EQ(greedy.size(), 40u);
  std::vector<ChoiceWork> works;
  for (int64_t max_tokens : {1, 2, 5, 9, 17})
    works.push_back(make_work(prompt, max_tokens, 0.0f, 1));
  for (std::size_t at : {3u, 12u, 30u}) {
    ChoiceWork w = make_work(prompt, 40, 0.0f, 1);
    w.request.stop_token_ids = {greedy[at]};
    works.push_back(w);
  }
  BatchScheduler scheduler(*model_, *tokenizer_, options(1, true));
  for (const ChoiceWork& w : works) {
    ChoiceResult expected = run_all(plain, {w}).at(0);
    ChoiceResult got = run_all(scheduler, {w}).at(0);
    EXPECT_EQ(got.ids, expected.ids) << w.request.max_tokens;
    EXPECT_EQ(got.text, expected.text) << w.request.max_tokens;
    EXPECT_EQ(got.finish, expected.finish) << w.request.max_tokens;
    EXPECT_LT(expected.ids.size(), 40u + (w.request.stop_token_ids.empty() ? 1u : 0u));
  }
  EXPECT_EQ(scheduler.snapshot().running_rows, 0);
  EXPECT_GT(scheduler.snapshot().spec_rounds, 0);
}

// With spec_max_rows = 1, greedy rows decode together in plain steps while several generate and
// speculate once one is left, with the same tokens either way. The drafter's context must follow
// the plain steps too: an oracle drafter (it proposes the true continuation of the position its
// context says it is at) gets all 7 drafts accepted in every round but the one each request's
// max_tokens cuts. A sampled request among them speculates throughout and gives what it gives
// alone.
TEST_F(SpeculativeSchedulerTest, CrowdedGreedyRowsDecodeTogetherAndKeepTheDrafterCurrent) {
  std::vector<int32_t> prompt = prompts()[2];
  BatchScheduler plain(*model_, *tokenizer_, options(1, false));
  std::vector<int32_t> greedy = run_all(plain, {make_work(prompt, 90, 0.0f, 1)}).at(0).ids;
  std::vector<int32_t> truth = prompt;
  truth.insert(truth.end(), greedy.begin(), greedy.end());
  OracleDrafter oracle(truth, kTestBlock, model_->vocab_size());  // never wrong

  engine::SchedulerOptions o = options(4, false);
  o.drafter = &oracle;
  o.spec_max_rows = 1;
  int64_t cut_rounds = 0, rounds = 0;
  o.on_round = [&](int64_t drafted, int64_t accepted) {
    ++rounds;
    cut_rounds += accepted < drafted ? 1 : 0;
  };
  std::vector<ChoiceWork> works{make_work(prompt, 20, 0.0f, 1), make_work(prompt, 50, 0.0f, 1),
                                make_work(prompt, 90, 0.0f, 1)};
  {
    BatchScheduler scheduler(*model_, *tokenizer_, o);
    std::vector<ChoiceResult> got = run_all(scheduler, works);
    for (std::size_t r = 0; r < works.size(); ++r) {
      auto n = static_cast<std::ptrdiff_t>(works[r].request.max_tokens);
      EXPECT_EQ(got[r].ids, std::vector<int32_t>(greedy.begin(), greedy.begin() + n)) << r;
    }
    engine::SchedulerSnapshot s = scheduler.snapshot();
    EXPECT_EQ(s.spec_rounds, rounds);
    // The 90-token request is alone for its last ~40 tokens: rounds of 8 there, plain steps of
    // two or three rows before.
    EXPECT_GE(rounds, 3) << "a lone greedy row should speculate";
    EXPECT_GT(s.decode_steps, rounds + 10) << "crowded greedy rows should decode together";
    EXPECT_LE(cut_rounds, 3) << "the drafter's context fell behind the plain steps";
  }

  // A sampled request speculates whatever the load, so its tokens are its own.
  ChoiceWork sampled = make_work(prompts()[1], 30, 0.9f, 77);
  BatchScheduler solo(*model_, *tokenizer_, o);
  std::vector<int32_t> alone = run_all(solo, {sampled}).at(0).ids;
  BatchScheduler crowded(*model_, *tokenizer_, o);
  works.push_back(sampled);
  std::vector<ChoiceResult> got = run_all(crowded, works);
  EXPECT_EQ(got.back().ids, alone);
  EXPECT_EQ(got[2].ids, greedy);
}

}  // namespace
}  // namespace md::test
