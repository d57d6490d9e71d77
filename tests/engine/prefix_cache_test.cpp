// The prefix cache's tree on a model double whose state is the list of tokens it holds: which
// checkpoint a prompt resumes from (deepest on its path, never beyond the limit, rewound only
// where the model allows), what each checkpoint is charged, and which one eviction takes.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/kv_cache.h"

namespace md::engine {
namespace {

constexpr int64_t kBlock = kernels::KvCache::kBlockPositions;
constexpr std::size_t kFixed = 1000;  // bytes per state
constexpr std::size_t kPerToken = 10;
constexpr std::size_t kBlockBytes = kPerToken * kBlock;

// A state that holds its tokens, and one KV block per kBlock of them: a copy shares the blocks,
// and a state made from another shares that one's whole blocks (as a row's state shares those of
// the state it resumed from).
class TokenState final : public SequenceState {
 public:
  explicit TokenState(std::vector<int32_t> held, const TokenState* base = nullptr)
      : SequenceState(1 << 20), tokens(std::move(held)) {
    position_ = static_cast<int64_t>(tokens.size());
    const std::size_t whole = base != nullptr ? base->tokens.size() / kBlock : 0;
    for (std::size_t b = 0; b < (tokens.size() + kBlock - 1) / kBlock; ++b) {
      blocks.push_back(b < whole ? base->blocks[b] : std::make_shared<int>(0));
    }
  }
  void reset() override {
    tokens.clear();
    blocks.clear();
    position_ = 0;
  }
  std::unique_ptr<SequenceState> clone() const override {
    return std::make_unique<TokenState>(*this);
  }
  std::size_t bytes() const override { return kFixed + kBlockBytes * blocks.size(); }
  void append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const override {
    for (const auto& block : blocks) out.emplace_back(block.get(), kBlockBytes);
  }
  void truncate(int64_t n) {
    tokens.resize(static_cast<std::size_t>(n));
    position_ = n;
  }
  std::vector<int32_t> tokens;
  std::vector<std::shared_ptr<int>> blocks;
};

class TokenModel final : public LanguageModel {
 public:
  TokenModel(bool invariant, bool rewinds) : invariant_(invariant), rewinds_(rewinds) {}
  std::string description() const override { return "token model"; }
  int64_t vocab_size() const override { return 100; }
  int64_t max_context() const override { return 1 << 20; }
  std::vector<int32_t> stop_token_ids() const override { return {}; }
  std::size_t state_bytes_per_token() const override { return kPerToken; }
  std::size_t state_bytes_fixed() const override { return kFixed; }
  std::unique_ptr<SequenceState> new_sequence(int64_t) const override {
    return std::make_unique<TokenState>(std::vector<int32_t>{});
  }
  void forward(SequenceState&, std::span<const int32_t>, LogitRows, std::vector<float>&) override {
    fail("not used");
  }
  bool split_invariant() const override { return invariant_; }
  bool can_rewind() const override { return rewinds_; }
  void rewind(SequenceState& state, int64_t position) const override {
    if (!rewinds_) fail("cannot rewind");
    dynamic_cast<TokenState&>(state).truncate(position);
  }

 private:
  bool invariant_, rewinds_;
};

std::vector<int32_t> seq(int32_t from, int32_t n) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}
std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
const std::vector<int32_t>& tokens_of(const PrefixCache::Hit& hit) {
  return dynamic_cast<const TokenState&>(*hit.state).tokens;
}
// The memory of a state of `tokens` that shares nothing.
std::size_t alone(int64_t tokens) {
  return kFixed + kBlockBytes * static_cast<std::size_t>((tokens + kBlock - 1) / kBlock);
}
void store(PrefixCache& cache, const std::vector<int32_t>& tokens) {
  ASSERT_TRUE(cache.insert(tokens, TokenState(tokens)));
}

TEST(PrefixCache, AnEmptyCacheMisses) {
  TokenModel model(true, true);
  PrefixCache cache(model, 1 << 20);
  PrefixCache::Hit hit = cache.lookup(seq(0, 10), 9);
  EXPECT_EQ(hit.state, nullptr);
  EXPECT_EQ(hit.tokens, 0);
  EXPECT_EQ(cache.stats().lookups, 1);
  EXPECT_EQ(cache.stats().hits, 0);
}

TEST(PrefixCache, ResumesFromTheDeepestCheckpointOnThePromptsPath) {
  TokenModel model(false, false);
  PrefixCache cache(model, 1 << 20);
  std::vector<int32_t> system = seq(0, 32);
  store(cache, seq(0, 16));
  store(cache, system);
  store(cache, concat(system, seq(500, 16)));  // another conversation past the system prompt
  std::vector<int32_t> prompt = concat(system, seq(900, 20));
  PrefixCache::Hit hit = cache.lookup(prompt, static_cast<int64_t>(prompt.size()) - 1);
  ASSERT_NE(hit.state, nullptr);
  EXPECT_EQ(hit.tokens, 32);
  EXPECT_EQ(tokens_of(hit), system);
  EXPECT_FALSE(hit.rewound);
  // Never beyond the limit: a shallower one serves.
  hit = cache.lookup(prompt, 31);
  EXPECT_EQ(hit.tokens, 16);
  EXPECT_EQ(tokens_of(hit), seq(0, 16));
  hit = cache.lookup(prompt, 15);
  EXPECT_EQ(hit.state, nullptr);
  // A prompt that parts before the first checkpoint misses.
  hit = cache.lookup(concat(seq(0, 10), seq(700, 30)), 39);
  EXPECT_EQ(hit.state, nullptr);
  PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.lookups, 4);
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.reused_tokens, 48);
  EXPECT_EQ(stats.checkpoints, 3);
}

TEST(PrefixCache, AStoredCopyIsIndependentOfTheRowAndOfEachHit) {
  TokenModel model(false, false);
  PrefixCache cache(model, 1 << 20);
  TokenState row(seq(0, 20));
  ASSERT_TRUE(cache.insert(row.tokens, row));
  EXPECT_FALSE(cache.insert(row.tokens, row)) << "stored twice";
  row.tokens.assign(20, 7);  // the row goes on writing
  PrefixCache::Hit first = cache.lookup(concat(seq(0, 20), {1}), 20);
  dynamic_cast<TokenState&>(*first.state).tokens.push_back(99);
  PrefixCache::Hit second = cache.lookup(concat(seq(0, 20), {1}), 20);
  EXPECT_EQ(tokens_of(second), seq(0, 20));
}

TEST(PrefixCache, SplitsARunWhereANewSequenceParts) {
  TokenModel model(false, false);
  PrefixCache cache(model, 1 << 20);
  store(cache, seq(0, 40));
  store(cache, concat(seq(0, 24), seq(300, 8)));  // parts inside the first run
  store(cache, seq(0, 24));                       // ends where they part
  store(cache, seq(0, 10));                       // ends inside the shared run
  EXPECT_EQ(cache.lookup(concat(seq(0, 40), {5}), 40).tokens, 40);
  EXPECT_EQ(cache.lookup(concat(seq(0, 24), seq(300, 9)), 32).tokens, 32);
  EXPECT_EQ(cache.lookup(concat(seq(0, 24), {-1}), 24).tokens, 24);
  EXPECT_EQ(cache.lookup(concat(seq(0, 12), {-1}), 12).tokens, 10);
  EXPECT_EQ(cache.lookup(seq(0, 11), 10).tokens, 10);
  EXPECT_EQ(cache.stats().checkpoints, 4);
}

TEST(PrefixCache, RewindsALongerStateOnlyWhereTheModelAllows) {
  std::vector<int32_t> turn = concat(seq(0, 30), seq(400, 25));   // a prompt and its answer
  std::vector<int32_t> other = concat(seq(0, 30), seq(800, 10));  // same system, other question
  for (bool rewinds : {true, false}) {
    TokenModel model(true, rewinds);
    PrefixCache cache(model, 1 << 20);
    store(cache, turn);
    PrefixCache::Hit hit = cache.lookup(other, static_cast<int64_t>(other.size()) - 1);
    if (rewinds) {
      ASSERT_NE(hit.state, nullptr);
      EXPECT_TRUE(hit.rewound);
      EXPECT_EQ(hit.tokens, 30);
      EXPECT_EQ(tokens_of(hit), seq(0, 30));
      // An identical prompt resumes from all but its last token.
      hit = cache.lookup(turn, static_cast<int64_t>(turn.size()) - 1);
      EXPECT_EQ(hit.tokens, static_cast<int64_t>(turn.size()) - 1);
    } else {
      EXPECT_EQ(hit.state, nullptr);
    }
  }
  // A model that can rewind but is not split invariant is never rewound: resuming from a
  // position a cold prefill does not stop at would change its bits.
  TokenModel model(false, true);
  PrefixCache cache(model, 1 << 20);
  store(cache, turn);
  EXPECT_EQ(cache.lookup(other, static_cast<int64_t>(other.size()) - 1).state, nullptr);
}

TEST(PrefixCache, AnExactCheckpointIsPreferredToARewoundOneOfTheSameDepth) {
  TokenModel model(true, true);
  PrefixCache cache(model, 1 << 20);
  store(cache, seq(0, 40));
  store(cache, seq(0, 20));
  PrefixCache::Hit hit = cache.lookup(concat(seq(0, 20), {-5}), 20);
  EXPECT_EQ(hit.tokens, 20);
  EXPECT_FALSE(hit.rewound);
}

TEST(PrefixCache, CountsEachSharedBlockOnce) {
  TokenModel model(false, false);
  PrefixCache cache(model, 1 << 20);
  TokenState first(seq(0, 32));
  ASSERT_TRUE(cache.insert(first.tokens, first));
  EXPECT_EQ(cache.stats().bytes, alone(32));
  // Resumed from the first and gone on: its first two blocks are the first's.
  TokenState longer(seq(0, 64), &first);
  ASSERT_TRUE(cache.insert(longer.tokens, longer));
  EXPECT_EQ(cache.stats().bytes, alone(32) + kFixed + 2 * kBlockBytes);
  // The same tokens prefilled apart share nothing.
  TokenState apart(concat(seq(0, 32), {-1}));
  ASSERT_TRUE(cache.insert(apart.tokens, apart));
  EXPECT_EQ(cache.stats().bytes, alone(32) + kFixed + 2 * kBlockBytes + alone(33));
}

TEST(PrefixCache, EvictsTheLeastRecentlyUsedUntilTheBudgetHolds) {
  TokenModel model(false, false);
  PrefixCache cache(model, 3 * alone(16));
  TokenState a(seq(0, 16));
  ASSERT_TRUE(cache.insert(a.tokens, a));
  TokenState b(concat(seq(0, 16), seq(100, 16)), &a);  // shares a's block
  ASSERT_TRUE(cache.insert(b.tokens, b));
  store(cache, seq(200, 16));
  EXPECT_EQ(cache.stats().bytes, 3 * kFixed + 3 * kBlockBytes);
  EXPECT_EQ(cache.stats().evicted, 0);
  cache.lookup(concat(seq(200, 16), {1}), 16);  // the third is used again
  store(cache, seq(300, 16));
  // Over the budget: `a` goes first (its block stays, b holds it), then `b`.
  PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.evicted, 2);
  EXPECT_EQ(stats.bytes, 2 * alone(16));
  EXPECT_EQ(cache.lookup(concat(seq(0, 16), seq(100, 17)), 32).state, nullptr);
  EXPECT_EQ(cache.lookup(concat(seq(200, 16), {1}), 16).tokens, 16);
  EXPECT_EQ(cache.lookup(concat(seq(300, 16), {1}), 16).tokens, 16);
  EXPECT_EQ(cache.stats().checkpoints, 2);
}

TEST(PrefixCache, AStateLargerThanTheBudgetIsRefusedAndEvictsNothing) {
  TokenModel model(false, false);
  PrefixCache cache(model, alone(16) + alone(32));
  store(cache, seq(500, 16));
  EXPECT_FALSE(cache.insert(seq(0, 250), TokenState(seq(0, 250))));
  PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.checkpoints, 1);
  EXPECT_EQ(stats.evicted, 0);
  EXPECT_EQ(stats.bytes, alone(16));
  EXPECT_EQ(cache.lookup(seq(0, 20), 19).state, nullptr);
  store(cache, seq(0, 32));
  EXPECT_EQ(cache.lookup(concat(seq(0, 32), {1}), 32).tokens, 32);
}

// A state whose blocks are mostly shared with kept ones but which would not fit even alone (its
// own part and all its blocks) is refused before anything is evicted for it: evicting the
// states it shares blocks with would free none of them.
TEST(PrefixCache, AStateThatWouldNotFitAloneIsRefusedEvenIfItAddsLittle) {
  TokenModel model(false, false);
  PrefixCache cache(model, alone(64) + kFixed + kBlockBytes);
  TokenState conversation(seq(0, 64));
  ASSERT_TRUE(cache.insert(conversation.tokens, conversation));
  store(cache, seq(900, 1));
  TokenState longer(seq(0, 200), &conversation);  // 13 blocks, 9 of them new
  EXPECT_FALSE(cache.insert(longer.tokens, longer));
  PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.evicted, 0);
  EXPECT_EQ(stats.checkpoints, 2);
  EXPECT_EQ(cache.lookup(seq(0, 90), 89).tokens, 64);
}

// Emptied branches fold away: after every state but one is gone, lookups still find it and
// nothing else.
TEST(PrefixCache, DroppedBranchesLeaveTheTreeConsistent) {
  TokenModel model(false, false);
  PrefixCache cache(model, 4 * alone(20));
  store(cache, seq(0, 20));
  store(cache, concat(seq(0, 10), seq(50, 10)));                     // parts at 10
  store(cache, concat(seq(0, 5), seq(80, 15)));                      // parts at 5
  store(cache, concat(seq(0, 10), seq(60, 10)));                     // parts at 10 too
  for (int i = 0; i < 3; ++i) store(cache, seq(200 + 100 * i, 20));  // evicts the first three
  EXPECT_EQ(cache.stats().evicted, 3);
  EXPECT_EQ(cache.lookup(concat(seq(0, 10), seq(60, 11)), 20).tokens, 20);
  EXPECT_EQ(cache.lookup(concat(seq(0, 10), seq(50, 11)), 20).state, nullptr);
  EXPECT_EQ(cache.lookup(seq(0, 21), 20).state, nullptr);
  EXPECT_EQ(cache.lookup(concat(seq(0, 5), seq(80, 16)), 20).state, nullptr);
  store(cache, concat(seq(0, 10), seq(50, 10)));
  EXPECT_EQ(cache.lookup(concat(seq(0, 10), seq(50, 11)), 20).tokens, 20);
  EXPECT_EQ(cache.lookup(concat(seq(0, 10), seq(60, 11)), 20).tokens, 20);
}

TEST(PrefixCache, AZeroBudgetStoresNothing) {
  TokenModel model(true, true);
  PrefixCache cache(model, 0);
  EXPECT_FALSE(cache.insert(seq(0, 4), TokenState(seq(0, 4))));
  EXPECT_EQ(cache.lookup(seq(0, 5), 4).state, nullptr);
}

}  // namespace
}  // namespace md::engine
