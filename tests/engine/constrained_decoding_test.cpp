// Structured output in the per-choice pipeline: the grammar's mask before sampling, the end of a
// choice where the sentence is complete, speculative drafts outside the grammar, and a grammar that
// waits for the end of the reasoning.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/choice_decoder.h"
#include "text/grammar/gbnf_parser.h"
#include "text/grammar/grammar_automaton.h"
#include "text/grammar/token_constraint.h"

namespace md::engine {
namespace {

// Tokens are byte strings; id 0 is the end token (special), id 1 a reasoning-end marker.
class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  std::vector<std::int32_t> encode(std::string_view, bool = true) const override { return {}; }
  bool append_token_bytes(std::int32_t id, std::string& out) const override {
    if (id < 0 || id >= vocab_size()) return false;
    out += tokens_[static_cast<std::size_t>(id)];
    return true;
  }
  std::optional<std::int32_t> token_id(std::string_view) const override { return std::nullopt; }
  bool is_special(std::int32_t id) const override { return id <= 1; }
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(tokens_.size()); }
  std::string piece(std::int32_t id) const override {
    return tokens_[static_cast<std::size_t>(id)];
  }
  const std::string& bytes(std::int32_t id) const { return tokens_[static_cast<std::size_t>(id)]; }

 private:
  std::vector<std::string> tokens_;
};

constexpr int32_t kEnd = 0;
constexpr int32_t kThinkEnd = 1;

ByteTokenizer make_tokenizer() {
  std::vector<std::string> tokens{"</s>", "</think>"};
  for (const char* t :
       {"{", "}", "\"", ":",   ",",   " ", "a",   "b",  "ab",   "1",    "12",    "0",
        "-", "[", "]",  "{\"", "\":", "x", "yes", "no", "true", "null", "\"a\"", "9"}) {
    tokens.emplace_back(t);
  }
  return ByteTokenizer(tokens);
}

std::shared_ptr<grammar::TokenConstraint> constraint_for(const ByteTokenizer& tokenizer,
                                                         const std::string& gbnf) {
  std::vector<std::string> bytes;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    bytes.push_back(tokenizer.is_special(id) ? "" : tokenizer.bytes(id));
  }
  return std::make_shared<grammar::TokenConstraint>(
      grammar::parse_gbnf(gbnf), std::make_shared<grammar::TokenTrie>(bytes), std::vector{kEnd});
}

// A request for the byte tokenizer's vocabulary under `gbnf`: greedy unless asked otherwise.
GenerationRequest constrained(const ByteTokenizer& tokenizer, const std::string& gbnf,
                              float temperature = 0.0f, int64_t max_tokens = 50) {
  GenerationRequest request;
  request.prompt = {2};
  request.max_tokens = max_tokens;
  request.skip_special = false;
  request.sampling.temperature = temperature;
  request.constraint = constraint_for(tokenizer, gbnf);
  return request;
}

bool sentence(const std::string& gbnf, const std::string& text) {
  grammar::GrammarAutomaton automaton(grammar::parse_gbnf(gbnf));
  auto state = automaton.step(automaton.start(), text);
  return state != grammar::GrammarAutomaton::kDead && automaton.accepting(state);
}

struct Sampled {
  std::string text;
  FinishReason finish;
};

Sampled sample(const ByteTokenizer& tokenizer, GenerationRequest& request, uint64_t seed) {
  ChoiceDecoder decoder(request, {kEnd}, tokenizer.vocab_size(), tokenizer, seed, 4096);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> noise(0.0f, 2.0f);
  Sampled out;
  for (int64_t position = 1;; ++position) {
    std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()));
    for (float& l : logits) l = noise(rng);
    TokenOutcome outcome = decoder.next(logits, position);
    out.text += outcome.text;
    if (outcome.finished) {
      out.finish = outcome.finish;
      return out;
    }
  }
}

const char* kGrammar = R"(root ::= "{" ws "\"a\"" ws ":" ws (num | "null" | list) ws "}"
list ::= "[" ws (num (ws "," ws num){0,2})? ws "]"
num ::= "-"? ([1-9] [0-9]{0,2} | "0")
ws ::= " "?)";

TEST(ConstrainedDecoding, EverySampledOutputIsASentence) {
  ByteTokenizer tokenizer = make_tokenizer();
  GenerationRequest request = constrained(tokenizer, kGrammar, 1.0f, 200);
  int stopped = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Sampled s = sample(tokenizer, request, seed);
    ASSERT_TRUE(sentence(kGrammar, s.text)) << "seed " << seed << ": " << s.text;
    stopped += s.finish == FinishReason::kStop;
  }
  EXPECT_EQ(stopped, 300);  // each ends where the sentence is complete, well within max_tokens
  // Negative control: the same draws without the constraint are not sentences.
  request.constraint = nullptr;
  int valid = 0;
  for (uint64_t seed = 0; seed < 50; ++seed)
    valid += sentence(kGrammar, sample(tokenizer, request, seed).text);
  EXPECT_LT(valid, 3);
}

TEST(ConstrainedDecoding, TheEndTokenOnlyWhereTheSentenceIsComplete) {
  ByteTokenizer tokenizer = make_tokenizer();
  GenerationRequest request = constrained(tokenizer, R"(root ::= "yes" "!"? | "no")");
  ChoiceDecoder decoder(request, {kEnd}, tokenizer.vocab_size(), tokenizer, 7, 4096);
  std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()), 0.0f);
  logits[kEnd] = 50.0f;  // the model wants to stop at once: not allowed before "yes"/"no"
  logits[20] = 10.0f;    // "yes"
  TokenOutcome first = decoder.next(logits, 1);
  EXPECT_EQ(first.token.id, 20);
  EXPECT_FALSE(first.finished);  // "!" may still follow
  std::fill(logits.begin(), logits.end(), 0.0f);
  logits[kEnd] = 50.0f;
  TokenOutcome second = decoder.next(logits, 2);
  EXPECT_EQ(second.token.id, kEnd);  // complete: the end token is allowed now
  EXPECT_TRUE(second.finished);
  EXPECT_EQ(second.finish, FinishReason::kStop);
  // "no" admits nothing after it: the choice ends with it, no end token needed.
  ChoiceDecoder other(request, {kEnd}, tokenizer.vocab_size(), tokenizer, 7, 4096);
  std::fill(logits.begin(), logits.end(), 0.0f);
  logits[21] = 10.0f;  // "no"
  TokenOutcome only = other.next(logits, 1);
  EXPECT_EQ(only.text, "no");
  EXPECT_TRUE(only.finished);
  EXPECT_EQ(only.finish, FinishReason::kStop);
}

TEST(ConstrainedDecoding, DraftsOutsideTheGrammarAreRejected) {
  ByteTokenizer tokenizer = make_tokenizer();
  GenerationRequest request = constrained(tokenizer, R"(root ::= "yes" | "no")", 1.0f);
  for (uint64_t seed = 0; seed < 100; ++seed) {
    ChoiceDecoder decoder(request, {kEnd}, tokenizer.vocab_size(), tokenizer, seed, 4096);
    std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()), 0.0f);
    logits[19] = 20.0f;  // "x": the model is sure, but the grammar forbids it
    std::vector<std::pair<int32_t, float>> q{{19, 1.0f}};
    bool accepted = true;
    TokenOutcome outcome = decoder.verify_draft(logits, 1, 19, q, accepted);
    EXPECT_FALSE(accepted);
    EXPECT_TRUE(outcome.token.id == 20 || outcome.token.id == 21) << outcome.token.id;
  }
  // Greedy verification: the masked argmax, so a draft inside the grammar is accepted.
  request.sampling.temperature = 0.0f;
  ChoiceDecoder greedy(request, {kEnd}, tokenizer.vocab_size(), tokenizer, 1, 4096);
  std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()), 0.0f);
  logits[19] = 20.0f;
  logits[21] = 5.0f;
  bool accepted = false;
  std::vector<std::pair<int32_t, float>> q{{21, 1.0f}};
  TokenOutcome outcome = greedy.verify_draft(logits, 1, 21, q, accepted);
  EXPECT_TRUE(accepted);
  EXPECT_EQ(outcome.token.id, 21);
}

TEST(ConstrainedDecoding, WaitsForTheEndOfTheReasoning) {
  ByteTokenizer tokenizer = make_tokenizer();
  GenerationRequest request = constrained(tokenizer, R"(root ::= "yes" | "no")");
  request.constraint_after = kThinkEnd;
  ChoiceDecoder decoder(request, {kEnd}, tokenizer.vocab_size(), tokenizer, 3, 4096);
  std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()), 0.0f);
  logits[19] = 20.0f;  // "x": free while reasoning
  EXPECT_EQ(decoder.next(logits, 1).token.id, 19);
  std::fill(logits.begin(), logits.end(), 0.0f);
  logits[kThinkEnd] = 20.0f;
  EXPECT_EQ(decoder.next(logits, 2).token.id, kThinkEnd);
  std::fill(logits.begin(), logits.end(), 0.0f);
  logits[19] = 20.0f;  // now constrained
  logits[20] = 1.0f;
  TokenOutcome answer = decoder.next(logits, 3);
  EXPECT_EQ(answer.token.id, 20);
  EXPECT_TRUE(answer.finished);
}

TEST(ConstrainedDecoding, ALazyGrammarGovernsEachTriggeredSentenceOnly) {
  ByteTokenizer tokenizer = make_tokenizer();
  GenerationRequest request = constrained(tokenizer, R"(root ::= "yes" "!"? ",")");
  request.constraint_trigger = 15;  // "["
  ChoiceDecoder decoder(request, {kEnd}, tokenizer.vocab_size(), tokenizer, 3, 4096);
  auto step = [&](std::initializer_list<std::pair<int32_t, float>> preferred) {
    std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()), 0.0f);
    for (auto [id, value] : preferred) logits[static_cast<std::size_t>(id)] = value;
    return decoder.next(logits, 1);
  };
  EXPECT_EQ(step({{19, 9}}).token.id, 19);              // "x": free text
  EXPECT_EQ(step({{15, 9}}).token.id, 15);              // the trigger
  EXPECT_EQ(step({{19, 9}, {kEnd, 20}}).token.id, 20);  // inside: "yes", not "x" nor the end
  EXPECT_NE(step({{kEnd, 20}}).token.id, kEnd);         // incomplete: the end is not allowed
  TokenOutcome free_again = step({{19, 9}});            // the sentence ended with ",": free
  EXPECT_EQ(free_again.token.id, 19);
  EXPECT_FALSE(free_again.finished);
  EXPECT_EQ(step({{15, 9}}).token.id, 15);  // a second sentence starts afresh
  EXPECT_EQ(step({{21, 9}, {20, 1}}).token.id, 20);
}

TEST(ConstrainedDecoding, MinTokensThatTheGrammarCannotMeetEndsTheChoice) {
  ByteTokenizer tokenizer = make_tokenizer();
  GenerationRequest request = constrained(tokenizer, R"(root ::= "yes" "!"?)");
  request.min_tokens = 5;
  ChoiceDecoder decoder(request, {kEnd}, tokenizer.vocab_size(), tokenizer, 3, 4096);
  std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()), 0.0f);
  TokenOutcome first = decoder.next(logits, 1);
  ASSERT_EQ(first.token.id, 20);
  // Only "!" (not in the vocabulary) or the end token (masked by min_tokens) could follow.
  std::fill(logits.begin(), logits.end(), 0.0f);
  TokenOutcome second = decoder.next(logits, 2);
  EXPECT_TRUE(second.finished);
  EXPECT_FALSE(second.reported);
  EXPECT_EQ(second.finish, FinishReason::kStop);
}

}  // namespace
}  // namespace md::engine
