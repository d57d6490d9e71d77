// The step stream of MPI ranks (models/rank_stream.h), run here over in-process ranks so that
// it needs no mpirun: rank 0 drives a RankStreamModel, rank 1 follows on its own thread. Every
// call the engine makes — new sequences, prompts, decode steps of several sequences, clones,
// resets, rewinds, drops — gives bitwise what TensorParallelModel over the same two ranks gives
// (the same shards, the same collectives in the same order); a request rank 0 refuses never
// reaches rank 1, and the stream goes on after it; a rank whose shard differs is named at
// start-up. (tests/dist/mpi_model_test.py runs the same stream under mpirun.)
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "dist/in_process_group.h"
#include "models/llama/llama_gguf_model.h"
#include "models/rank_stream.h"
#include "models/tensor_parallel_model.h"

namespace md {
namespace {

namespace fs = std::filesystem;

std::string tiny_llama() {
  return (fs::path(MD_GOLDEN_DIR) / "llama_hf" / "tiny-llama").string();
}

ModelRunOptions options_for(dist::Communicator* ranks) {
  ModelRunOptions options;
  options.threads = 1;
  options.prefill_rows = 16;
  options.ranks = ranks;
  return options;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> prompt(int length, int seed) {
  std::vector<int32_t> ids;
  for (int i = 0; i < length; ++i) ids.push_back((seed * 7919 + i * 104729 + 11) % 512);
  return ids;
}

// A session of engine calls; every call's logits appended to `log`.
void exercise(LanguageModel& model, std::vector<float>& log) {
  std::vector<float> logits;
  auto record = [&] { log.insert(log.end(), logits.begin(), logits.end()); };
  auto a = model.new_sequence(64);
  auto b = model.new_sequence(64);
  model.forward(*a, prompt(19, 1), LogitRows::kAll, logits);
  record();
  model.forward(*b, prompt(5, 2), LogitRows::kLast, logits);
  record();
  for (int step = 0; step < 4; ++step) {
    SequenceState* both[] = {a.get(), b.get()};
    model.decode(both, std::vector<int32_t>{step + 3, step + 40}, logits);
    record();
  }
  // A clone goes on apart from its source; a rewound sequence recomputes what it forgot.
  std::unique_ptr<SequenceState> c = a->clone();
  SequenceState* one[] = {c.get()};
  model.decode(one, std::vector<int32_t>{77}, logits);
  record();
  model.rewind(*a, 10);
  model.forward(*a, prompt(3, 5), LogitRows::kAll, logits);
  record();
  b->reset();
  model.forward(*b, prompt(6, 3), LogitRows::kLast, logits);
  record();
  c.reset();  // dropped
  auto d = model.new_sequence(32);
  model.forward(*d, prompt(4, 4), LogitRows::kLast, logits);
  record();
  EXPECT_EQ(a->position(), 13);
  EXPECT_EQ(b->position(), 6);
}

class RankStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(tiny_llama())) {
      GTEST_SKIP() << tiny_llama() << " is absent";
    }
  }
};

TEST_F(RankStreamTest, FollowersMakeEveryCallAsInProcessRanksDo) {
  std::vector<float> expected;
  {
    TensorParallelModel tp(2, options_for(nullptr), [](const ModelRunOptions& o) {
      return std::make_unique<LlamaGgufModel>(tiny_llama(), o);
    });
    exercise(tp, expected);
  }
  dist::InProcessGroup group(2);
  std::string follower_error;
  std::thread follower([&] {
    try {
      LlamaGgufModel shard(tiny_llama(), options_for(&group.rank(1)));
      follow_rank_stream(shard, group.rank(1));
    } catch (const std::exception& e) {
      follower_error = e.what();
    }
  });
  std::vector<float> got;
  {
    RankStreamModel stream(
        std::make_unique<LlamaGgufModel>(tiny_llama(), options_for(&group.rank(0))), group.rank(0));
    exercise(stream, got);
    // Refused on rank 0 before anything is announced; the stream goes on.
    auto s = stream.new_sequence(8);
    std::vector<float> logits;
    EXPECT_THROW(stream.forward(*s, std::vector<int32_t>{1, 600}, LogitRows::kLast, logits), Error);
    EXPECT_THROW(stream.forward(*s, prompt(9, 1), LogitRows::kLast, logits), Error);
    EXPECT_THROW(stream.new_sequence(100000), Error);
    stream.forward(*s, prompt(3, 9), LogitRows::kLast, logits);
    EXPECT_EQ(s->position(), 3);
  }  // announces the end: the follower returns
  follower.join();
  EXPECT_EQ(follower_error, "");
  EXPECT_TRUE(bitwise_equal(got, expected));
  EXPECT_GT(got.size(), 10u * 512u);
}

TEST_F(RankStreamTest, RanksThatDifferAreNamedAtStartUp) {
  dist::InProcessGroup group(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      try {
        check_same_everywhere(group.rank(r), r == 2 ? "model b" : "model a");
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& e : errors) {
    EXPECT_EQ(e,
              "rank 2 differs from rank 0 (a different binary, model or options): rank 0 has "
              "[model a], rank 2 has [model b]");
  }
  dist::InProcessGroup same(2);
  std::thread other([&] { check_same_everywhere(same.rank(1), "x"); });
  EXPECT_NO_THROW(check_same_everywhere(same.rank(0), "x"));
  other.join();
}

}  // namespace
}  // namespace md
