// Weight packs (models/weight_pack.h) on Llama: run from its pack, a model gives bitwise the
// logits of the same ranks cutting their slices at load: the tiny-llama fixture (bf16 from a
// Hugging Face directory, column slices copied at load) and SmolLM2-135M Q4_1 (GGUF column
// slices that are strided views at load and dense rows in the pack), on 2 and 3 ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../support/weight_pack_support.h"

namespace md {
namespace {

namespace fs = std::filesystem;

std::vector<int32_t> prompt_of(int length, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < length; ++i) ids.push_back(static_cast<int32_t>((i * 104729 + 11) % vocab));
  return ids;
}

TEST(LlamaWeightPack, TinyLlamaRunsBitwiseAsSlicingAtLoad) {
  const std::string model = (fs::path(MD_GOLDEN_DIR) / "llama_hf" / "tiny-llama").string();
  testing::expect_pack_round_trip(model, 2, prompt_of(9, 512), 3);
}

TEST(LlamaWeightPack, SmolLm2RunsBitwiseAsSlicingAtLoad) {
  const std::string model = std::string(MD_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is not installed (scripts/setup fetches it)";
  for (int ranks : {2, 3}) testing::expect_pack_round_trip(model, ranks, prompt_of(5, 49152), 2);
}

}  // namespace
}  // namespace md
