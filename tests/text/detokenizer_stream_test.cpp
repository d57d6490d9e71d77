// StreamDetokenizer: complete characters only, nothing re-emitted, same text as decode().
#include <gtest/gtest.h>

#include "base/utf8.h"
#include "text/byte_level.h"
#include "text/stream_detokenizer.h"
#include "text/tokenizer.h"

namespace md {
namespace {

const Tokenizer& qwen() {
  static const auto tok = load_tokenizer(std::string(MD_QWEN3_TOKENIZER_DIR) + "");
  return *tok;
}

// The single-byte token for `byte`.
std::int32_t byte_token(unsigned char byte) {
  return qwen().token_id(byte_level::encode(std::string(1, static_cast<char>(byte)))).value();
}

TEST(DetokenizerStream, MultiByteCharacterSplitAcrossTokensIsHeldBack) {
  StreamDetokenizer s(qwen());
  EXPECT_EQ(s.push(byte_token(0xE4)), "");
  EXPECT_EQ(s.pending_bytes(), 1u);
  EXPECT_EQ(s.push(byte_token(0xB8)), "");
  EXPECT_EQ(s.push(byte_token(0x96)), "\xE4\xB8\x96");  // 世
  EXPECT_EQ(s.pending_bytes(), 0u);
  EXPECT_EQ(s.finish(), "");
}

TEST(DetokenizerStream, EmojiZwjSequenceStreamsToTheSameText) {
  const std::string text =
      "Hi \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x87\xAF\xF0\x9F\x87\xB5 \xE4\xB8\x96\xE7\x95\x8C "
      "caf\xC3\xA9";
  const auto ids = qwen().encode(text);
  StreamDetokenizer s(qwen());
  std::string streamed;
  for (std::int32_t id : ids) {
    const std::string piece = s.push(id);
    EXPECT_TRUE(utf8::is_valid(piece)) << "partial character emitted";
    streamed += piece;
  }
  streamed += s.finish();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(streamed, qwen().decode(ids));
}

TEST(DetokenizerStream, SpecialTokensAreKeptOrSkipped) {
  const auto ids = qwen().encode("<|im_start|>assistant\n<think>x</think><|im_end|>");
  StreamDetokenizer keep(qwen());
  StreamDetokenizer skip(qwen(), /*skip_special=*/true);
  std::string kept, skipped;
  for (std::int32_t id : ids) {
    kept += keep.push(id);
    skipped += skip.push(id);
  }
  EXPECT_EQ(kept, "<|im_start|>assistant\n<think>x</think><|im_end|>");
  EXPECT_EQ(skipped, "assistant\n<think>x</think>");  // <think> is not special in Qwen3
}

// A chat format's markers stay text while the other special tokens are skipped.
TEST(DetokenizerStream, KeptSpecialTokensStayWhenSkipping) {
  const auto ids = qwen().encode("<|im_start|>assistant\nx<|im_end|>");
  const std::int32_t im_start = *qwen().token_id("<|im_start|>");
  StreamDetokenizer s(qwen(), /*skip_special=*/true, {im_start});
  std::string text;
  for (std::int32_t id : ids) text += s.push(id);
  EXPECT_EQ(text, "<|im_start|>assistant\nx");
}

TEST(DetokenizerStream, InvalidBytesBecomeReplacementCharacters) {
  const std::string r(utf8::kReplacement);
  StreamDetokenizer s(qwen());
  EXPECT_EQ(s.push(byte_token(0xFF)), r);  // can never start a character
  EXPECT_EQ(s.push(byte_token(0xE4)), "");
  EXPECT_EQ(s.push(byte_token('a')), r + "a");  // E4 cut short by 'a'
  EXPECT_EQ(s.push(byte_token(0xF0)), "");
  EXPECT_EQ(s.push(byte_token(0x9F)), "");
  EXPECT_EQ(s.finish(), r);                 // truncated at the end: one U+FFFD
  EXPECT_EQ(s.push(byte_token('b')), "b");  // reusable after finish()
  EXPECT_EQ(s.push(999999), "");            // an id without a token: nothing
}

TEST(DetokenizerStream, ConcatenationEqualsDecodeForRandomSlices) {
  const auto ids = qwen().encode(
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81 "
      "\xD0\x9F\xD1\x80\xD0\xB8"
      "\xD0\xB2\xD0\xB5\xD1\x82 \xF0\x9F\x98\x80\xF0\x9F\x98\x81 a\xCC\x81 "
      "\xE0\xA4\xA8\xE0\xA4\xAE");
  for (std::size_t begin = 0; begin < ids.size(); ++begin) {
    for (std::size_t end = begin; end <= ids.size(); ++end) {
      const std::span<const std::int32_t> slice(ids.data() + begin, end - begin);
      StreamDetokenizer s(qwen());
      std::string streamed;
      for (std::int32_t id : slice) streamed += s.push(id);
      streamed += s.finish();
      ASSERT_EQ(streamed, qwen().decode(slice)) << "slice " << begin << ".." << end;
    }
  }
}

}  // namespace
}  // namespace md
