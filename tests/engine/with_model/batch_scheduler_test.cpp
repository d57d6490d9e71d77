// The server's continuous-batching scheduler on a Qwen3.8 fixture: same output as the
// single-sequence Generator, batch invariance (alone vs beside other requests, bitwise), queue
// limits, cancellation, prompt scoring and failures confined to their request.
#include "engine/batch_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../qwen38/qwen38_test_util.h"
#include "engine/generation.h"
#include "scheduler_test_util.h"
#include "text/tokenizer.h"

namespace md::test {
namespace {

constexpr int64_t kContext = 512;

class BatchSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = load_fixture("tiny-qwen38-hd256", KvCacheType::kBf16);
    tokenizer_ = load_tokenizer(qwen38_fixture_dir("tiny-qwen38-hd256"));
  }
  engine::SchedulerOptions options(int rows) const {
    engine::SchedulerOptions o;
    o.rows = rows;
    o.context = kContext;
    o.prefill_chunk = 64;
    return o;
  }
  std::vector<int32_t> prompt(const std::string& text) const { return tokenizer_->encode(text); }

  std::unique_ptr<Qwen38Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(BatchSchedulerTest, GreedyOutputEqualsTheGenerator) {
  std::vector<int32_t> ids =
      prompt("The quick brown fox jumps over the lazy dog, again and again.");
  engine::Generator generator(*model_, *tokenizer_, kContext);
  ChoiceWork work = make_work(ids, 40, 0.0f, 1);
  engine::GenerationResult expected = generator.generate(work.request, nullptr);

  BatchScheduler scheduler(*model_, *tokenizer_, options(2));
  auto stream = std::make_shared<RequestStream>("r");
  ASSERT_EQ(scheduler.submit(stream, {work}), BatchScheduler::Admission::kAccepted);
  ChoiceResult got = collect(*stream, 1).at(0);
  ASSERT_EQ(got.ids.size(), expected.tokens.size());
  for (std::size_t i = 0; i < got.ids.size(); ++i) {
    EXPECT_EQ(got.ids[i], expected.tokens[i].id) << i;
  }
  EXPECT_EQ(got.text, expected.text);
  EXPECT_EQ(got.finish, engine::FinishReason::kLength);
}

// Each request's tokens and log-probabilities are bitwise the same alone (one row) and among
// others (four rows busy, prompts of different lengths entering at different times, greedy and
// seeded sampling mixed).
TEST_F(BatchSchedulerTest, OutputsAreBatchInvariant) {
  std::vector<ChoiceWork> works;
  const std::string long_text =
      "A much longer prompt that takes more than one prefill chunk because it goes on and on "
      "with many words in it, and then some more.";
  const char* texts[] = {"Hello", long_text.c_str(), "Third", "Count: one two three four five",
                         "x",     "The end."};
  for (int i = 0; i < 6; ++i) {
    works.push_back(make_work(prompt(texts[i]), 24 + 5 * i, i % 2 == 0 ? 0.0f : 0.9f, 100 + i));
  }
  std::vector<ChoiceResult> alone;
  {
    BatchScheduler scheduler(*model_, *tokenizer_, options(1));
    for (const ChoiceWork& w : works) {
      auto stream = std::make_shared<RequestStream>();
      ASSERT_EQ(scheduler.submit(stream, {w}), BatchScheduler::Admission::kAccepted);
      alone.push_back(collect(*stream, 1).at(0));
    }
  }
  BatchScheduler scheduler(*model_, *tokenizer_, options(4));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const ChoiceWork& w : works) {
    streams.push_back(std::make_shared<RequestStream>());
    ASSERT_EQ(scheduler.submit(streams.back(), {w}), BatchScheduler::Admission::kAccepted);
  }
  for (std::size_t i = 0; i < works.size(); ++i) {
    ChoiceResult together = collect(*streams[i], 1).at(0);
    EXPECT_EQ(together.ids, alone[i].ids) << "request " << i;
    EXPECT_EQ(together.logprobs, alone[i].logprobs) << "request " << i;
    EXPECT_EQ(together.text, alone[i].text) << "request " << i;
  }
  EXPECT_GT(scheduler.snapshot().decode_steps, 0);
}

TEST_F(BatchSchedulerTest, SeededChoicesDifferAndChoiceZeroMatchesASingleRequest) {
  std::vector<int32_t> ids = prompt("Sample me");
  BatchScheduler scheduler(*model_, *tokenizer_, options(3));
  std::vector<ChoiceWork> three;
  for (int j = 0; j < 3; ++j) {
    ChoiceWork w = make_work(ids, 32, 1.0f, engine::choice_seed(7, 0, j));
    w.choice = j;
    three.push_back(w);
  }
  auto stream = std::make_shared<RequestStream>();
  ASSERT_EQ(scheduler.submit(stream, three), BatchScheduler::Admission::kAccepted);
  std::vector<ChoiceResult> got = collect(*stream, 3);
  EXPECT_NE(got[0].ids, got[1].ids);
  EXPECT_NE(got[1].ids, got[2].ids);
  auto single = std::make_shared<RequestStream>();
  ASSERT_EQ(scheduler.submit(single, {make_work(ids, 32, 1.0f, 7)}),
            BatchScheduler::Admission::kAccepted);
  EXPECT_EQ(collect(*single, 1).at(0).ids, got[0].ids);
}

// The n choices of one prompt share one prefill (when they get rows together) and each still
// produces exactly what it produces alone.
TEST_F(BatchSchedulerTest, SiblingChoicesSharePrefillAndMatchTheirSoloRuns) {
  std::vector<int32_t> ids = prompt(
      "Shared prefill for the choices of one prompt, long enough "
      "to need more than one sixty-four token chunk of prefill work.");
  std::vector<ChoiceWork> three;
  for (int j = 0; j < 3; ++j) {
    ChoiceWork w = make_work(ids, 20, 0.8f, engine::choice_seed(11, 0, j));
    w.choice = j;
    w.prompt_top_logprobs = j == 0 ? 1 : -1;  // choice 0 also scores the prompt (chat's rule)
    three.push_back(w);
  }
  std::vector<ChoiceResult> alone;
  for (const ChoiceWork& w : three) {
    BatchScheduler solo(*model_, *tokenizer_, options(1));
    auto stream = std::make_shared<RequestStream>();
    ChoiceWork single = w;
    single.choice = 0;
    ASSERT_EQ(solo.submit(stream, {single}), BatchScheduler::Admission::kAccepted);
    alone.push_back(collect(*stream, 1).at(0));
  }
  for (int rows : {3, 2}) {
    BatchScheduler scheduler(*model_, *tokenizer_, options(rows));
    auto stream = std::make_shared<RequestStream>();
    ASSERT_EQ(scheduler.submit(stream, three), BatchScheduler::Admission::kAccepted);
    std::vector<ChoiceResult> got = collect(*stream, 3);
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(got[j].ids, alone[j].ids) << rows << " rows, choice " << j;
      EXPECT_EQ(got[j].logprobs, alone[j].logprobs) << rows << " rows, choice " << j;
    }
    EXPECT_EQ(got[0].prompt_scores.size(), ids.size() - 1);
    // Choices 1 and 2 follow each other (same scoring); choice 0 scores, so it prefills alone.
    // With 3 rows: 2 prefills; with 2 rows the third choice waits and prefills by itself.
    auto n = static_cast<int64_t>(ids.size());
    EXPECT_EQ(scheduler.snapshot().prefill_tokens, rows == 3 ? 2 * n : 3 * n) << rows << " rows";
  }
}

TEST_F(BatchSchedulerTest, QueueLimitCountsRequestsAndCancellationFreesRows) {
  engine::SchedulerOptions o = options(1);
  o.max_queue = 2;
  BatchScheduler scheduler(*model_, *tokenizer_, o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) {
    streams.push_back(std::make_shared<RequestStream>());
    ASSERT_EQ(scheduler.submit(streams.back(), {make_work(prompt("busy"), 400, 0.0f, 1)}),
              BatchScheduler::Admission::kAccepted);
    if (i == 0) {
      // Wait until the first request holds the only row, so the next two are waiting.
      while (scheduler.snapshot().running_rows == 0) streams[0]->wait(std::chrono::milliseconds(5));
    }
  }
  EXPECT_EQ(scheduler.snapshot().waiting_requests, 2);
  auto refused = std::make_shared<RequestStream>();
  EXPECT_EQ(scheduler.submit(refused, {make_work(prompt("no"), 4, 0.0f, 1)}),
            BatchScheduler::Admission::kQueueFull);
  for (auto& s : streams) s->cancel();
  scheduler.notify_cancelled();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!scheduler.idle() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  engine::SchedulerSnapshot s = scheduler.snapshot();
  EXPECT_EQ(s.running_rows, 0);
  EXPECT_EQ(s.waiting_requests, 0);
  EXPECT_FALSE(s.slots.at(0).busy);
  scheduler.close();
  EXPECT_EQ(scheduler.submit(refused, {make_work(prompt("no"), 4, 0.0f, 1)}),
            BatchScheduler::Admission::kClosed);
}

// Scoring a prompt (max_tokens 0 with echo) reports one entry per prompt token after the first,
// equal to the log-probabilities of an all-rows forward pass.
TEST_F(BatchSchedulerTest, PromptScoringMatchesTheForwardPass) {
  std::vector<int32_t> ids = prompt(
      "Score this prompt, token by token, across two prefill chunks "
      "of sixty-four tokens each, or nearly so, please.");
  ChoiceWork work = make_work(ids, 0, 0.0f, 1);
  work.generate = false;
  work.prompt_top_logprobs = 2;
  BatchScheduler scheduler(*model_, *tokenizer_, options(1));
  auto stream = std::make_shared<RequestStream>();
  ASSERT_EQ(scheduler.submit(stream, {work}), BatchScheduler::Admission::kAccepted);
  ChoiceResult got = collect(*stream, 1).at(0);
  EXPECT_TRUE(got.scored);
  ASSERT_EQ(got.prompt_scores.size(), ids.size() - 1);

  auto state = model_->new_sequence(kContext);
  std::vector<float> logits;
  model_->forward(*state, ids, LogitRows::kAll, logits);
  auto vocab = static_cast<std::size_t>(model_->vocab_size());
  for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
    std::span<const float> row(logits.data() + t * vocab, vocab);
    EXPECT_NEAR(got.prompt_scores[t].logprob, engine::logprob_of(row, ids[t + 1]), 1e-4) << t;
    EXPECT_EQ(got.prompt_scores[t].top.size(), 2u);
    EXPECT_GE(got.prompt_scores[t].rank, 1);
  }
}

// A failure inside one request (the fault hook) ends that request with an error; the other row
// finishes normally and the scheduler keeps serving.
TEST_F(BatchSchedulerTest, FaultInOneRequestLeavesTheOthers) {
  engine::SchedulerOptions o = options(2);
  o.test_hooks.fault_after_tokens = 5;
  BatchScheduler scheduler(*model_, *tokenizer_, o);
  auto failing = std::make_shared<RequestStream>();
  auto fine = std::make_shared<RequestStream>();
  ASSERT_EQ(scheduler.submit(failing, {make_work(prompt("fail"), 20, 0.0f, 1)}),
            BatchScheduler::Admission::kAccepted);
  ASSERT_EQ(scheduler.submit(fine, {make_work(prompt("ok"), 4, 0.0f, 1)}),
            BatchScheduler::Admission::kAccepted);
  ChoiceResult failed = collect(*failing, 1).at(0);
  EXPECT_NE(failed.error.find("fault injected"), std::string::npos) << failed.error;
  EXPECT_EQ(failed.ids.size(), 5u);
  ChoiceResult ok = collect(*fine, 1).at(0);
  EXPECT_TRUE(ok.error.empty());
  EXPECT_EQ(ok.ids.size(), 4u);
}

TEST_F(BatchSchedulerTest, TooLongPromptIsThatRequestsError) {
  BatchScheduler scheduler(*model_, *tokenizer_, options(1));
  auto stream = std::make_shared<RequestStream>();
  std::vector<int32_t> long_prompt(kContext, 5);
  ASSERT_EQ(scheduler.submit(stream, {make_work(long_prompt, 4, 0.0f, 1)}),
            BatchScheduler::Admission::kAccepted);
  EXPECT_NE(collect(*stream, 1).at(0).error.find("512"), std::string::npos);
}

// A long prompt entering beside a running stream: with a budget, the prefill between two decode
// steps stops at whole chunks once the budget is spent, so the running stream waits at most the
// budget plus one chunk; without one (a huge budget) it waits for the whole prompt. The clock is
// simulated (each prefilled token costs 1 ms), so the figures are exact. Outputs are the same
// either way: the budget moves no chunk boundary.
TEST_F(BatchSchedulerTest, APrefillBudgetBoundsTheStallOfRunningStreams) {
  const std::vector<int32_t> short_prompt = prompt("Hello there");
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 15; ++i) {
    const std::vector<int32_t> part = prompt(" a long prompt, chunk after chunk,");
    long_prompt.insert(long_prompt.end(), part.begin(), part.end());
  }
  ASSERT_GT(long_prompt.size(), 100u);
  struct Run {
    double worst_gap = 0;
    std::vector<ChoiceResult> results;
  };
  auto run = [&](double budget_ms) {
    std::atomic<BatchScheduler*> scheduler_seen{nullptr};
    engine::SchedulerOptions o = options(2);
    o.prefill_chunk = 4;
    o.prefill_budget_ms = budget_ms;
    o.clock = [&scheduler_seen] {
      BatchScheduler* s = scheduler_seen.load();
      const int64_t tokens = s == nullptr ? 0 : s->snapshot().prefill_tokens;
      return std::chrono::steady_clock::time_point{} + std::chrono::milliseconds(tokens);
    };
    BatchScheduler scheduler(*model_, *tokenizer_, o);
    scheduler_seen = &scheduler;
    auto running = std::make_shared<RequestStream>("running");
    EXPECT_EQ(scheduler.submit(running, {make_work(short_prompt, 120, 0.0f, 1)}),
              BatchScheduler::Admission::kAccepted);
    // Once it decodes, the long prompt arrives.
    while (scheduler.snapshot().decode_steps == 0) std::this_thread::yield();
    auto arriving = std::make_shared<RequestStream>("long");
    EXPECT_EQ(scheduler.submit(arriving, {make_work(long_prompt, 4, 0.0f, 2)}),
              BatchScheduler::Admission::kAccepted);
    Run out;
    out.results.push_back(collect(*arriving, 1).at(0));
    out.results.push_back(collect(*running, 1).at(0));
    out.worst_gap = scheduler.snapshot().worst_decode_gap_seconds;
    return out;
  };
  const Run budgeted = run(10);
  const Run unbounded = run(1e6);
  // Chunks of 4 tokens (4 ms) while elapsed + the last chunk fits in 10 ms: two per turn.
  EXPECT_DOUBLE_EQ(budgeted.worst_gap, 0.008);
  EXPECT_GE(unbounded.worst_gap, static_cast<double>(long_prompt.size()) / 1000 - 0.004);
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(budgeted.results[r].ids, unbounded.results[r].ids) << r;
    EXPECT_EQ(budgeted.results[r].logprobs, unbounded.results[r].logprobs) << r;
  }
}

// With a state-memory budget that fits one choice, a second choice waits in the queue (its row
// is assigned only after the first one ended) although a row is free; without a budget it runs
// at once. A choice that needs more than the whole budget is refused at submit.
TEST_F(BatchSchedulerTest, AStateMemoryBudgetMakesChoicesWaitForMemory) {
  const ChoiceWork work = make_work(prompt("Wait for memory"), 24, 0.0f, 1);
  auto times_of = [](RequestStream& stream) { return collect(stream, 1).at(0); };
  auto run_two = [&](std::size_t budget) {
    engine::SchedulerOptions o = options(2);
    o.state_memory_budget = budget;
    BatchScheduler scheduler(*model_, *tokenizer_, o);
    auto first = std::make_shared<RequestStream>("first");
    auto second = std::make_shared<RequestStream>("second");
    EXPECT_EQ(scheduler.submit(first, {work}), BatchScheduler::Admission::kAccepted);
    EXPECT_EQ(scheduler.submit(second, {work}), BatchScheduler::Admission::kAccepted);
    const ChoiceResult a = times_of(*first), b = times_of(*second);
    EXPECT_EQ(scheduler.snapshot().state_memory_reserved, 0u);
    return std::make_pair(a, b);
  };
  engine::SchedulerOptions probe = options(1);
  const std::size_t need =
      BatchScheduler(*model_, *tokenizer_, probe).state_memory_need(work).total();
  // The fixed state, and the positions in whole KV blocks.
  const std::size_t block = kernels::KvCache::kBlockPositions;
  const std::size_t blocks = (work.request.prompt.size() + 24 + block - 1) / block;
  EXPECT_EQ(need, model_->state_bytes_fixed() + model_->state_bytes_per_token() * block * blocks);
  const auto [a, b] = run_two(need);
  EXPECT_GE(b.assigned, a.finished);
  const auto [c, d] = run_two(0);
  EXPECT_LT(d.assigned, c.finished);

  engine::SchedulerOptions o = options(2);
  o.state_memory_budget = need - 1;
  BatchScheduler scheduler(*model_, *tokenizer_, o);
  EXPECT_EQ(scheduler.submit(std::make_shared<RequestStream>(), {work}),
            BatchScheduler::Admission::kTooLarge);
}

// The choices of one prompt that share its prefill reserve its whole KV blocks once: with a
// budget of one choice's need plus three times what each further choice adds, four choices run
// at once; one byte less and the fourth waits for memory. Their outputs do not depend on it.
TEST_F(BatchSchedulerTest, ChoicesSharingAPrefillReserveItsPromptBlocksOnce) {
  const std::vector<int32_t> ids = prompt(
      "The n choices of one prompt share the blocks of its key-value cache until they write, "
      "so the memory they reserve counts the prompt once and not four times over.");
  std::vector<ChoiceWork> works;
  for (int32_t j = 0; j < 4; ++j) {
    ChoiceWork w = make_work(ids, 24, 0.8f, engine::choice_seed(5, 0, j));
    w.choice = j;
    works.push_back(std::move(w));
  }
  engine::SchedulerOptions probe = options(1);
  const auto need = BatchScheduler(*model_, *tokenizer_, probe).state_memory_need(works[0]);
  const std::size_t block = kernels::KvCache::kBlockPositions;
  ASSERT_GE(ids.size(), 2 * block);
  EXPECT_EQ(need.prompt, model_->state_bytes_per_token() * block * (ids.size() / block));
  auto run = [&](std::size_t budget) {
    engine::SchedulerOptions o = options(4);
    o.state_memory_budget = budget;
    BatchScheduler scheduler(*model_, *tokenizer_, o);
    auto stream = std::make_shared<RequestStream>("n4");
    EXPECT_EQ(scheduler.submit(stream, works), BatchScheduler::Admission::kAccepted);
    std::vector<ChoiceResult> results = collect(*stream, 4);
    EXPECT_EQ(scheduler.snapshot().state_memory_reserved, 0u);
    return results;
  };
  auto first_end = [](const std::vector<ChoiceResult>& r) {
    return std::min_element(r.begin(), r.end(),
                            [](const auto& a, const auto& b) { return a.finished < b.finished; })
        ->finished;
  };
  const std::size_t together = need.total() + 3 * need.own;
  const std::vector<ChoiceResult> fits = run(together);
  for (const ChoiceResult& r : fits) EXPECT_LT(r.assigned, first_end(fits));
  const std::vector<ChoiceResult> short_of = run(together - 1);
  EXPECT_GE(short_of[3].assigned, first_end(short_of));
  for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(fits[j].ids, short_of[j].ids) << j;
}

// The leader of a shared prefill cancelled half-way: one of its followers prefills the prompt
// for the others (once, not once each), and their outputs are what they would have been.
TEST_F(BatchSchedulerTest, AFollowerTakesOverTheSharedPrefillOfACancelledLeader) {
  const std::vector<int32_t> ids = prompt(
      "A prompt prefilled slowly, by a leader that goes away before it is in, so that one of "
      "its followers has to take the prefill over.");
  std::vector<ChoiceWork> works;
  for (int32_t j = 0; j < 3; ++j) {
    ChoiceWork w = make_work(ids, 12, 0.8f, engine::choice_seed(9, 0, j));
    w.choice = j;
    works.push_back(std::move(w));
  }
  std::vector<ChoiceResult> expected;
  {
    BatchScheduler scheduler(*model_, *tokenizer_, options(3));
    auto stream = std::make_shared<RequestStream>();
    ASSERT_EQ(scheduler.submit(stream, works), BatchScheduler::Admission::kAccepted);
    expected = collect(*stream, 3);
  }
  engine::SchedulerOptions o = options(3);
  o.prefill_chunk = 4;
  o.test_hooks.prefill_delay_us_per_token = 20000;  // 0.8 s for the prompt
  BatchScheduler scheduler(*model_, *tokenizer_, o);
  auto stream = std::make_shared<RequestStream>();
  ASSERT_EQ(scheduler.submit(stream, works), BatchScheduler::Admission::kAccepted);
  // Choice 0 leads (it was admitted first); it is cancelled as soon as it has its row.
  const std::vector<ChoiceResult> got = collect(*stream, 3, 2, [&](const StreamEvent& e) {
    if (e.kind == StreamEvent::Kind::kRowAssigned && e.choice == 0) stream->cancel_choice(0);
  });
  ASSERT_NE(got[1].finished, engine::SteadyClock::time_point{});
  ASSERT_NE(got[2].finished, engine::SteadyClock::time_point{});
  EXPECT_TRUE(got[0].ids.empty());
  EXPECT_EQ(got[1].ids, expected[1].ids);
  EXPECT_EQ(got[2].ids, expected[2].ids);
  const engine::SchedulerSnapshot s = scheduler.snapshot();
  EXPECT_LT(s.prefill_tokens, 2 * static_cast<int64_t>(ids.size()));  // once each: >= 2 prompts
  EXPECT_GE(s.prefill_tokens, static_cast<int64_t>(ids.size()));
}

// Cloning a prefilled state (what a follower gets) takes no KV block; each clone's first decode
// step copies only the block its next position falls in, once per attention layer.
TEST_F(BatchSchedulerTest, ClonedStatesShareTheirPromptsKvBlocks) {
  const std::vector<int32_t> ids =
      prompt("A prompt whose length is not a multiple of the block size, written once and shared.");
  const int64_t block = kernels::KvCache::kBlockPositions;
  ASSERT_NE(static_cast<int64_t>(ids.size()) % block, 0);
  std::vector<float> logits;
  std::unique_ptr<SequenceState> state = model_->new_sequence(kContext);
  model_->forward(*state, ids, LogitRows::kLast, logits);
  const kernels::KvBlockPool& pool = kernels::KvBlockPool::shared();
  const std::size_t prefilled = pool.use().blocks;
  std::vector<std::unique_ptr<SequenceState>> clones;
  for (int i = 0; i < 7; ++i) clones.push_back(state->clone());
  EXPECT_EQ(pool.use().blocks, prefilled);
  const std::vector<int32_t> next = {ids[0]};
  for (auto& clone : clones) model_->forward(*clone, next, LogitRows::kLast, logits);
  const auto layers = static_cast<std::size_t>(model_->config().num_full_attention_layers());
  EXPECT_EQ(pool.use().blocks, prefilled + 7 * layers);
}

}  // namespace
}  // namespace md::test
