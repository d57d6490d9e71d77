// What both block drafters' fused rounds (dflash2_step.h, dspark_step.h) lower the same way: the
// new context positions' features (fc then hidden_norm, their rows counted by a count register),
// the q/k/v projection whose k/v tiles also take those features as extra rows, and the window
// attention whose KV head g waits only for the tiles of its heads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/common/step_builder.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/draft_layer_weights.h"
#include "program/instruction.h"

namespace md::draft_step {

// The most context positions one round folds in: a verify step commits at most a block.
inline constexpr int64_t kMaxNewContextRows = 8;

// The new context rows' buffers: their taps ([rows][taps · hidden]), their features written in
// the context's storage, their keys and values ([rows][kv_dim]), and the count register of rows.
struct ContextRows {
  program::BufferId taps = program::kNoBuffer, features = program::kNoBuffer;
  program::BufferId k = program::kNoBuffer, v = program::kNoBuffer;
  program::RowCount count = 0;
};

// The context positions a round's program computes itself: their key and value storage
// ([kMaxNewContextRows][kv_dim] each), the program's buffers for them (taps and features rebound
// every round; counted by count register 0), and the round they were last set up for.
class NewContextRows {
 public:
  explicit NewContextRows(int64_t kv_dim);

  // Registers the buffers with the program being built; returns the ids its lowering reads.
  const ContextRows& bind(StepBuilder& b);

  // A round's inputs: the context extended by `new_rows` (<= kMaxNewContextRows) positions whose
  // taps `new_taps` holds, after the K/V of the older positions the window reaches — the
  // `window_keys` before the block — were made present; the block rows, `anchor` then `mask`, at
  // the positions after them; the count register and the taps and feature buffers rebound.
  void begin(program::Program& program, DraftContext& context, int32_t anchor, int32_t mask,
             int64_t block_rows, const float* new_taps, int64_t new_rows, int64_t window_keys);
  // After the program ran: records the new positions' K/V in the context's rings.
  void finish();

 private:
  std::vector<float> k_, v_;
  ContextRows ids_;
  DraftContext* context_ = nullptr;
  int64_t first_new_ = 0, start_ = 0;  // the last round's first new position and first block row
};

// fc tiles over the new rows' taps into their features; returns the instruction.
int32_t context_fc(StepBuilder& b, const DraftContextSpec& spec, const ContextRows& rows);
// hidden_norm of every new row in place, after `fc`: their features are final after it.
int32_t context_norm(StepBuilder& b, const DraftContextSpec& spec, const ContextRows& rows,
                     int32_t fc, int64_t max_rows);

// The block rows' q/k/v (`q`, `k`, `v` buffers) from `input`, the new context rows entering
// k_proj and v_proj as their features (no norm) into rows.k / rows.v.
struct Qkv {
  program::BufferId q = program::kNoBuffer, k = program::kNoBuffer, v = program::kNoBuffer;
  int64_t q_dim = 0, kv_dim = 0;
};
int32_t qkv(StepBuilder& b, std::string name, program::RowInput input,
            const DraftLayerWeights& layer, const Qkv& out, const ContextRows& rows,
            std::vector<program::Dependency> waits);

// `op` with a task per KV head g waiting for the `qkv` tiles of its query heads, key and value.
int32_t window_attention(StepBuilder& b, std::string name,
                         const program::WindowAttentionOperands& op, int32_t qkv);

}  // namespace md::draft_step
