#include "text/grammar/token_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "base/error.h"
#include "text/grammar/gbnf_parser.h"

namespace md::grammar {
namespace {

// A small vocabulary with shared prefixes, duplicates, multi-byte and split UTF-8 tokens, an empty
// (special) token and an end token.
std::vector<std::string> vocabulary() {
  return {"",  "a",  "ab",   "abc",  "b",        "\"", "\"a", "a\"", "1",    "12",
          "x", "ab", "\xC3", "\xA9", "\xC3\xA9", " ",  "{",   "}",   "</s>", "\xE4\xB8"};
}
constexpr int32_t kEnd = 18;

bool bit(const TokenMask& mask, std::size_t id) {
  return (mask[id / 64] >> (id % 64) & 1) != 0;
}

// Brute force: a token is allowed when the automaton survives its bytes.
std::vector<bool> brute_force(GrammarAutomaton& automaton, GrammarAutomaton::State state,
                              const std::vector<std::string>& vocab) {
  std::vector<bool> allowed(vocab.size(), false);
  for (std::size_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty() || static_cast<int32_t>(id) == kEnd) continue;
    allowed[id] = automaton.step(state, vocab[id]) != GrammarAutomaton::kDead;
  }
  allowed[kEnd] = automaton.accepting(state);
  return allowed;
}

TEST(TokenTrie, DepthFirstLayoutWithDuplicates) {
  std::vector<std::string> vocab = vocabulary();
  vocab[kEnd] = "";
  TokenTrie trie(vocab);
  std::size_t tokens = 0;
  for (const auto& e : trie.entries()) tokens += e.tokens_end - e.tokens_begin;
  EXPECT_EQ(tokens, vocab.size() - 2);  // every non-empty token once ("ab" twice: ids 2, 11)
  EXPECT_EQ(trie.max_depth(), 3u);
  for (std::size_t i = 0; i < trie.entries().size(); ++i) {
    EXPECT_GT(trie.entries()[i].skip, i);
    EXPECT_LE(trie.entries()[i].skip, trie.entries().size());
  }
}

TEST(TokenConstraint, MaskEqualsBruteForceAlongRandomWalks) {
  std::string gbnf = R"(root ::= "{" " "? (pair (" "? pair)*)? "}"
pair ::= "\"" [a-c\u00e9\u4e2d]* "\"" | [0-9]+)";
  std::vector<std::string> vocab = vocabulary();
  vocab[kEnd] = "</s>";  // its bytes never match: it is allowed only as the end token
  std::vector<std::string> trie_vocab = vocab;
  trie_vocab[kEnd] = "";
  auto trie = std::make_shared<TokenTrie>(trie_vocab);
  auto constraint = std::make_shared<TokenConstraint>(parse_gbnf(gbnf), trie, std::vector{kEnd});
  GrammarAutomaton reference(parse_gbnf(gbnf));
  std::mt19937 rng(7);
  int compared = 0;
  for (int walk = 0; walk < 200; ++walk) {
    auto state = constraint->start();
    auto ref_state = reference.start();
    for (int step = 0; step < 12; ++step) {
      TokenMask mask = *constraint->allowed(state);
      std::vector<bool> expected = brute_force(reference, ref_state, vocab);
      std::vector<int32_t> allowed;
      for (std::size_t id = 0; id < vocab.size(); ++id) {
        ASSERT_EQ(bit(mask, id), expected[id]) << "token " << id << " at walk " << walk;
        if (expected[id]) allowed.push_back(static_cast<int32_t>(id));
      }
      ++compared;
      if (allowed.empty()) break;
      int32_t token = allowed[rng() % allowed.size()];
      if (token == kEnd) break;
      state = constraint->advance(state, token);
      ref_state = reference.step(ref_state, vocab[static_cast<std::size_t>(token)]);
      ASSERT_NE(state, GrammarAutomaton::kDead);
    }
  }
  EXPECT_GT(compared, 1000);
  MaskStats stats = constraint->stats();
  EXPECT_LT(stats.computed, stats.masks);  // states repeat: the cache answers most
}

TEST(TokenConstraint, MatcherMasksLogitsAndFinishes) {
  std::vector<std::string> vocab = vocabulary();
  vocab[kEnd] = "";
  auto trie = std::make_shared<TokenTrie>(vocab);
  auto constraint = std::make_shared<TokenConstraint>(parse_gbnf(R"(root ::= "ab" "c"?)"), trie,
                                                      std::vector{kEnd});
  TokenMatcher matcher(constraint);
  std::vector<float> logits(vocab.size() + 3, 1.0f);  // the model's vocabulary may be padded
  ASSERT_TRUE(matcher.mask_logits(logits));
  for (std::size_t id = 0; id < logits.size(); ++id) {
    bool allowed = id == 1 || id == 2 || id == 3 || id == 11;  // a, ab, abc, ab
    EXPECT_EQ(std::isfinite(logits[id]), allowed) << id;
  }
  // Logits shorter than the vocabulary (a model scoring fewer ids than its tokenizer knows): only
  // ids it scores count, so a grammar whose only allowed tokens lie beyond them allows nothing.
  TokenMatcher short_matcher(constraint);
  std::vector<float> few(1, 1.0f);  // id 0 only: "" (never allowed)
  EXPECT_FALSE(short_matcher.mask_logits(few));
  EXPECT_FALSE(matcher.accept(4));  // "b" first is not allowed, and the state is unchanged
  ASSERT_TRUE(matcher.accept(2));   // "ab"
  EXPECT_TRUE(matcher.accepting());
  EXPECT_FALSE(matcher.finished());  // "c" may still follow
  std::fill(logits.begin(), logits.end(), 0.0f);
  matcher.mask_logits(logits);
  EXPECT_TRUE(std::isfinite(logits[kEnd]));
  ASSERT_TRUE(matcher.accept(kEnd));  // the end token is allowed where the grammar accepts
  TokenMatcher other(constraint);
  ASSERT_TRUE(other.accept(3));  // "abc"
  EXPECT_TRUE(other.finished());
}

}  // namespace
}  // namespace md::grammar

namespace md::grammar {
namespace {

TEST(TokenConstraint, AGrammarThatHitsALimitStaysRefused) {
  std::string rules = "root ::= p\np ::= \"\"";
  for (char c = 'a'; c <= 'z'; ++c) rules += std::string(" | \"") + c + "\" p \"" + c + "\"";
  std::string long_token;
  for (int i = 0; i < 60000; ++i) long_token += static_cast<char>('a' + (i * 7) % 26);
  auto trie = std::make_shared<TokenTrie>(std::vector<std::string>{"", "ab", long_token});
  TokenConstraint constraint(parse_gbnf(rules), trie, {0});
  EXPECT_THROW(constraint.advance(constraint.start(), 2), Error);
  // Later uses fail at once, with the same message, instead of redoing the work.
  try {
    constraint.allowed(constraint.start());
    FAIL() << "usable after the limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("frames"), std::string::npos);
  }
}

}  // namespace
}  // namespace md::grammar
