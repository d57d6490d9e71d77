#include "models/drafters/dspark/dspark_weights.h"

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/common/recording_binder.h"

namespace md {

namespace {

constexpr char kFamily[] = "dspark";

// The drafter's own [rows, hidden] table, else the target's of the same shape.
kernels::WeightMatrix own_or_target(RecordingBinder& bind, const std::string& name, int64_t rows,
                                    int64_t hidden, const kernels::WeightMatrix& target) {
  if (bind.contains(name)) return kernels::WeightMatrix::of(bind.matrix(name, rows, hidden));
  if (target.data == nullptr || target.rows != rows || target.cols != hidden) {
    fail("{}: the checkpoint has no {} [{}, {}] and the target lends none of that shape", kFamily,
         name, rows, hidden);
  }
  return target;
}

// The block embeds its tokens by rows of the table: refused at load when its format has none.
void check_embeddable(const kernels::WeightMatrix& table) {
  std::vector<float> row(static_cast<std::size_t>(table.cols));
  if (!kernels::row_to_f32(table, 0, row.data())) {
    fail("{}: the embedding table is stored as {}, which cannot be read row by row", kFamily,
         table.format_name());
  }
}

// speculators' d2t: draft id d stands for target id d + d2t[d]; t2d (optional) marks the target
// ids that have a draft id. Each must be a one-to-one map into the target's vocabulary.
std::vector<int32_t> draft_to_target(RecordingBinder& bind, const DSparkConfig& c) {
  const int64_t draft = c.draft_vocab_size, vocab = c.vocab_size;
  std::vector<int64_t> offsets(static_cast<std::size_t>(draft));
  std::memcpy(offsets.data(), bind.bytes("d2t", DType::kI64, {draft}),
              offsets.size() * sizeof(int64_t));
  std::vector<uint8_t> taken(static_cast<std::size_t>(vocab), 0);
  std::vector<int32_t> map;
  for (int64_t d = 0; d < draft; ++d) {
    const int64_t target = d + offsets[static_cast<std::size_t>(d)];
    if (target < 0 || target >= vocab || taken[static_cast<std::size_t>(target)]) {
      fail(
          "{}: d2t[{}] = {} maps draft id {} to {}, {} (the map must be one-to-one into the "
          "target's {} ids)",
          kFamily, d, offsets[static_cast<std::size_t>(d)], d, target,
          target < 0 || target >= vocab ? "outside the vocabulary" : "taken twice", vocab);
    }
    taken[static_cast<std::size_t>(target)] = 1;
    map.push_back(static_cast<int32_t>(target));
  }
  if (bind.contains("t2d")) {
    const uint8_t* t2d = bind.bytes("t2d", DType::kBool, {vocab});
    for (int64_t t = 0; t < vocab; ++t) {
      if ((t2d[t] != 0) != (taken[static_cast<std::size_t>(t)] != 0)) {
        fail("{}: t2d[{}] = {} disagrees with d2t (which {} target id {})", kFamily, t, t2d[t] != 0,
             taken[static_cast<std::size_t>(t)] ? "maps a draft id to" : "leaves out", t);
      }
    }
  }
  return map;
}

}  // namespace

DSparkWeights bind_dspark_weights(const DSparkConfig& c, const Checkpoint& checkpoint,
                                  const TargetView& target) {
  DSparkWeights w;
  RecordingBinder bind(checkpoint, kFamily, w.owned);
  const int64_t h = c.hidden_size, v = c.vocab_size, draft = c.draft_vocab_size;
  w.embed_tokens = own_or_target(bind, "embed_tokens.weight", v, h, target.embed_tokens);
  check_embeddable(w.embed_tokens);
  if (draft != v) {
    // A reduced head is the drafter's own (speculators saves it); the target's has other rows.
    w.lm_head = kernels::WeightMatrix::of(bind.matrix("lm_head.weight", draft, h));
    w.draft_to_target = draft_to_target(bind, c);
  } else {
    w.lm_head = own_or_target(bind, "lm_head.weight", v, h, target.lm_head);
  }
  w.fc = bind.matrix("fc.weight", h, c.fc_in_features());
  w.hidden_norm = bind.bf16("hidden_norm.weight", {h});
  w.norm = bind.bf16("norm.weight", {h});
  w.markov_w1 = bind.matrix("markov_head.markov_w1.weight", v, c.markov_rank);
  w.markov_w2 = bind.matrix("markov_head.markov_w2.weight", draft, c.markov_rank);
  if (c.enable_confidence_head) {
    const int64_t in = c.confidence_head_with_markov ? h + c.markov_rank : h;
    w.confidence = bind.matrix("confidence_head.proj.weight", 1, in);
    w.confidence_bias = bind.f32_vector("confidence_head.proj.bias", 1);
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    bind_draft_layer(bind, fmt::format("layers.{}.", l), draft_layer_shape(c),
                     w.layers.emplace_back());
  }
  bind.refuse_unbound();
  return w;
}

DraftContextSpec dspark_context_spec(const DSparkConfig& config, const DSparkWeights& weights) {
  DraftContextSpec spec{.family = "DSpark",
                        .hidden_size = config.hidden_size,
                        .num_taps = config.num_taps(),
                        .kv_heads = config.num_key_value_heads,
                        .head_dim = config.head_dim,
                        .window = config.sliding_window,
                        .eps = static_cast<float>(config.rms_norm_eps),
                        .fc = &weights.fc,
                        .hidden_norm = weights.hidden_norm,
                        .layers = {}};
  for (const DSparkLayerWeights& layer : weights.layers)
    spec.layers.push_back(context_layer(layer));
  return spec;
}

}  // namespace md
