// The scheduler with a prefix cache on each family's fixture: a prompt resumed from an earlier
// request's state gives bitwise the tokens and log-probabilities a cold scheduler gives (greedy
// and seeded), a second chat turn resumes from the first exactly as far as the family allows
// (cached_tokens), eviction keeps the budget, and rows sharing a system prompt resume from it.
// The families cover the three cases of the cache: attention only (Llama: any position, rewound),
// a hybrid with the recurrent delta rule (any position a state was taken at) and the hybrid as
// it runs by default, with the chunked delta rule (prefill-chunk boundaries only).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "../../qwen38/qwen38_test_util.h"
#include "engine/batch_scheduler.h"
#include "engine/prefix_cache.h"
#include "models/llama/llama_gguf_model.h"
#include "scheduler_test_util.h"
#include "text/tokenizer.h"

namespace md::test {
namespace {

constexpr int64_t kContext = 256;  // the tiny Llama's longest
constexpr int64_t kChunk = 16;

struct Family {
  std::string name;
  std::function<std::unique_ptr<LanguageModel>()> load;
  std::string tokenizer_dir;
};

std::vector<Family> families() {
  const std::string qwen = qwen38_fixture_dir("tiny-qwen38-hd256");
  const std::string llama = std::string(MD_GOLDEN_DIR) + "/llama_hf/tiny-llama";
  auto qwen38 = [](const std::string& fixture, bool chunked) {
    return [fixture, chunked]() -> std::unique_ptr<LanguageModel> {
      Qwen38Options options;
      options.chunked_delta_rule = chunked;
      return load_fixture(fixture, KvCacheType::kBf16, options);
    };
  };
  return {
      {"llama",
       [llama]() -> std::unique_ptr<LanguageModel> {
         ModelRunOptions run;
         run.threads = 2;
         return std::make_unique<LlamaGgufModel>(llama, run);
       },
       llama},
      {"qwen38_recurrent", qwen38("tiny-qwen38-hd256", false), qwen},
      {"qwen38_chunked", qwen38("tiny-qwen38-hd256", true), qwen},
      // Routed experts: the same resumption rules over the MoE layers' step.
      {"qwen35_moe_chunked", qwen38("tiny-qwen35-moe", true),
       qwen38_fixture_dir("tiny-qwen35-moe")},
  };
}

void PrintTo(const Family& family, std::ostream* out) {
  *out << family.name;
}

class PrefixCacheScheduler : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    model_ = GetParam().load();
    tokenizer_ = load_tokenizer(GetParam().tokenizer_dir);
    system_ = encode(
        "You are a careful assistant. Answer briefly, cite nothing, and keep every answer to "
        "one short paragraph unless the user asks for more detail than that.");
  }
  // A state at every chunk boundary unless `interval` says otherwise.
  engine::SchedulerOptions options(int rows, std::size_t cache_bytes,
                                   int64_t interval = kChunk) const {
    engine::SchedulerOptions o;
    o.rows = rows;
    o.context = kContext;
    o.prefill_chunk = kChunk;
    o.prefix_cache_memory = cache_bytes;
    o.prefix_cache_interval = interval;
    return o;
  }
  std::vector<int32_t> encode(const std::string& text) const { return tokenizer_->encode(text); }
  std::vector<int32_t> with_system(const std::string& text) const {
    std::vector<int32_t> ids = system_;
    std::vector<int32_t> rest = encode(text);
    ids.insert(ids.end(), rest.begin(), rest.end());
    return ids;
  }
  // One request at a time through `scheduler`.
  std::vector<ChoiceResult> run_each(BatchScheduler& scheduler,
                                     const std::vector<ChoiceWork>& works) const {
    std::vector<ChoiceResult> results;
    for (const ChoiceWork& work : works) {
      auto stream = std::make_shared<RequestStream>();
      EXPECT_EQ(scheduler.submit(stream, {work}), BatchScheduler::Admission::kAccepted);
      results.push_back(collect(*stream, 1).at(0));
    }
    return results;
  }
  std::vector<ChoiceResult> cold(const std::vector<ChoiceWork>& works) const {
    BatchScheduler scheduler(*model_, *tokenizer_, options(1, 0));
    return run_each(scheduler, works);
  }
  // The deepest position a resumed prompt of the chunked hybrid can start from.
  static int64_t chunk_floor(int64_t tokens) { return tokens / kChunk * kChunk; }
  bool chunked() const { return GetParam().name.ends_with("_chunked"); }

  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> system_;
};

void expect_same_bits(const std::vector<ChoiceResult>& got,
                      const std::vector<ChoiceResult>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].error.empty()) << got[i].error;
    EXPECT_EQ(got[i].ids, expected[i].ids) << "request " << i;
    ASSERT_EQ(got[i].logprobs.size(), expected[i].logprobs.size()) << "request " << i;
    EXPECT_EQ(0, std::memcmp(got[i].logprobs.data(), expected[i].logprobs.data(),
                             got[i].logprobs.size() * sizeof(float)))
        << "request " << i;
  }
}

TEST_P(PrefixCacheScheduler, AWarmPromptGivesTheBitsOfAColdOne) {
  std::vector<ChoiceWork> works;
  const char* questions[] = {" What is a prefix?", " Name three rivers.", " Count to five."};
  for (int i = 0; i < 3; ++i) {
    works.push_back(make_work(with_system(questions[i]), 12, 0.0f, 1));
    works.push_back(make_work(with_system(questions[i]), 12, 0.9f, 40 + i));
  }
  works.push_back(works[0]);  // the same prompt again
  std::vector<ChoiceResult> expected = cold(works);

  BatchScheduler warm(*model_, *tokenizer_, options(1, 64 << 20));
  std::vector<ChoiceResult> got = run_each(warm, works);
  expect_same_bits(got, expected);

  EXPECT_EQ(got[0].cached, 0);
  const auto shared = static_cast<int64_t>(system_.size());
  for (std::size_t i = 1; i < works.size(); ++i) {
    const auto prompt = static_cast<int64_t>(works[i].request.prompt.size());
    EXPECT_LE(got[i].cached, prompt - 1) << i;
    if (chunked()) {
      EXPECT_EQ(got[i].cached % kChunk, 0) << i;
      EXPECT_GE(got[i].cached, chunk_floor(shared)) << i;
    } else {
      EXPECT_GE(got[i].cached, GetParam().name == "llama" ? shared : chunk_floor(shared)) << i;
    }
  }
  // The repeat: all but its last token where a finished turn's state can be rewound; else the
  // end of the prompt (taken when the first request's prefill ended) when that is a chunk
  // boundary or the model is split invariant, and the last boundary before it otherwise.
  const auto repeat = static_cast<int64_t>(works.back().request.prompt.size());
  if (GetParam().name == "llama") {
    EXPECT_EQ(got.back().cached, repeat - 1);
  }
  if (chunked()) {
    EXPECT_EQ(got.back().cached, chunk_floor(repeat - 1));
  }

  engine::SchedulerSnapshot snapshot = warm.snapshot();
  ASSERT_TRUE(snapshot.prefix_cache.has_value());
  EXPECT_EQ(snapshot.prefix_cache->lookups, static_cast<int64_t>(works.size()));
  EXPECT_EQ(snapshot.prefix_cache->hits, static_cast<int64_t>(works.size()) - 1);
  int64_t reused = 0;
  for (const ChoiceResult& r : got) reused += r.cached;
  EXPECT_EQ(snapshot.prefix_cache->reused_tokens, reused);
  int64_t prompts = 0;
  for (const ChoiceWork& w : works) prompts += static_cast<int64_t>(w.request.prompt.size());
  EXPECT_EQ(snapshot.prefill_tokens, prompts - reused);
}

TEST_P(PrefixCacheScheduler, ASecondTurnResumesFromTheFirst) {
  ChoiceWork first = make_work(with_system(" Tell me about rivers."), 12, 0.0f, 3);
  BatchScheduler warm(*model_, *tokenizer_, options(1, 64 << 20));
  ChoiceResult answer = run_each(warm, {first}).at(0);
  ASSERT_EQ(answer.ids.size(), 12u);
  // The next turn: the first prompt, the answer, a new message.
  std::vector<int32_t> next = first.request.prompt;
  next.insert(next.end(), answer.ids.begin(), answer.ids.end());
  std::vector<int32_t> message = encode(" And lakes?");
  next.insert(next.end(), message.begin(), message.end());
  ChoiceWork second = make_work(next, 10, 0.7f, 9);

  ChoiceResult got = run_each(warm, {second}).at(0);
  expect_same_bits({got}, cold({second}));
  const auto first_prompt = static_cast<int64_t>(first.request.prompt.size());
  // Every token the first turn fed (the answer's last token never was) for a split-invariant
  // model; the last chunk boundary of the first prompt for the chunked hybrid.
  const int64_t expected = chunked() ? chunk_floor(first_prompt)
                                     : first_prompt + static_cast<int64_t>(answer.ids.size()) - 1;
  EXPECT_EQ(got.cached, expected);
}

// With the default interval (longer than the prompt) a repeated prompt still runs one chunk at
// most: the state before the last chunk is kept where a longer one cannot be rewound.
TEST_P(PrefixCacheScheduler, ARepeatedPromptRunsOneChunkAtMost) {
  ChoiceWork work = make_work(with_system(" Once more, please."), 8, 0.6f, 5);
  const auto length = static_cast<int64_t>(work.request.prompt.size());
  ASSERT_GT(length, 3 * kChunk);
  BatchScheduler warm(*model_, *tokenizer_, options(1, 64 << 20, 256));
  std::vector<ChoiceResult> got = run_each(warm, {work, work});
  expect_same_bits(got, cold({work, work}));
  EXPECT_EQ(got[0].cached, 0);
  EXPECT_EQ(got[1].cached, GetParam().name == "llama" ? length - 1 : chunk_floor(length - 1));
}

// The choices of one prompt: resumed together (one row leads, the others take its state when
// the prompt is in) or one after the other (each resumes where it can), always with the bits of
// a cold scheduler, each choice reporting what its own prefill skipped.
TEST_P(PrefixCacheScheduler, ChoicesOfOnePromptResumeTogetherOrApart) {
  ChoiceWork first = make_work(with_system(" Pick a colour."), 6, 0.0f, 1);
  std::vector<ChoiceWork> three;
  for (int j = 0; j < 3; ++j) {
    ChoiceWork w = make_work(with_system(" Pick a number."), 6, 1.0f, engine::choice_seed(4, 0, j));
    w.choice = j;
    three.push_back(w);
  }
  std::vector<ChoiceResult> expected;
  {
    BatchScheduler scheduler(*model_, *tokenizer_, options(3, 0));
    auto stream = std::make_shared<RequestStream>();
    ASSERT_EQ(scheduler.submit(stream, three), BatchScheduler::Admission::kAccepted);
    expected = collect(*stream, 3);
  }
  const int64_t shared = chunk_floor(static_cast<int64_t>(system_.size()));
  for (int rows : {3, 1}) {
    BatchScheduler warm(*model_, *tokenizer_, options(rows, 64 << 20));
    run_each(warm, {first});
    auto stream = std::make_shared<RequestStream>();
    ASSERT_EQ(warm.submit(stream, three), BatchScheduler::Admission::kAccepted);
    std::vector<ChoiceResult> got = collect(*stream, 3);
    expect_same_bits(got, expected);
    for (int j = 0; j < 3; ++j) EXPECT_GE(got[j].cached, shared) << rows << " rows, choice " << j;
    if (rows == 3) {
      EXPECT_EQ(got[1].cached, got[0].cached);
      EXPECT_EQ(got[2].cached, got[0].cached);
    } else {
      // Admitted apart: the later ones find the first one's prompt kept, as far as the model
      // can resume (all but its last token where a state can be rewound).
      const auto length = static_cast<int64_t>(three[0].request.prompt.size());
      const int64_t again = GetParam().name == "llama" ? length - 1 : chunk_floor(length - 1);
      EXPECT_EQ(got[1].cached, again);
      EXPECT_EQ(got[2].cached, again);
    }
  }
}

TEST_P(PrefixCacheScheduler, EvictionKeepsTheBudgetAndTheBits) {
  std::vector<ChoiceWork> works;
  const char* texts[] = {"Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu",
                         "One two three four five six seven eight nine ten eleven twelve",
                         "Red orange yellow green blue indigo violet and then black and white",
                         "Monday Tuesday Wednesday Thursday Friday Saturday Sunday again"};
  for (int i = 0; i < 4; ++i) works.push_back(make_work(encode(texts[i]), 6, 0.8f, 70 + i));
  for (int i = 0; i < 4; ++i) works.push_back(works[static_cast<std::size_t>(i)]);
  // Room for about one prompt's states.
  const std::size_t budget = model_->state_bytes_fixed() * 2 + model_->state_bytes_per_token() * 48;
  BatchScheduler warm(*model_, *tokenizer_, options(1, budget));
  std::vector<ChoiceResult> got = run_each(warm, works);
  expect_same_bits(got, cold(works));
  engine::PrefixCacheStats stats = *warm.snapshot().prefix_cache;
  EXPECT_LE(stats.bytes, budget);
  EXPECT_GT(stats.evicted, 0);
  EXPECT_GT(stats.stored, stats.checkpoints);
}

TEST_P(PrefixCacheScheduler, RowsSharingASystemPromptResumeFromIt) {
  std::vector<ChoiceWork> works;
  for (int i = 0; i < 12; ++i) {
    works.push_back(make_work(with_system(" Question number " + std::to_string(i) + "?"), 6,
                              i % 2 == 0 ? 0.0f : 1.0f, 100 + i));
  }
  std::vector<ChoiceResult> expected = cold(works);
  BatchScheduler warm(*model_, *tokenizer_, options(4, 64 << 20));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const ChoiceWork& w : works) {
    streams.push_back(std::make_shared<RequestStream>());
    ASSERT_EQ(warm.submit(streams.back(), {w}), BatchScheduler::Admission::kAccepted);
  }
  std::vector<ChoiceResult> got;
  for (auto& stream : streams) got.push_back(collect(*stream, 1).at(0));
  expect_same_bits(got, expected);
  // The first four start together, cold; every later one finds the system prompt stored.
  int64_t hits = 0;
  for (std::size_t i = 4; i < got.size(); ++i) {
    hits += got[i].cached >= chunk_floor(static_cast<int64_t>(system_.size())) ? 1 : 0;
  }
  EXPECT_EQ(hits, 8);
}

// Why the chunked hybrid resumes only at chunk boundaries: its prefill's bits depend on where
// the chunks fall, so a prompt resumed from the end of an earlier prompt (off the grid) would not
// be what a cold prefill gives. The negative control of the rule above.
TEST(PrefixCacheChunkedHybrid, OffTheChunkGridItsBitsDiffer) {
  std::unique_ptr<LanguageModel> model = load_fixture("tiny-qwen38-hd256", KvCacheType::kBf16);
  ASSERT_FALSE(model->split_invariant());
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 60; ++i) ids.push_back(7 + (i * 37) % 200);
  auto run = [&](int64_t first_split) {
    std::unique_ptr<SequenceState> state = model->new_sequence(kContext);
    std::vector<float> logits;
    std::span<const int32_t> all(ids);
    for (int64_t at = 0; at < static_cast<int64_t>(ids.size());) {
      const int64_t end =
          std::min<int64_t>(static_cast<int64_t>(ids.size()), at == 0 ? first_split : at + kChunk);
      model->forward(*state,
                     all.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(end - at)),
                     LogitRows::kLast, logits);
      at = end;
    }
    return logits;
  };
  std::vector<float> on_grid = run(kChunk);
  std::vector<float> again = run(kChunk);
  std::vector<float> off_grid = run(kChunk + 5);
  ASSERT_EQ(on_grid.size(), off_grid.size());
  EXPECT_EQ(0, std::memcmp(on_grid.data(), again.data(), on_grid.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(on_grid.data(), off_grid.data(), on_grid.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Families, PrefixCacheScheduler, ::testing::ValuesIn(families()),
                         [](const ::testing::TestParamInfo<Family>& family) {
                           return family.param.name;
                         });

}  // namespace
}  // namespace md::test
