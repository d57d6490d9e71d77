// SmolLM2-135M-Instruct's tokenizer and chat template read from its GGUF, compared with
// Hugging Face transformers' GGUF tokenizer (tests/goldens/smollm2, made by
// tools/gen_gguf_tokenizer_goldens.py) over the corpus of tools/gen_tokenizer_goldens.py.
#include "models/common/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../text/tokenizer_golden_util.h"
#include "io/gguf_file.h"

namespace md {
namespace {

std::string smollm2_path() {
  const char* env = std::getenv("MD_SMOLLM2_GGUF");
  return env != nullptr ? env
                        : std::string(MD_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// 64-bit FNV-1a over the ids as consecutive little-endian 4-byte unsigned integers, the hash that
// tools/gen_gguf_tokenizer_goldens.py stores for the corpus's "long" documents instead of their
// ids (written out, those would push the golden past 3 MB). The bytes are taken by shifting so
// the result does not depend on this machine's byte order.
std::uint64_t fnv1a_ids(const std::vector<std::int32_t>& ids) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const std::int32_t id : ids) {
    const auto u = static_cast<std::uint32_t>(id);
    for (int shift = 0; shift < 32; shift += 8) {
      h = (h ^ ((u >> shift) & 0xFFU)) * 0x100000001b3ULL;
    }
  }
  return h;
}

std::string hex16(std::uint64_t v) {
  return fmt::format("{:016x}", v);
}

// The golden's hashes are only worth comparing if both sides hash the same bytes the same way.
// The script checks its FNV-1a against published vectors ("", "a", "foobar"); these values are
// that function's output for the same byte strings fed in as ids.
TEST(SmolLm2GgufGoldenHash, IsFnv1aOverLittleEndianIds) {
  EXPECT_EQ(hex16(fnv1a_ids({})), "cbf29ce484222325");                        // the offset basis
  EXPECT_EQ(hex16(fnv1a_ids({0x64636261})), "fc179f83ee0724dd");              // "abcd"
  EXPECT_EQ(hex16(fnv1a_ids({0x64636261, 0x68676665})), "25da8c1836a8d66d");  // "abcdefgh"
  EXPECT_EQ(hex16(fnv1a_ids({49151})), "c2eba9667783e29b");                   // ff bf 00 00
}

// A golden line that stores a count and a hash instead of ids (see the script's docstring).
struct HashedLine {
  std::size_t index;  // into the corpus
  std::string cat;
  std::string input;
  std::size_t count;
  std::string fnv1a;
  std::size_t count_plain;
  std::string fnv1a_plain;
};

// Encodes each hashed line's input and compares the count and hash with those under the
// parsed or plain keys. There are no expected ids to diff against, so a mismatch prints
// megadecode's count and first ids; rerunning the script with the ids written out for that index
// shows where transformers differs. Returns the number of mismatches; `encoded` gets megadecode's
// ids for every line.
std::size_t compare_hashed(const Tokenizer& tok, const std::vector<HashedLine>& lines,
                           bool parse_special, const std::string& label,
                           std::vector<std::vector<std::int32_t>>& encoded) {
  std::size_t same = 0;
  std::size_t reported = 0;
  encoded.clear();
  for (const auto& line : lines) {
    auto got = tok.encode(line.input, parse_special);
    const std::size_t want_count = parse_special ? line.count : line.count_plain;
    const std::string& want_hash = parse_special ? line.fnv1a : line.fnv1a_plain;
    const std::string got_hash = hex16(fnv1a_ids(got));
    if (got.size() == want_count && got_hash == want_hash) {
      ++same;
    } else if (reported++ < 5) {
      fmt::print(
          "  [{}] corpus string {} ({} bytes) \"{}\"\n    expected: {} ids, FNV-1a {}\n"
          "    got:      {} ids, FNV-1a {}\n    first ids: {}\n",
          line.cat, line.index, line.input.size(), testing::escape(line.input), want_count,
          want_hash, got.size(), got_hash, testing::show_ids(tok, got, 0, 20));
    }
    encoded.push_back(std::move(got));
  }
  fmt::print("{}: {}/{} strings identical (count + FNV-1a)\n", label, same, lines.size());
  std::fflush(stdout);
  return lines.size() - same;
}

class SmolLm2Gguf : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = smollm2_path();
    if (!std::filesystem::exists(path_)) {
      GTEST_SKIP() << "SmolLM2 GGUF not found at " << path_
                   << " (set MD_SMOLLM2_GGUF, or run scripts/setup to fetch it into .models/)";
    }
    file_ = std::make_unique<GgufFile>(path_);
  }
  std::string path_;
  std::unique_ptr<GgufFile> file_;
};

TEST_F(SmolLm2Gguf, MetadataIsRead) {
  const GgufTokenizerData d = read_gguf_tokenizer_data(*file_);
  EXPECT_EQ(d.model, "gpt2");
  EXPECT_EQ(d.pre, "smollm");
  EXPECT_EQ(d.tokens.size(), 49152u);
  EXPECT_EQ(d.merges.size(), 48900u);
  EXPECT_EQ(d.token_types.size(), 49152u);
  EXPECT_EQ(d.bos, 1);
  EXPECT_EQ(d.eos, 2);
  EXPECT_EQ(d.unk, 0);
  EXPECT_EQ(d.pad, 2);
  EXPECT_FALSE(d.add_bos);
}

TEST_F(SmolLm2Gguf, EncodeMatchesTransformersOverTheCorpus) {
  const auto tok = load_gguf_tokenizer(*file_);
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->token_id("<|im_start|>"), 1);
  EXPECT_TRUE(tok->is_special(2));
  const auto corpus = testing::read_jsonl(testing::golden_path("corpus_encode.jsonl"));
  const auto golden =
      testing::read_jsonl(std::string(MD_SOURCE_DIR) + "/tests/goldens/smollm2/gguf_encode.jsonl");
  ASSERT_FALSE(corpus.empty());
  // One line per corpus string, in order: the whole corpus is compared, long documents included.
  ASSERT_EQ(golden.size(), corpus.size())
      << "tests/goldens/smollm2 does not match the corpus; rerun "
      << "tools/gen_gguf_tokenizer_goldens.py";
  std::vector<nlohmann::json> rows;  // lines with the ids written out
  std::vector<HashedLine> hashed;    // lines with a count and FNV-1a hash of the ids
  for (std::size_t n = 0; n < golden.size(); ++n) {
    const auto& g = golden[n];
    const auto i = g["i"].get<std::size_t>();
    ASSERT_EQ(i, n) << "golden lines out of corpus order";
    const std::string hex = corpus[i]["hex"].get<std::string>();
    ASSERT_EQ(hex.size() / 2, g["len"].get<std::size_t>())
        << "corpus string " << i << " changed since tests/goldens/smollm2 was made; rerun "
        << "tools/gen_gguf_tokenizer_goldens.py";
    if (g.contains("ids")) {
      nlohmann::json row = {{"cat", corpus[i]["cat"]}, {"hex", hex}, {"ids", g["ids"]}};
      row["ids_plain"] = g.contains("ids_plain") ? g["ids_plain"] : g["ids"];
      rows.push_back(std::move(row));
    } else {
      ASSERT_TRUE(g.contains("count") && g.contains("fnv1a"))
          << "golden line " << n << " has neither ids nor count + fnv1a";
      // The plain pair is only written where it differs from the parsed one.
      const bool plain = g.contains("count_plain");
      hashed.push_back({i, corpus[i]["cat"].get<std::string>(), testing::unhex(hex),
                        g["count"].get<std::size_t>(), g["fnv1a"].get<std::string>(),
                        g[plain ? "count_plain" : "count"].get<std::size_t>(),
                        g[plain ? "fnv1a_plain" : "fnv1a"].get<std::string>()});
    }
  }
  // Both kinds must be present, or a regenerated golden silently dropped a kind of check.
  ASSERT_GE(rows.size(), 10000u);
  ASSERT_GE(hashed.size(), 100u);
  EXPECT_EQ(testing::compare_encodings(*tok, rows, "ids", true, "smollm2 gguf"), 0u);
  EXPECT_EQ(testing::compare_encodings(*tok, rows, "ids_plain", false, "smollm2 gguf plain"), 0u);
  std::vector<std::vector<std::int32_t>> long_ids;
  std::vector<std::vector<std::int32_t>> long_ids_plain;
  EXPECT_EQ(compare_hashed(*tok, hashed, true, "smollm2 gguf long", long_ids), 0u);
  EXPECT_EQ(compare_hashed(*tok, hashed, false, "smollm2 gguf long plain", long_ids_plain), 0u);
  // Decode then encode gives the same ids for almost every string. Not for all: where a byte
  // without a token was dropped, the remaining bytes can decode to U+FFFD, which encodes anew
  // (4 strings of this corpus at the time of writing). For the long documents megadecode's own ids
  // stand in for transformers', which the hash comparison above has just shown to be the same.
  std::size_t round_trips = 0;
  for (const auto& row : rows) {
    const auto ids = row["ids"].get<std::vector<std::int32_t>>();
    if (tok->encode(tok->decode(ids)) == ids) ++round_trips;
  }
  for (const auto& ids : long_ids) {
    if (tok->encode(tok->decode(ids)) == ids) ++round_trips;
  }
  const std::size_t total = rows.size() + long_ids.size();
  fmt::print("smollm2 gguf: {}/{} decode/encode round trips\n", round_trips, total);
  EXPECT_GE(round_trips + 10, total);
}

TEST_F(SmolLm2Gguf, ChatTemplateRendersChatMl) {
  const auto tmpl = load_gguf_chat_template(*file_);
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_EQ(tmpl->bos_token(), "<|im_start|>");
  EXPECT_EQ(tmpl->eos_token(), "<|im_end|>");
  const auto messages = nlohmann::ordered_json::parse(
      R"([{"role":"user","content":"Hi there"},{"role":"assistant","content":"Hello!"}])");
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  // What jinja2 renders for SmolLM2's template (a default system turn is inserted first).
  EXPECT_EQ(tmpl->render(messages, options),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
            "Hello!<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace md
