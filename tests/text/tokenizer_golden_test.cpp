// Token-for-token comparison with the Python reference implementations (HF tokenizers and
// tiktoken), over the corpus written by tools/gen_tokenizer_goldens.py.
#include <gtest/gtest.h>

#include "text/stream_detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_golden_util.h"

namespace md {
namespace {

using testing::compare_encodings;
using testing::escape;
using testing::golden_path;
using testing::read_jsonl;
using testing::unhex;

class Qwen3Goldens : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = load_tokenizer(std::string(MD_QWEN3_TOKENIZER_DIR) + "").release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  static const Tokenizer& tok() { return *tokenizer_; }
  static Tokenizer* tokenizer_;
};
Tokenizer* Qwen3Goldens::tokenizer_ = nullptr;

TEST_F(Qwen3Goldens, EncodeMatchesHfTokenizers) {
  const auto rows = read_jsonl(golden_path("corpus_encode.jsonl"));
  ASSERT_GE(rows.size(), 10000u);
  EXPECT_EQ(compare_encodings(tok(), rows, "ids", true, "qwen3 encode (special tokens parsed)"),
            0u);
}

TEST_F(Qwen3Goldens, EncodeWithoutParsingSpecialsMatchesHfEncodeSpecialTokens) {
  const auto rows = read_jsonl(golden_path("corpus_encode.jsonl"));
  ASSERT_GE(rows.size(), 10000u);
  EXPECT_EQ(compare_encodings(tok(), rows, "ids_plain", false, "qwen3 encode (specials as text)"),
            0u);
}

// decode() with and without skip_special, and the streaming detokenizer fed one id at a time,
// must all give what HF's decode gives.
TEST_F(Qwen3Goldens, DecodeAndStreamingMatchHfDecode) {
  const auto rows = read_jsonl(golden_path("corpus_decode.jsonl"));
  ASSERT_GE(rows.size(), 1000u);
  std::size_t same = 0;
  int reported = 0;
  for (const auto& row : rows) {
    const auto ids = row["ids"].get<std::vector<std::int32_t>>();
    const std::string text = unhex(row["text_hex"].get<std::string>());
    const std::string skipped = unhex(row["skip_hex"].get<std::string>());
    StreamDetokenizer stream(tok());
    std::string streamed;
    for (std::int32_t id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    StreamDetokenizer stream_skip(tok(), /*skip_special=*/true);
    std::string streamed_skip;
    for (std::int32_t id : ids) streamed_skip += stream_skip.push(id);
    streamed_skip += stream_skip.finish();
    const std::string decoded = tok().decode(ids);
    const std::string decoded_skip = tok().decode(ids, true);
    if (decoded == text && decoded_skip == skipped && streamed == text &&
        streamed_skip == skipped) {
      ++same;
    } else if (reported++ < 5) {
      ADD_FAILURE() << "ids " << row["ids"].dump() << "\n expected \"" << escape(text)
                    << "\"\n decode   \"" << escape(decoded) << "\"\n streamed \""
                    << escape(streamed) << "\"\n expected (skip) \"" << escape(skipped)
                    << "\"\n decode (skip)   \"" << escape(decoded_skip) << "\"";
    }
  }
  fmt::print("qwen3 decode + streaming: {}/{} id sequences identical\n", same, rows.size());
  EXPECT_EQ(same, rows.size());
}

// Other tokenizer.json shapes over the same vocabulary: GPT-2's ByteLevel(use_regex=true),
// add_prefix_space, a Sequence normalizer, "a b" merges, lstrip/rstrip/normalized added tokens.
class VariantGoldens : public ::testing::TestWithParam<const char*> {};

TEST_P(VariantGoldens, EncodeMatchesHfTokenizers) {
  const std::string dir = golden_path(std::string("variant_") + GetParam());
  const auto rows = read_jsonl(dir + "/encode.jsonl");
  ASSERT_FALSE(rows.empty());
  const auto tokenizer = load_tokenizer(dir);
  const std::string label = std::string("variant ") + GetParam();
  EXPECT_EQ(compare_encodings(*tokenizer, rows, "ids", true, label), 0u);
  EXPECT_EQ(compare_encodings(*tokenizer, rows, "ids_plain", false, label + " (specials as text)"),
            0u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VariantGoldens,
                         ::testing::Values("gpt2", "prefix_space", "gpt2_prefix_space",
                                           "added_flags"));

TEST(TiktokenGoldens, EncodeMatchesTiktoken) {
  const std::string dir = golden_path("tiktoken");
  const auto rows = read_jsonl(dir + "/encode.jsonl");
  ASSERT_GE(rows.size(), 10000u);
  // The directory has tiktoken.model and tokenizer_config.json but no pattern: Kimi's is used.
  const auto tokenizer = load_tokenizer(dir);
  EXPECT_EQ(compare_encodings(*tokenizer, rows, "ids", true, "tiktoken encode (specials allowed)"),
            0u);
  EXPECT_EQ(
      compare_encodings(*tokenizer, rows, "ids_plain", false, "tiktoken encode (specials as text)"),
      0u);
}

TEST(TiktokenGoldens, DecodeMatchesTiktoken) {
  const std::string dir = golden_path("tiktoken");
  const auto rows = read_jsonl(dir + "/decode.jsonl");
  ASSERT_FALSE(rows.empty());
  const auto tokenizer = load_tokenizer(dir);
  std::size_t same = 0;
  for (const auto& row : rows) {
    const auto ids = row["ids"].get<std::vector<std::int32_t>>();
    const std::string expected = unhex(row["text_hex"].get<std::string>());
    StreamDetokenizer stream(*tokenizer);
    std::string streamed;
    for (std::int32_t id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    const std::string decoded = tokenizer->decode(ids);
    if (decoded == expected && streamed == expected) {
      ++same;
    } else {
      ADD_FAILURE() << "ids " << row["ids"].dump() << " expected \"" << escape(expected)
                    << "\" decode \"" << escape(decoded) << "\" streamed \"" << escape(streamed)
                    << "\"";
    }
  }
  fmt::print("tiktoken decode + streaming: {}/{} id sequences identical\n", same, rows.size());
}

}  // namespace
}  // namespace md
