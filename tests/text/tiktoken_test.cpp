// tiktoken support: the pat_str translation for PCRE2, pattern discovery, tiktoken.model parsing
// and a small hand-made tiktoken model with reserved special tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "text/pretokenizer_pattern.h"
#include "text/pretokenizer_regex.h"
#include "text/tiktoken_pattern.h"
#include "text/tiktoken_tokenizer.h"
#include "text/tokenizer.h"

namespace md {
namespace {

std::vector<std::string> split(const std::string& pcre2_pattern, std::string_view text) {
  PretokenizerRegex regex(pcre2_pattern);
  std::vector<std::string_view> pieces;
  regex.split_isolated(text, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(TiktokenPattern, ClassIntersectionBecomesLookahead) {
  EXPECT_EQ(translate_pattern_to_pcre2(R"([\p{Lu}\p{M}&&[^\p{Han}]]*x)"),
            R"((?:(?=[^\p{sc:Han}])[\p{Lu}\p{M}])*x)");
  EXPECT_EQ(translate_pattern_to_pcre2(R"([a-z&&[^aeiou]]+)"), R"((?:(?=[^aeiou])[a-z])+)");
  EXPECT_EQ(translate_pattern_to_pcre2(R"([\w&&\p{L}&&[^x]])"), R"((?:(?=[\p{L}])(?=[^x])[\w]))");
}

TEST(TiktokenPattern, WhitespaceAndScriptsAndPlainParts) {
  EXPECT_EQ(translate_pattern_to_pcre2(R"(\s+(?!\S)|[^\s\p{L}]+)"),
            R"(\p{White_Space}+(?!\P{White_Space})|[^\p{White_Space}\p{L}]+)");
  EXPECT_EQ(translate_pattern_to_pcre2(R"([\p{Han}]+|\p{Latin}|\p{L}\p{Lu}\p{N}{1,3})"),
            R"([\p{sc:Han}]+|\p{sc:Latin}|\p{L}\p{Lu}\p{N}{1,3})");
  EXPECT_EQ(translate_pattern_to_pcre2(R"((?i:'s|'t)|[^\r\n\]]|\x{20})"),
            R"((?i:'s|'t)|[^\r\n\]]|\x{20})");
  EXPECT_EQ(translate_pattern_to_pcre2(R"([]a])"), R"([]a])");
  EXPECT_EQ(translate_pattern_to_pcre2(R"(\p{Letter}\P{Old_Italic})"),
            R"(\p{Letter}\P{sc:Old_Italic})");
}

TEST(TiktokenPattern, UntranslatableClassesAreRefused) {
  EXPECT_THROW(translate_pattern_to_pcre2(R"([a[bc]])"), Error);
  EXPECT_THROW(translate_pattern_to_pcre2(R"([^a&&b])"), Error);
  EXPECT_THROW(translate_pattern_to_pcre2(R"([abc)"), Error);
  EXPECT_THROW(translate_pattern_to_pcre2("ab\\"), Error);
}

TEST(TiktokenPattern, TranslatedKimiPatternSplitsLikeTiktoken) {
  const std::string kimi = translate_pattern_to_pcre2(kKimiPattern);
  // Han runs are their own pieces; U+3002 (script Common) is punctuation, not Han.
  EXPECT_EQ(split(kimi, "Hello\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82 world's 12345"),
            (std::vector<std::string>{"Hello", "\xE4\xB8\x96\xE7\x95\x8C", "\xE3\x80\x82",
                                      " world's", " ", "123", "45"}));
  // Uppercase-then-lowercase words and contractions, including LONG S folding to s.
  EXPECT_EQ(split(kimi, "McDonald'S it'\xC5\xBF"),
            (std::vector<std::string>{"Mc", "Donald'S", " it'\xC5\xBF"}));
  // U+0085 is whitespace for tiktoken (Rust \s), so it is not glued to the punctuation.
  EXPECT_EQ(split(kimi, "!\xC2\x85x"), (std::vector<std::string>{"!", "\xC2\x85x"}));
}

TEST(TiktokenPattern, ReadsPatStrFromTokenizationPy) {
  const std::string source = R"(
class TikTokenTokenizer:
    special = "x"
    pat_str = "|".join(
        [
            r"""[\p{Han}]+""",   # Chinese
            r"""\p{N}{1,3}""",
            r'\s+',
        ]
    )
)";
  EXPECT_EQ(extract_pat_str_from_python(source),
            std::optional<std::string>(R"([\p{Han}]+|\p{N}{1,3}|\s+)"));
  EXPECT_FALSE(extract_pat_str_from_python("pat_str = compute()").has_value());
  EXPECT_FALSE(extract_pat_str_from_python("nothing here").has_value());
}

TEST(TiktokenModel, Base64AndRankParsing) {
  EXPECT_EQ(decode_base64("aGVsbG8="), "hello");
  EXPECT_EQ(decode_base64("IQ=="), "!");
  EXPECT_EQ(decode_base64(""), "");
  EXPECT_FALSE(decode_base64("a$==").has_value());
  EXPECT_EQ(parse_tiktoken_ranks("IQ== 1\nIA== 0\n\n", "m"), (std::vector<std::string>{" ", "!"}));
  EXPECT_THROW(parse_tiktoken_ranks("IQ== x\n", "m"), Error);
  EXPECT_THROW(parse_tiktoken_ranks("IQ== 0\nIA== 0\n", "m"), Error);
  EXPECT_THROW(parse_tiktoken_ranks("IQ== 0\nIA== 2\n", "m"), Error);
  try {
    parse_tiktoken_ranks("IQ== 0\n!!!! 1\n", "dir/tiktoken.model");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dir/tiktoken.model:2"), std::string::npos) << e.what();
  }
}

// A model directory with all single bytes plus "he", "ll", "hell", "hello" and a config naming
// two of the 256 special slots. Each test and process writes its own directory: ctest runs these
// tests in parallel, and a shared one was rewritten under a reader.
std::filesystem::path write_small_model(bool with_config) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("md_tiktoken_" + std::to_string(::getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                    (with_config ? "" : "_noconfig"));
  std::filesystem::create_directories(dir);
  std::ofstream model(dir / "tiktoken.model");
  static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int b = 0; b < 256; ++b) {
    model << kB64[b >> 2] << kB64[(b & 3) << 4] << "== " << b << "\n";
  }
  model << "aGU= 256\nbGw= 257\naGVsbA== 258\naGVsbG8= 259\n";
  model.close();
  std::filesystem::remove(dir / "tokenizer_config.json");
  if (with_config) {
    std::ofstream config(dir / "tokenizer_config.json");
    config << R"({"added_tokens_decoder": {"260": {"content": "[BOS]", "special": true},
                                          "262": {"content": "<|im_end|>", "special": true}}})";
  }
  return dir;
}

TEST(TiktokenModel, SpecialSlotsNamedFromConfigElseReserved) {
  const auto dir = write_small_model(true);
  const auto tok = load_tokenizer(dir.string());
  EXPECT_EQ(tok->vocab_size(), 260 + 256);
  EXPECT_EQ(tok->token_id("[BOS]"), 260);
  EXPECT_EQ(tok->token_id("<|im_end|>"), 262);
  EXPECT_EQ(tok->token_id("<|reserved_token_261|>"), 261);
  EXPECT_EQ(tok->piece(515), "<|reserved_token_515|>");
  EXPECT_TRUE(tok->is_special(260));
  EXPECT_FALSE(tok->is_special(259));
  EXPECT_EQ(tok->piece(259), "hello");
  EXPECT_EQ(tok->token_id("\xC4\xA0"), ' ');
  EXPECT_EQ(tok->encode("hello hell<|im_end|>"), (std::vector<std::int32_t>{259, ' ', 258, 262}));
  const auto plain = tok->encode("hello<|im_end|>", false);  // the special written as text
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 262), 0);
  EXPECT_EQ(tok->decode(plain), "hello<|im_end|>");
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{260, 259, 262}), "[BOS]hello<|im_end|>");
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{260, 259, 262}, true), "hello");

  const auto unnamed_dir = write_small_model(false);
  const auto unnamed = load_tokenizer(unnamed_dir.string());
  EXPECT_EQ(unnamed->piece(260), "<|reserved_token_260|>");
  std::filesystem::remove_all(unnamed_dir);
  std::filesystem::remove_all(dir);
}

TEST(TiktokenModel, ExplicitPatternAndMissingFiles) {
  const auto dir = write_small_model(true);
  TiktokenFiles files;
  files.model_path = (dir / "tiktoken.model").string();
  files.pattern = R"(\S+|\s+)";
  const auto tok = load_tiktoken_tokenizer(files);
  EXPECT_EQ(tok->encode("hello hello"), (std::vector<std::int32_t>{259, ' ', 259}));
  EXPECT_EQ(tok->piece(260), "<|reserved_token_260|>");  // no config given
  files.model_path = "/nonexistent/tiktoken.model";
  EXPECT_THROW(load_tiktoken_tokenizer(files), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace md
