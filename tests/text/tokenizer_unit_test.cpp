// Unit tests of the tokenizer building blocks: UTF-8 repair, the byte-level alphabet, NFC,
// added-token matching, the BPE merge loop, and the errors for unsupported tokenizer.json files.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <utf8proc.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/file_util.h"
#include "base/utf8.h"
#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text/tokenizer_added_tokens.h"
#include "text/tokenizer_hf.h"
#include "text/unicode_normalizer.h"

namespace md {
namespace {

using Json = nlohmann::json;

std::string qwen_json_path() {
  return std::string(MD_QWEN3_TOKENIZER_DIR) + "/tokenizer.json";
}

// Expects `f` to throw md::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string_view> parts) {
  try {
    f();
    ADD_FAILURE() << "expected md::Error";
  } catch (const Error& e) {
    for (std::string_view part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << part << "\"";
    }
  }
}

TEST(TokenizerUtf8, RepairReplacesMaximalInvalidSubpartsLikePython) {
  const std::string r(utf8::kReplacement);
  EXPECT_EQ(utf8::repair("abc\xC3\xA9"), "abc\xC3\xA9");
  EXPECT_EQ(utf8::repair("\xC3"), r);      // truncated 2-byte
  EXPECT_EQ(utf8::repair("\xE2\x82"), r);  // truncated 3-byte: one U+FFFD
  EXPECT_EQ(utf8::repair("\xE2\x82x"), r + "x");
  EXPECT_EQ(utf8::repair("\xE0\x80\xAF"), r + r + r);  // overlong: E0 then 80 invalid
  EXPECT_EQ(utf8::repair("\xED\xA0\x80"), r + r + r);  // surrogate
  EXPECT_EQ(utf8::repair("\xF0\x9F\x98"
                         "a"),
            r + "a");
  EXPECT_EQ(utf8::repair("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(utf8::repair("\xC0\x80"), r + r);
  EXPECT_EQ(utf8::repair("\xFF\xFE"), r + r);
  EXPECT_EQ(utf8::repair("\x80\xBF"), r + r);
  EXPECT_EQ(utf8::repair("\xE1\x80\xE1\x80"), r + r);
  EXPECT_TRUE(utf8::is_valid("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8::is_valid("\xF0\x9F\x98"));
}

TEST(TokenizerByteLevel, TableMatchesGpt2Alphabet) {
  EXPECT_EQ(byte_level::byte_to_char(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_level::byte_to_char('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_level::byte_to_char(0x00), U'\u0100');
  EXPECT_EQ(byte_level::byte_to_char(0x7F), U'\u0121');
  EXPECT_EQ(byte_level::byte_to_char(0xAD), U'\u0143');
  EXPECT_EQ(byte_level::byte_to_char('A'), U'A');
  EXPECT_EQ(byte_level::byte_to_char(0xE9), U'\u00E9');
  for (int b = 0; b < 256; ++b) {
    const auto back =
        byte_level::char_to_byte(byte_level::byte_to_char(static_cast<std::uint8_t>(b)));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, b);
  }
  EXPECT_EQ(byte_level::encode(" hi\n"), "\xC4\xA0hi\xC4\x8A");
  EXPECT_EQ(byte_level::decode("\xC4\xA0hello"), " hello");
  EXPECT_FALSE(byte_level::decode("\xE2\x88\x91").has_value());  // '∑' is not in the alphabet
  EXPECT_FALSE(byte_level::char_to_byte(U' ').has_value());      // space is stored as 'Ġ'
}

TEST(TokenizerNfc, ComposesReordersAndLeavesStableTextAlone) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                                 // e + acute -> é
  EXPECT_EQ(nfc("\xE2\x84\xA6"), "\xCE\xA9");                              // OHM SIGN -> OMEGA
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  EXPECT_EQ(nfc("a\xCC\x81\xCC\xA3"), "\xE1\xBA\xA1\xCC\x81");             // reordered: ạ + acute
  EXPECT_EQ(nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");  // ﬁ: compatibility only
  EXPECT_FALSE(nfc_may_change("plain ASCII, caf\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87"));
  EXPECT_TRUE(nfc_may_change("x\xCC\x81"));
}

// The chunked fast path must equal utf8proc's NFC over the whole string.
TEST(TokenizerNfc, ChunkedNormalizationEqualsWholeStringNormalization) {
  const char32_t pool[] = {U'a',      U'e',      U' ',          U'\u0301', U'\u0323',
                           U'\u0300', U'\u4E2D', U'\u1100',     U'\u1161', U'\u11A8',
                           U'\uAC00', U'\u2126', U'\u00E9',     U'\u0B47', U'\u0B3E',
                           U'\u3099', U'\u304B', U'\U0001F600', U'\u0344', U'\u0F73'};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) utf8::append(s, pool[rng() % std::size(pool)]);
    utf8proc_uint8_t* whole = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
    const std::string expected(reinterpret_cast<const char*>(whole));
    std::free(whole);
    ASSERT_EQ(nfc(s), expected) << "input " << s;
  }
}

AddedToken added(std::string content, std::int32_t id, bool special = true, bool lstrip = false,
                 bool rstrip = false) {
  AddedToken t;
  t.content = std::move(content);
  t.id = id;
  t.special = special;
  t.lstrip = lstrip;
  t.rstrip = rstrip;
  return t;
}

std::string render(const std::vector<TextSegment>& segments) {
  std::string out;
  for (const auto& s : segments) {
    if (s.id >= 0) {
      out += fmt::format("[{}]", s.id);
    } else {
      out += fmt::format("({})", s.text);
    }
  }
  return out;
}

TEST(TokenizerAddedTokens, LeftmostLongestNonOverlapping) {
  AddedTokenMatcher m({added("<a>", 1), added("<a>b", 2), added("b<c>", 3), added("<c>", 4)});
  std::vector<TextSegment> out;
  m.split("x<a>b<c>y<a><a", false, out);
  EXPECT_EQ(render(out), "(x)[2][4](y)[1](<a)");
  out.clear();
  m.split("no tokens here", false, out);
  EXPECT_EQ(render(out), "(no tokens here)");
  out.clear();
  m.split("", false, out);
  EXPECT_TRUE(out.empty());
}

TEST(TokenizerAddedTokens, SkippedSpecialMatchConsumesItsText) {
  // As HF with encode_special_tokens: "<|s|>" matches first and is left as text, so the
  // non-special "s|" inside it is not looked for; a free-standing "s|" still matches.
  AddedTokenMatcher m({added("<|s|>", 1, true), added("s|", 2, false)});
  std::vector<TextSegment> out;
  m.split("<|s|> s|", true, out);
  EXPECT_EQ(render(out), "(<|s|> )[2]");
  out.clear();
  m.split("<|s|> s|", false, out);
  EXPECT_EQ(render(out), "[1]( )[2]");
}

TEST(TokenizerAddedTokens, LstripAndRstripSwallowUnicodeWhitespace) {
  AddedTokenMatcher m({added("<L>", 1, true, true, false), added("<R>", 2, true, false, true)});
  std::vector<TextSegment> out;
  m.split(
      "a \t<L>b<R> \xE3\x80\x80"
      "c",
      false, out);
  EXPECT_EQ(render(out), "(a)[1](b)[2](c)");
  EXPECT_EQ(out[1].text, " \t<L>");
  EXPECT_EQ(out[3].text, "<R> \xE3\x80\x80");
  out.clear();
  m.split("<R> <L>", false, out);  // lstrip never reaches back into the previous match
  EXPECT_EQ(render(out), "[2][1]");
}

// Straightforward O(n^2) BPE used as the reference for the optimized loops.
std::vector<std::int32_t> naive_bpe(std::string_view piece, const HfBpeData& d) {
  std::vector<std::int32_t> ids;
  for (char c : piece) ids.push_back(d.byte_ids[static_cast<std::uint8_t>(c)]);
  while (ids.size() > 1) {
    std::size_t best = 0;
    BpeMerge best_merge;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const BpeMerge m = d.merges.find(ids[i], ids[i + 1]);
      if (m.rank < best_merge.rank) {
        best_merge = m;
        best = i;
      }
    }
    if (!best_merge.valid()) break;
    ids[best] = best_merge.id;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  return ids;
}

TEST(TokenizerBpe, ScanAndHeapAgreeWithNaiveMerging) {
  const HfBpeData d = parse_hf_tokenizer_json(read_text_file(qwen_json_path()), "qwen3");
  const auto merge_of = [&](const BpeSymbol& l, const BpeSymbol& r) {
    return d.merges.find(l.id, r.id);
  };
  const auto byte_id = [&](std::uint8_t b) { return d.byte_ids[b]; };
  std::mt19937 rng(11);
  const std::string alphabet = "  aaabbeehinorst\n\t.,'0123\xC3\xA9\xE4\xB8\xAD";
  std::vector<BpeSymbol> symbols;
  for (int i = 0; i < 2000; ++i) {
    std::string piece;
    const std::size_t n = 1 + rng() % (i % 10 == 0 ? 400 : 60);
    for (std::size_t k = 0; k < n; ++k) piece += alphabet[rng() % alphabet.size()];
    const auto expected = naive_bpe(piece, d);
    for (int strategy = 0; strategy < 2; ++strategy) {
      bpe_init_symbols(piece, byte_id, symbols);
      if (strategy == 0) {
        bpe_merge_scan(symbols, merge_of);
      } else {
        bpe_merge_heap(symbols, merge_of);
      }
      std::vector<std::int32_t> got;
      for (std::int32_t s = 0; s >= 0; s = symbols[s].next) got.push_back(symbols[s].id);
      ASSERT_EQ(got, expected) << (strategy == 0 ? "scan" : "heap") << " on \"" << piece << "\"";
    }
  }
}

TEST(TokenizerBpe, PairRankTableKeepsLaterDuplicateLikeHf) {
  PairRankTable t;
  t.insert(1, 2, {5, 10});
  t.insert(1, 2, {7, 11});
  for (int i = 0; i < 1000; ++i) t.insert(i + 100, i, {static_cast<std::uint32_t>(i), i});
  EXPECT_EQ(t.find(1, 2).rank, 7u);
  EXPECT_EQ(t.find(1, 2).id, 11);
  EXPECT_EQ(t.find(599, 499).id, 499);
  EXPECT_FALSE(t.find(2, 1).valid());
}

// ---- a small synthetic tokenizer.json ----

Json tiny_tokenizer_json() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab["\xC4\xA0w"] = 260;  // " w"
  vocab["lo"] = 261;
  Json j;
  j["version"] = "1.0";
  j["added_tokens"] = Json::array({{{"id", 300},
                                    {"content", "<|end|>"},
                                    {"special", true},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"normalized", false},
                                    {"single_word", false}},
                                   {{"id", 301},
                                    {"content", "<think>"},
                                    {"special", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"normalized", false},
                                    {"single_word", false}}});
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"},
                {"vocab", vocab},
                {"merges", Json::array({"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "l o"})}};
  return j;
}

std::unique_ptr<Tokenizer> tiny(const Json& j) {
  return load_hf_tokenizer_from_json(j.dump(), "tiny.json");
}

TEST(TokenizerHf, TinyVocabularyEncodesDecodesAndAnswersQueries) {
  const auto tok = tiny(tiny_tokenizer_json());
  EXPECT_EQ(tok->encode("hello world"), (std::vector<std::int32_t>{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok->encode("hello<|end|><think>"), (std::vector<std::int32_t>{259, 300, 301}));
  // Not parsing specials: <|end|> is text, the non-special <think> is still matched.
  const auto plain = tok->encode("<|end|><think>", false);
  EXPECT_EQ(plain.back(), 301);
  EXPECT_EQ(tok->decode(plain, false), "<|end|><think>");
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{259, 300, 301}, true), "hello<think>");
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{259, 299, 5000, -1}),
            "hello");  // no token: skipped
  EXPECT_EQ(tok->vocab_size(), 302);
  EXPECT_TRUE(tok->is_special(300));
  EXPECT_FALSE(tok->is_special(301));
  EXPECT_FALSE(tok->is_special(299));
  EXPECT_EQ(tok->token_id("\xC4\xA0w"), 260);
  EXPECT_EQ(tok->token_id("<|end|>"), 300);
  EXPECT_FALSE(tok->token_id("nope").has_value());
  EXPECT_EQ(tok->piece(260), "\xC4\xA0w");
  EXPECT_EQ(tok->token_bytes(260), " w");
  EXPECT_EQ(tok->piece(299), "");
  // NFC: e + combining acute is encoded as the composed é (bytes C3 A9).
  EXPECT_EQ(tok->encode("e\xCC\x81"), (std::vector<std::int32_t>{0xC3, 0xA9}));
}

TEST(TokenizerHf, InvalidUtf8IsRepairedNotFatal) {
  const auto tok = tiny(tiny_tokenizer_json());
  const auto ids = tok->encode(
      "a\xFF"
      "b\xE2\x82");
  EXPECT_EQ(tok->decode(ids),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST(TokenizerHf, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  Json j = tiny_tokenizer_json();
  j["model"]["vocab"]["wor"] = 262;
  EXPECT_EQ(tiny(j)->encode("wor"), (std::vector<std::int32_t>{'w', 'o', 'r'}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(tiny(j)->encode("wor"), (std::vector<std::int32_t>{262}));
}

// HF's BPE without an unk_token drops a character that has no token (SmolLM2's vocabulary lacks
// 21 bytes, so its goldens depend on this), and the neighbours then merge as if adjacent.
TEST(TokenizerHf, MissingByteTokenIsDroppedAsInHf) {
  Json j = tiny_tokenizer_json();
  j["model"]["vocab"].erase("z");
  const auto tok = tiny(j);
  EXPECT_EQ(tok->encode("zebra"), tok->encode("ebra"));
  EXPECT_EQ(tok->encode("ezbra"), tok->encode("ebra"));
  EXPECT_TRUE(tok->encode("z").empty());
  EXPECT_EQ(tok->encode("hezllo"), (std::vector<std::int32_t>{259}));
}

TEST(TokenizerHfErrors, UnsupportedOrMalformedFilesAreNamed) {
  expect_error([] { load_hf_tokenizer_from_json("{not json", "bad.json"); },
               {"bad.json", "not valid JSON"});
  Json j = tiny_tokenizer_json();
  j.erase("model");
  expect_error([&] { tiny(j); }, {"tiny.json", "no \"model\""});
  j = tiny_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  expect_error([&] { tiny(j); }, {"tiny.json", "model type 'WordPiece'"});
  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error([&] { tiny(j); }, {"normalizer 'Lowercase'"});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", Json::array({{{"type", "NFC"}}, {{"type", "NFKC"}}})}};
  expect_error([&] { tiny(j); }, {"normalizer 'NFKC'"});
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error([&] { tiny(j); }, {"pre_tokenizer 'Whitespace'"});
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", Json::array({{{"type", "Split"},
                                                        {"pattern", {{"Regex", "a"}}},
                                                        {"behavior", "Removed"},
                                                        {"invert", false}},
                                                       {{"type", "ByteLevel"}}})}};
  expect_error([&] { tiny(j); }, {"behavior 'Removed'"});
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Isolated"}};
  expect_error([&] { tiny(j); }, {"no ByteLevel step"});
  j = tiny_tokenizer_json();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error([&] { tiny(j); }, {"decoder 'WordPiece'"});
  j = tiny_tokenizer_json();
  j["added_tokens"][0]["single_word"] = true;
  expect_error([&] { tiny(j); }, {"<|end|>", "single_word"});
  j = tiny_tokenizer_json();
  j["model"]["merges"].push_back("x yz");
  expect_error([&] { tiny(j); }, {"merge #6", "missing from the vocabulary"});
  j = tiny_tokenizer_json();
  j["model"]["byte_fallback"] = true;
  expect_error([&] { tiny(j); }, {"byte_fallback"});
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", Json::array({{{"type", "Split"},
                                                        {"pattern", {{"Regex", "(a"}}},
                                                        {"behavior", "Isolated"},
                                                        {"invert", false}},
                                                       {{"type", "ByteLevel"}}})}};
  expect_error([&] { tiny(j); }, {"does not compile", "(a"});
}

TEST(TokenizerLoad, MissingFilesAreNamed) {
  expect_error([] { load_hf_tokenizer("/nonexistent/dir/tokenizer.json"); },
               {"/nonexistent/dir/tokenizer.json", "not found"});
  expect_error([] { load_tokenizer("/nonexistent/model"); }, {"/nonexistent/model"});
  const auto dir = std::filesystem::temp_directory_path() /
                   ("md_tokenizer_empty_dir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  expect_error([&] { load_tokenizer(dir.string()); },
               {dir.string(), "tokenizer.json", "tiktoken.model"});
  std::filesystem::remove_all(dir);
}

TEST(TokenizerLoad, QwenDirectoryLoadsTheHfTokenizer) {
  const auto tok = load_tokenizer(std::string(MD_QWEN3_TOKENIZER_DIR) + "");
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok->token_id("<|endoftext|>"), 151643);
  EXPECT_TRUE(tok->is_special(151645));
  EXPECT_FALSE(tok->is_special(151667));  // <think> is an added, non-special token
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<std::int32_t>{9707, 1879}));
  EXPECT_EQ(tok->decode(tok->encode("<|im_start|>user\n\xE4\xBD\xA0\xE5\xA5\xBD<|im_end|>")),
            "<|im_start|>user\n\xE4\xBD\xA0\xE5\xA5\xBD<|im_end|>");
}

// Encoding shares the regex scratch pool and keeps per-thread caches: results must not depend on
// which thread encodes what, or in which order.
TEST(TokenizerThreads, ConcurrentEncodingMatchesSerialEncoding) {
  const auto tok = load_tokenizer(std::string(MD_QWEN3_TOKENIZER_DIR) + "");
  const char* parts[] = {"Hello",
                         " world",
                         "'s",
                         "\n\n",
                         "  ",
                         "\xE4\xB8\x96\xE7\x95\x8C",
                         "<|im_end|>",
                         "12345",
                         "\xF0\x9F\x98\x80",
                         "e\xCC\x81",
                         "def f(x):\n    return x",
                         "\xFF"};
  std::mt19937 rng(3);
  std::vector<std::string> texts(400);
  for (auto& t : texts) {
    for (int k = 0; k < 30; ++k) t += parts[rng() % std::size(parts)];
  }
  std::vector<std::vector<std::int32_t>> serial;
  for (const auto& t : texts) serial.push_back(tok->encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::size_t k = (i * 7 + static_cast<std::size_t>(w) * 101) % texts.size();
        if (tok->encode(texts[k]) != serial[k]) ++mismatches[w];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace md
