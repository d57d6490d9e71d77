// SmolLM2-135M-Instruct's tokenizer and chat template read from its GGUF, compared with
// Hugging Face transformers' GGUF tokenizer (tests/goldens/smollm2, made by
// tools/gen_gguf_tokenizer_goldens.py) over the corpus of tools/gen_tokenizer_goldens.py.
#include "models/common/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "../text/tokenizer_golden_util.h"
#include "io/gguf_file.h"

namespace md {
namespace {

std::string smollm2_path() {
  const char* env = std::getenv("MD_SMOLLM2_GGUF");
  return env != nullptr ? env
                        : std::string(MD_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
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
  ASSERT_GE(golden.size(), 10000u);
  std::vector<nlohmann::json> rows;
  for (const auto& g : golden) {
    const auto i = g["i"].get<std::size_t>();
    ASSERT_LT(i, corpus.size());
    const std::string hex = corpus[i]["hex"].get<std::string>();
    ASSERT_EQ(hex.size() / 2, g["len"].get<std::size_t>())
        << "corpus string " << i << " changed since tests/goldens/smollm2 was made; rerun "
        << "tools/gen_gguf_tokenizer_goldens.py";
    nlohmann::json row = {{"cat", corpus[i]["cat"]}, {"hex", hex}, {"ids", g["ids"]}};
    row["ids_plain"] = g.contains("ids_plain") ? g["ids_plain"] : g["ids"];
    rows.push_back(std::move(row));
  }
  EXPECT_EQ(testing::compare_encodings(*tok, rows, "ids", true, "smollm2 gguf"), 0u);
  EXPECT_EQ(testing::compare_encodings(*tok, rows, "ids_plain", false, "smollm2 gguf plain"), 0u);
  // Decode then encode gives the same ids for almost every string. Not for all: where a byte
  // without a token was dropped, the remaining bytes can decode to U+FFFD, which encodes anew
  // (4 strings of this corpus at the time of writing).
  std::size_t round_trips = 0;
  for (const auto& row : rows) {
    const auto ids = row["ids"].get<std::vector<std::int32_t>>();
    if (tok->encode(tok->decode(ids)) == ids) ++round_trips;
  }
  fmt::print("smollm2 gguf: {}/{} decode/encode round trips\n", round_trips, rows.size());
  EXPECT_GE(round_trips + 10, rows.size());
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
