// Building a tokenizer from GGUF tokenizer metadata given as plain data: a tiny byte-level
// vocabulary, the pre-tokenizer variants, added tokens by token type, and bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "text/byte_level.h"
#include "text/tokenizer_gguf.h"

namespace md {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every byte as a token (ids 0..255), then merges "a b" -> 256, "1 2" -> 257, "Ġ Ġ" -> 258, and a
// control token and a user-defined token.
GgufTokenizerData tiny(std::string pre = "smollm") {
  GgufTokenizerData d;
  d.origin = "tiny.gguf";
  d.model = "gpt2";
  d.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) d.tokens.push_back(byte_level::encode(std::string(1, char(b))));
  d.tokens.insert(d.tokens.end(), {"ab", "12", "ĠĠ", "<|im_end|>", "<think>"});
  d.merges = {"a b", "1 2", "Ġ Ġ"};
  d.token_types.assign(d.tokens.size(), 1);
  d.token_types[259] = 3;
  d.token_types[260] = 4;
  d.eos = 259;
  return d;
}

std::string error_of(GgufTokenizerData d) {
  try {
    build_gguf_tokenizer(std::move(d));
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(GgufTokenizer, SmollmSplitsEveryDigit) {
  const auto tok = build_gguf_tokenizer(tiny("smollm"));
  EXPECT_THAT(tok->encode("ab12"), ElementsAre(256, '1', '2'));
  EXPECT_EQ(tok->decode(tok->encode("ab 12  x")), "ab 12  x");
}

TEST(GgufTokenizer, Gpt2KeepsDigitRuns) {
  for (const char* pre : {"gpt2", "default", ""}) {
    const auto tok = build_gguf_tokenizer(tiny(pre));
    EXPECT_THAT(tok->encode("ab12"), ElementsAre(256, 257)) << pre;
  }
}

// Qwen's split regex: single digits, case-insensitive contractions, a space joins a word.
TEST(GgufTokenizer, QwenSplitsDigitsAndKeepsWordsWhole) {
  for (const char* pre : {"qwen2", "qwen35"}) {
    const auto tok = build_gguf_tokenizer(tiny(pre));
    EXPECT_THAT(tok->encode("ab12"), ElementsAre(256, '1', '2')) << pre;
    EXPECT_EQ(tok->decode(tok->encode("It'S ab 12\n\n  x!?")), "It'S ab 12\n\n  x!?") << pre;
  }
}

// What sets "qwen35" apart: a combining mark (U+0301 after 'e') stays in its word, where "qwen2"
// splits it off as punctuation, so only "qwen35" can merge across it.
TEST(GgufTokenizer, Qwen35KeepsCombiningMarksWithTheirLetters) {
  const std::string mark = "\xCC\x81";  // U+0301 COMBINING ACUTE ACCENT
  const std::string e_mark = byte_level::encode("e" + mark);
  auto with_merges = [&](const char* pre) {
    GgufTokenizerData d = tiny(pre);
    const std::string e_first = byte_level::encode("e\xCC");
    d.tokens.push_back(e_first);  // 261
    d.tokens.push_back(e_mark);   // 262
    d.token_types.resize(d.tokens.size(), 1);
    d.merges.push_back("e " + byte_level::encode("\xCC"));
    d.merges.push_back(e_first + " " + byte_level::encode("\x81"));
    return build_gguf_tokenizer(std::move(d));
  };
  EXPECT_THAT(with_merges("qwen35")->encode("e" + mark), ElementsAre(262));
  EXPECT_THAT(with_merges("qwen2")->encode("e" + mark), ElementsAre('e', 0xCC, 0x81));
}

TEST(GgufTokenizer, ControlTokensAreSpecialUserDefinedAreNot) {
  const auto tok = build_gguf_tokenizer(tiny());
  EXPECT_THAT(tok->encode("a<|im_end|><think>"), ElementsAre('a', 259, 260));
  EXPECT_TRUE(tok->is_special(259));
  EXPECT_FALSE(tok->is_special(260));
  // Not parsing specials still matches the non-special added token, as HF does.
  EXPECT_EQ(tok->encode("<|im_end|>", false).size(), 10u);
  EXPECT_THAT(tok->encode("<think>", false), ElementsAre(260));
  const std::vector<std::int32_t> ids = {'a', 259, 260};
  EXPECT_EQ(tok->decode(ids, true), "a<think>");
}

TEST(GgufTokenizer, BytesWithoutATokenAreDroppedLikeHf) {
  GgufTokenizerData d = tiny();
  d.tokens['b'] = "unused-b";  // no token for byte 'b' any more; "a b" now names an unknown token
  d.merges = {"1 2"};
  const auto tok = build_gguf_tokenizer(std::move(d));
  EXPECT_THAT(tok->encode("1b2"), ElementsAre('1', '2'));
  EXPECT_THAT(tok->encode("b"), ElementsAre());
}

TEST(GgufTokenizer, ChatTemplateGetsBosAndEosFromIds) {
  GgufTokenizerData d = tiny();
  EXPECT_FALSE(build_gguf_chat_template(d).has_value());
  d.chat_template = "{{ messages[0]['content'] }}{{ eos_token }}";
  const auto tmpl = build_gguf_chat_template(d);
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_EQ(tmpl->eos_token(), "<|im_end|>");
  EXPECT_FALSE(tmpl->bos_token().has_value());
  EXPECT_EQ(tmpl->render(nlohmann::ordered_json::parse(R"([{"role":"user","content":"hi"}])")),
            "hi<|im_end|>");
}

TEST(GgufTokenizer, RejectsUnsupportedModelsAndPreTokenizers) {
  GgufTokenizerData d = tiny();
  d.model = "llama";
  EXPECT_THAT(error_of(d), HasSubstr("SentencePiece tokenizers (tokenizer.ggml.model = 'llama') "
                                     "are not supported yet"));
  d.model = "bert";
  EXPECT_THAT(error_of(d), HasSubstr("unsupported tokenizer.ggml.model 'bert'"));
  EXPECT_THAT(error_of(tiny("llama3")),
              HasSubstr("tiny.gguf: unsupported pre-tokenizer tokenizer.ggml.pre = 'llama3' "
                        "(supported: smollm, gpt2, default, qwen2, qwen35)"));
}

TEST(GgufTokenizer, RejectsMissingOrInconsistentArrays) {
  GgufTokenizerData d = tiny();
  d.tokens.clear();
  EXPECT_THAT(error_of(d), HasSubstr("no tokenizer.ggml.tokens"));
  d = tiny();
  d.merges.clear();
  EXPECT_THAT(error_of(d), HasSubstr("no tokenizer.ggml.merges"));
  d = tiny();
  d.merges.push_back("ab zz");
  EXPECT_THAT(error_of(d), HasSubstr("merge #3 'ab zz' uses a token missing from the vocabulary"));
  d = tiny();
  d.merges.push_back("abc");
  EXPECT_THAT(error_of(d), HasSubstr("merge #3 'abc' is not of the form 'left right'"));
  d = tiny();
  d.token_types.pop_back();
  EXPECT_THAT(error_of(d), HasSubstr("token_type has 260 entries for 261 tokens"));
}

}  // namespace
}  // namespace md
