#include "models/drafters/dflash2/dflash2_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/common/recording_binder.h"

namespace md {

namespace {

constexpr char kFamily[] = "DFlash2DraftModel";

DFlash2ConvWeights bind_conv(const DFlash2Config& c, RecordingBinder& bind, const std::string& p) {
  DFlash2ConvWeights w;
  w.base_kernel = bind.bf16(p + "base_kernel", {2, c.conv_kernel_size, c.hidden_size});
  w.kernel_projection =
      bind.matrix(p + "kernel_projection.weight", c.kernel_projection_rows(), c.hidden_size);
  return w;
}

DFlash2LayerWeights bind_layer(const DFlash2Config& c, RecordingBinder& bind,
                               const std::string& p) {
  DFlash2LayerWeights w;
  bind_draft_layer(bind, p, draft_layer_shape(c), w);
  w.attention_conv = bind_conv(c, bind, p + "attention_conv.");
  w.mlp_conv = bind_conv(c, bind, p + "mlp_conv.");
  return w;
}

}  // namespace

DFlash2Weights bind_dflash2_weights(const DFlash2Config& c, const Checkpoint& checkpoint) {
  DFlash2Weights w;
  RecordingBinder bind(checkpoint, kFamily, w.owned);
  int64_t h = c.hidden_size;
  w.fc = bind.matrix("fc.weight", h, c.fc_in_features());
  w.hidden_norm = bind.bf16("hidden_norm.weight", {h});
  w.norm = bind.bf16("norm.weight", {h});
  // The codebooks are stored without a ".weight" suffix (they are parameters, not modules).
  w.selector.hidden_projection =
      bind.matrix("candidate_selector.hidden_projection.weight", c.selector_rank, h);
  w.selector.predecessor_codebook =
      bind.matrix("candidate_selector.predecessor_codebook", c.vocab_size, c.selector_rank);
  w.selector.successor_codebook =
      bind.matrix("candidate_selector.successor_codebook", c.vocab_size, c.selector_rank);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    w.layers.push_back(bind_layer(c, bind, fmt::format("layers.{}.", l)));
  }
  bind.refuse_unbound();
  return w;
}

DraftContextSpec dflash2_context_spec(const DFlash2Config& config, const DFlash2Weights& weights) {
  DraftContextSpec spec{.family = "DFlash2",
                        .hidden_size = config.hidden_size,
                        .num_taps = config.num_taps(),
                        .kv_heads = config.num_key_value_heads,
                        .head_dim = config.head_dim,
                        .window = config.sliding_window,
                        .eps = static_cast<float>(config.rms_norm_eps),
                        .fc = &weights.fc,
                        .hidden_norm = weights.hidden_norm,
                        .layers = {}};
  for (const DFlash2LayerWeights& layer : weights.layers)
    spec.layers.push_back(context_layer(layer));
  return spec;
}

void set_matmul_inputs(DFlash2Weights& weights, kernels::MatmulInputs inputs) {
  auto tag = [inputs](std::initializer_list<kernels::Bf16Matrix*> matrices) {
    for (kernels::Bf16Matrix* m : matrices) m->inputs = inputs;
  };
  tag({&weights.fc, &weights.selector.hidden_projection, &weights.selector.predecessor_codebook,
       &weights.selector.successor_codebook});
  for (DFlash2LayerWeights& l : weights.layers) {
    tag({&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj,
         &l.attention_conv.kernel_projection, &l.mlp_conv.kernel_projection});
  }
}

}  // namespace md
