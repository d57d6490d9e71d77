// The synthetic DFlash2 drafter of `megadecode bench --draft synthetic`: its shape is the
// published drafter's when scaled to the published target, it fits the synthetic targets it is
// made for, and it runs through the same code as a loaded drafter (fused round bitwise equal to
// the reference forward).
#include "models/drafters/dflash2/dflash2_synthetic.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/qwen38/qwen38_synthetic.h"

namespace md {
namespace {

TEST(DFlash2Synthetic, ScaledToThePublishedTargetItIsThePublishedShape) {
  // Qwen3.8-27B: hidden 5120, 64 layers, vocabulary 248320 (real-configs.md §1c).
  TargetView target;
  target.hidden_size = 5120;
  target.num_layers = 64;
  target.vocab_size = 248320;
  DFlash2Config c = synthetic_dflash2_config(target);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 17408);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int64_t>{5, 19, 33, 47, 61}));
  EXPECT_EQ(c.mask_token_id, 248070);
  EXPECT_EQ(c.kernel_projection_rows(), 1280);  // 5120 → 1280, as published
  EXPECT_EQ(c.selector_rank, 256);
  EXPECT_EQ(c.selector_top_k, 16);
  EXPECT_EQ(c.sliding_window, 2048);
  EXPECT_EQ(c.block_size, 8);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DFlash2Synthetic, DraftsForTheSyntheticTargetOnBothPaths) {
  ModelRunOptions run;
  run.threads = 2;
  std::unique_ptr<Qwen38Model> model = make_synthetic_qwen38("qwen38-tiny", run);
  TargetView target = model->target_view();
  auto fused = make_synthetic_dflash2(target, 2);
  auto reference =
      make_synthetic_dflash2(target, 2, DFlash2Options{.executor = ExecutorKind::kReference});
  const DFlash2Config& c = fused->config();
  for (int64_t id : c.target_layer_ids) EXPECT_LT(id, target.num_layers);
  EXPECT_EQ(c.num_attention_heads % c.num_key_value_heads, 0);

  std::vector<float> taps(static_cast<std::size_t>(c.fc_in_features()));
  int64_t committed = 0;
  for (int round = 0; round < 6; ++round) {
    int64_t rows = 1 + round % 8;
    std::vector<float> chunk;
    for (int64_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < taps.size(); ++i) {
        chunk.push_back(static_cast<float>((committed + r) % 7) * 0.1f - 0.3f +
                        static_cast<float>(i % 5) * 0.01f);
      }
    }
    fused->append_context(chunk, rows);
    reference->append_context(chunk, rows);
    committed += rows;
    auto anchor = static_cast<int32_t>(round * 37 % c.vocab_size);
    DraftProposal a = fused->propose(anchor, 0.0f, {}, true);
    DraftProposal b = reference->propose(anchor, 0.0f, {}, true);
    EXPECT_TRUE(same_bits(a.logits, b.logits)) << "round " << round;
    EXPECT_EQ(a.tokens, b.tokens) << "round " << round;
    ASSERT_EQ(a.tokens.size(), 7u);
  }
}

}  // namespace
}  // namespace md
