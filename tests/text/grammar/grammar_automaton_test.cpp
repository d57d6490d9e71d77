#include "text/grammar/grammar_automaton.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "text/grammar/gbnf_parser.h"

namespace md::grammar {
namespace {

// Whether `text` is a sentence of the grammar (and, separately, a live prefix of one).
struct Verdict {
  bool prefix;
  bool sentence;
};

Verdict judge(const std::string& gbnf, const std::string& text) {
  GrammarAutomaton automaton(parse_gbnf(gbnf));
  auto state = automaton.step(automaton.start(), text);
  return {state != GrammarAutomaton::kDead,
          state != GrammarAutomaton::kDead && automaton.accepting(state)};
}

bool sentence(const std::string& gbnf, const std::string& text) {
  return judge(gbnf, text).sentence;
}
bool prefix(const std::string& gbnf, const std::string& text) {
  return judge(gbnf, text).prefix;
}

TEST(GrammarAutomaton, LiteralsAlternativesAndGroups) {
  std::string g = R"(root ::= "yes" | "no" | ("may" "be"))";
  EXPECT_TRUE(sentence(g, "yes"));
  EXPECT_TRUE(sentence(g, "no"));
  EXPECT_TRUE(sentence(g, "maybe"));
  EXPECT_FALSE(sentence(g, "ye"));
  EXPECT_TRUE(prefix(g, "ye"));
  EXPECT_FALSE(prefix(g, "yess"));
  EXPECT_FALSE(prefix(g, "x"));
  EXPECT_FALSE(sentence(g, ""));
}

TEST(GrammarAutomaton, Repetitions) {
  std::string g = R"(root ::= [a-c]{2,4} "-" [0-9]+ "." [x]* "!"?)";
  EXPECT_TRUE(sentence(g, "ab-1."));
  EXPECT_TRUE(sentence(g, "abca-123.xxx!"));
  EXPECT_FALSE(sentence(g, "a-1."));  // fewer than 2
  EXPECT_FALSE(prefix(g, "abcab"));   // more than 4
  EXPECT_FALSE(sentence(g, "ab-."));  // + needs one digit
  EXPECT_FALSE(prefix(g, "ab-1.x!x"));
  EXPECT_TRUE(sentence(g, std::string("ab-1.") + std::string(5000, 'x')));
}

TEST(GrammarAutomaton, LongRunsReuseStates) {
  // A tail-called repetition keeps the stack flat: the state after 10 or 1000 characters is the
  // same state, which is what makes token masks cacheable inside long strings.
  GrammarAutomaton automaton(parse_gbnf(R"(root ::= "\"" [^"]* "\"")"));
  auto s10 = automaton.step(automaton.start(), "\"" + std::string(10, 'a'));
  auto s1000 = automaton.step(automaton.start(), "\"" + std::string(1000, 'b'));
  EXPECT_EQ(s10, s1000);
  EXPECT_LT(automaton.state_count(), 10u);
}

TEST(GrammarAutomaton, RecursionAndNesting) {
  std::string g = R"(
    root ::= value
    value ::= "[" ( value ("," value)* )? "]" | [0-9]
  )";
  EXPECT_TRUE(sentence(g, "[]"));
  EXPECT_TRUE(sentence(g, "[1,[2,[]],[[3]]]"));
  EXPECT_FALSE(sentence(g, "[1,]"));
  EXPECT_FALSE(prefix(g, "[1]]"));
  EXPECT_TRUE(prefix(g, "[[[[[[["));
}

TEST(GrammarAutomaton, Utf8SplitAcrossSteps) {
  std::string g = R"(root ::= [é-ë]+ | "\u4E2D")";
  GrammarAutomaton automaton(parse_gbnf(g));
  std::string e_acute = "\xC3\xA9";  // é
  auto half = automaton.step(automaton.start(), static_cast<uint8_t>(e_acute[0]));
  ASSERT_NE(half, GrammarAutomaton::kDead);  // é, ê, ë all begin with C3
  EXPECT_FALSE(automaton.accepting(half));
  auto whole = automaton.step(half, static_cast<uint8_t>(e_acute[1]));
  EXPECT_TRUE(automaton.accepting(whole));
  // C3 A0 is à: in no class, so the second byte is refused.
  EXPECT_EQ(automaton.step(half, static_cast<uint8_t>(0xA0)), GrammarAutomaton::kDead);
  // A lead byte whose characters the grammar never allows is refused at once.
  EXPECT_EQ(automaton.step(automaton.start(), static_cast<uint8_t>(0xD0)), GrammarAutomaton::kDead);
  EXPECT_TRUE(sentence(g, "\xE4\xB8\xAD"));
  // Overlong and invalid encodings are never characters.
  EXPECT_FALSE(prefix(R"(root ::= .+)", "\xC0\x80"));
  EXPECT_FALSE(prefix(R"(root ::= .+)", "\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(sentence(R"(root ::= .+)", "\xF0\x9F\x98\x80"));
}

TEST(GrammarAutomaton, NegatedClassesAndEscapes) {
  std::string g = R"(root ::= [^a-z\n] "\x41\u00e9\t" [\]\\-])";
  EXPECT_TRUE(sentence(g, "QA\xC3\xA9\t]"));
  EXPECT_TRUE(sentence(g, "QA\xC3\xA9\t-"));
  EXPECT_TRUE(sentence(g, "QA\xC3\xA9\t\\"));
  EXPECT_FALSE(prefix(g, "q"));
  EXPECT_FALSE(prefix(g, "\n"));
}

TEST(GrammarAutomaton, NullableRulesAndCompleteness) {
  GrammarAutomaton automaton(parse_gbnf(R"(root ::= a b "!"?
a ::= "x"?
b ::= "y"?)"));
  auto start = automaton.start();
  EXPECT_TRUE(automaton.accepting(start));  // everything is optional
  auto bang = automaton.step(start, "xy!");
  EXPECT_TRUE(automaton.accepting(bang));
  EXPECT_FALSE(automaton.can_continue(bang));  // complete: nothing may follow
  EXPECT_TRUE(automaton.can_continue(automaton.step(start, "x")));
}

TEST(GbnfParser, ErrorsNameTheProblemAndPlace) {
  auto message = [](const std::string& g) {
    try {
      parse_gbnf(g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("root ::= item\n").find("'item' is used but never defined"), std::string::npos);
  EXPECT_NE(message("start ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(message("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= x\nx ::= y? x \"a\"\ny ::= \"b\"").find("'x' is left-recursive"),
            std::string::npos);
  EXPECT_NE(message("root ::= \"abc").find("unterminated literal"), std::string::npos);
  EXPECT_NE(message("root ::= [a-").find("line 1"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"\n  \"b\" )").find("line 2, column 7"), std::string::npos);
  EXPECT_NE(message("root ::= [z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(message("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(message("").find("empty"), std::string::npos);
  EXPECT_NE(message("root ::= \"\\uD800\"").find("scalar"), std::string::npos);
}

TEST(GbnfParser, LiteralRoundTrip) {
  std::string tricky = "a\"b\\c\nd\x01\x7F\xC3\xA9";
  EXPECT_TRUE(sentence("root ::= " + gbnf_literal(tricky), tricky));
  EXPECT_FALSE(sentence("root ::= " + gbnf_literal(tricky), tricky.substr(1)));
}

TEST(GbnfParser, FuzzedInputNeverCrashes) {
  // Random bytes and random mutations of a valid grammar: parse errors only, never a crash.
  std::string seed_grammar = R"(root ::= ("a" | [b-d]+ x){1,3} # c
x ::= "\u00e9" .? [^"] )";
  uint64_t rng = 0x1234;
  auto next = [&] { return rng = rng * 6364136223846793005ULL + 1442695040888963407ULL; };
  for (int round = 0; round < 3000; ++round) {
    std::string text = seed_grammar;
    int edits = 1 + static_cast<int>(next() >> 60);
    for (int e = 0; e < edits; ++e) {
      std::size_t at = (next() >> 33) % (text.size() + 1);
      char c = static_cast<char>(next() >> 56);
      if ((next() >> 63) != 0 && at < text.size()) {
        text.erase(at, 1);
      } else {
        text.insert(at, 1, c);
      }
    }
    try {
      GrammarAutomaton automaton(parse_gbnf(text));
      automaton.step(automaton.start(), "abcd\xC3\xA9");
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace md::grammar

namespace md::grammar {
namespace {

TEST(GrammarAutomaton, NullableRepetitionsInTailPositionAreAccepted) {
  // ("a"?)* and regex (a|)+ loop through nullable tail calls only: harmless, not left recursion.
  EXPECT_TRUE(sentence(R"(root ::= ("a"?)* "b")", "aaab"));
  EXPECT_TRUE(sentence(R"(root ::= ("a" | "")+ "b")", "b"));
}

TEST(GbnfParser, LongNullableChainsParseQuickly) {
  // A chain whose nullability runs against rule order: one worklist pass, not one per rule.
  std::string text = "root ::= r1\n";
  const int n = 20000;
  for (int i = 1; i < n; ++i)
    text += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  text += "r" + std::to_string(n) + " ::= \"\"\n";
  GrammarAutomaton automaton(parse_gbnf(text));
  EXPECT_TRUE(automaton.accepting(automaton.start()));
}

// A grammar whose parse stacks grow with the input hits the frame limit with an error, and the
// tables stay consistent: the same input fails the same way again (under ASan, a half-inserted
// frame would be a heap overflow here; before the fix the second attempt read past the frames).
TEST(GrammarAutomaton, TheFrameLimitFailsCleanlyAndRepeatably) {
  std::string rules = "root ::= p\np ::= \"\"";
  for (char c = 'a'; c <= 'z'; ++c) rules += std::string(" | \"") + c + "\" p \"" + c + "\"";
  GrammarAutomaton automaton(parse_gbnf(rules));
  std::string input;
  for (int i = 0; i < 60000; ++i) input += static_cast<char>('a' + (i * 7) % 26);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      automaton.step(automaton.start(), input);
      FAIL() << "no limit";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("frames"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace md::grammar
