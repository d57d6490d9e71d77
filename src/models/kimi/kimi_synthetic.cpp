#include "models/kimi/kimi_synthetic.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/mxfp4.h"
#include "models/common/config_files.h"
#include "models/common/synthetic_weights.h"

namespace md {

namespace {

constexpr char kTiny[] = "kimi-k3-tiny";
constexpr char kLayer[] = "kimi-k3-layer";
constexpr char kEdges[] = "kimi-k3-edges";

// The geometry one shape varies; the rest is the published model's (real-configs §2).
struct Shape {
  int64_t layers = 0, block = 0, hidden = 0, vocab = 0, dense = 0, first_dense = 0;
  std::vector<int64_t> mla_layers;  // 1-based, as full_attn_layers
  int64_t kda_heads = 0, kda_dim = 0, heads = 0, q_lora = 0, kv_lora = 0, nope = 0, shared_key = 0;
  int64_t experts = 0, top_k = 0, expert_width = 0, latent = 0, shared_experts = 0;
  int64_t max_positions = 0, eos = 0;
};

Shape shape_of(const std::string& name) {
  if (name == kTiny) {
    return {.layers = 10,
            .block = 4,
            .hidden = 256,
            .vocab = 512,
            .dense = 512,
            .first_dense = 1,
            .mla_layers = {4, 8, 10},
            .kda_heads = 4,
            .kda_dim = 32,
            .heads = 4,
            .q_lora = 64,
            .kv_lora = 32,
            .nope = 32,
            .shared_key = 16,
            .experts = 16,
            .top_k = 4,
            .expert_width = 64,
            .latent = 128,
            .shared_experts = 2,
            .max_positions = 4096,
            .eos = 501};
  }
  if (name == kLayer) {
    return {.layers = 3,
            .block = 12,
            .hidden = 7168,
            .vocab = 163840,
            .dense = 33792,
            .first_dense = 1,
            .mla_layers = {3},
            .kda_heads = 96,
            .kda_dim = 128,
            .heads = 96,
            .q_lora = 1536,
            .kv_lora = 512,
            .nope = 128,
            .shared_key = 64,
            .experts = 896,
            .top_k = 16,
            .expert_width = 3072,
            .latent = 3584,
            .shared_experts = 2,
            .max_positions = 1048576,
            .eos = 163586};
  }
  if (name == kEdges) {
    return {.layers = 5,
            .block = 1,
            .hidden = 96,
            .vocab = 300,
            .dense = 128,
            .first_dense = 1,
            .mla_layers = {1, 4},
            .kda_heads = 3,
            .kda_dim = 16,
            .heads = 3,
            .q_lora = 32,
            .kv_lora = 24,
            .nope = 16,
            .shared_key = 8,
            .experts = 8,
            .top_k = 3,
            .expert_width = 32,
            .latent = 64,
            .shared_experts = 0,
            .max_positions = 4096,
            .eos = 299};
  }
  fail("unknown synthetic shape '{}' (known: {}, {}, {})", name, kTiny, kLayer, kEdges);
}

nlohmann::json config_json(const Shape& s) {
  nlohmann::json kda_layers = nlohmann::json::array();
  for (int64_t l = 1; l <= s.layers; ++l) {
    if (std::find(s.mla_layers.begin(), s.mla_layers.end(), l) == s.mla_layers.end()) {
      kda_layers.push_back(l);
    }
  }
  const nlohmann::json text = {{"model_type", "kimi_linear"},
                               {"hidden_act", "situ"},
                               {"activation_situ_beta", 4.0},
                               {"activation_situ_linear_beta", 25.0},
                               {"hidden_size", s.hidden},
                               {"intermediate_size", s.dense},
                               {"num_hidden_layers", s.layers},
                               {"vocab_size", s.vocab},
                               {"attn_res_block_size", s.block},
                               {"num_attention_heads", s.heads},
                               {"num_key_value_heads", s.heads},
                               {"q_lora_rank", s.q_lora},
                               {"kv_lora_rank", s.kv_lora},
                               {"qk_nope_head_dim", s.nope},
                               {"qk_rope_head_dim", s.shared_key},
                               {"v_head_dim", s.nope},
                               {"mla_use_nope", true},
                               {"mla_use_output_gate", true},
                               {"linear_attn_config",
                                {{"full_attn_layers", s.mla_layers},
                                 {"kda_layers", kda_layers},
                                 {"head_dim", s.kda_dim},
                                 {"num_heads", s.kda_heads},
                                 {"short_conv_kernel_size", 4},
                                 {"gate_lower_bound", -5.0},
                                 {"use_full_rank_gate", true}}},
                               {"first_k_dense_replace", s.first_dense},
                               {"moe_layer_freq", 1},
                               {"num_experts", s.experts},
                               {"num_experts_per_token", s.top_k},
                               {"num_shared_experts", s.shared_experts},
                               {"moe_intermediate_size", s.expert_width},
                               {"routed_expert_hidden_size", s.latent},
                               {"latent_moe_use_norm", true},
                               {"moe_renormalize", true},
                               {"moe_router_activation_func", "sigmoid"},
                               {"routed_scaling_factor", 1.0},
                               {"topk_method", "noaux_tc"},
                               {"use_grouped_topk", true},
                               {"num_expert_group", 1},
                               {"topk_group", 1},
                               {"max_position_embeddings", s.max_positions},
                               {"num_nextn_predict_layers", 0},
                               {"rms_norm_eps", 1e-5},
                               {"tie_word_embeddings", false},
                               {"eos_token_id", s.eos}};
  const nlohmann::json quantization = {{"quant_method", "compressed-tensors"},
                                       {"format", "mxfp4-pack-quantized"},
                                       {"quantization_status", "compressed"},
                                       {"config_groups",
                                        {{"group_0",
                                          {{"targets", {"Linear"}},
                                           {"weights",
                                            {{"num_bits", 4},
                                             {"type", "float"},
                                             {"strategy", "group"},
                                             {"group_size", 32},
                                             {"symmetric", true},
                                             {"scale_dtype", "torch.uint8"}}}}}}}};
  return {{"model_type", "kimi_k3"},
          {"tie_word_embeddings", false},
          {"quantization_config", quantization},
          {"text_config", text}};
}

class KimiWeightMaker {
 public:
  KimiWeightMaker(const KimiK3Config& c, SyntheticWeights& arena) : c_(c), arena_(arena) {}

  KimiLayerWeights layer(int64_t l) {
    const int64_t h = c_.hidden_size;
    KimiLayerWeights w;
    w.input_norm = arena_.centred_scale(h, 0.05f);
    w.post_attention_norm = arena_.centred_scale(h, 0.05f);
    w.attention_mix = arena_.values(h, 0.05f);
    w.mlp_mix = arena_.values(h, 0.05f);
    const int64_t attention_width = c_.layer_kind(l) == KimiLayerKind::kKda
                                        ? c_.kda_channels()
                                        : c_.num_attention_heads * c_.v_head_dim;
    w.g_proj = matrix(attention_width, h);
    w.o_proj = matrix(h, attention_width);
    if (c_.layer_kind(l) == KimiLayerKind::kKda) {
      w.kda = kda();
    } else {
      w.mla = mla();
    }
    if (c_.is_moe_layer(l)) {
      w.moe = moe();
    } else {
      w.dense_gate = matrix(c_.intermediate_size, h);
      w.dense_up = matrix(c_.intermediate_size, h);
      w.dense_down = matrix(h, c_.intermediate_size);
    }
    return w;
  }

 private:
  kernels::WeightMatrix matrix(int64_t rows, int64_t cols) {
    return kernels::WeightMatrix::of(arena_.matrix(rows, cols));
  }

  KimiKdaWeights kda() {
    const int64_t h = c_.hidden_size, ch = c_.kda_channels(), d = c_.kda_head_dim;
    const int64_t taps = c_.short_conv_kernel;
    KimiKdaWeights w;
    w.q_proj = matrix(ch, h);
    w.k_proj = matrix(ch, h);
    w.v_proj = matrix(ch, h);
    w.q_conv = arena_.values(ch * taps, 0.5f);
    w.k_conv = arena_.values(ch * taps, 0.5f);
    w.v_conv = arena_.values(ch * taps, 0.5f);
    w.f_a_proj = matrix(d, h);
    w.f_b_proj = matrix(ch, d);
    w.b_proj = matrix(c_.kda_num_heads, h);
    for (float a : arena_.values(c_.kda_num_heads, 0.5f)) w.exp_a_log.push_back(std::exp(a));
    w.dt_bias = arena_.values(ch, 0.5f);
    w.o_norm = arena_.centred_scale(d, 0.05f);
    return w;
  }

  KimiMlaWeights mla() {
    const int64_t h = c_.hidden_size, heads = c_.num_attention_heads;
    KimiMlaWeights w;
    w.q_a_proj = matrix(c_.q_lora_rank, h);
    w.q_a_norm = arena_.centred_scale(c_.q_lora_rank, 0.05f);
    w.q_b_proj = matrix(heads * c_.mla_qk_head_dim(), c_.q_lora_rank);
    w.kv_a_proj = matrix(c_.kv_lora_rank + c_.qk_rope_head_dim, h);
    w.kv_a_norm = arena_.centred_scale(c_.kv_lora_rank, 0.05f);
    w.kv_b_proj = matrix(heads * (c_.qk_nope_head_dim + c_.v_head_dim), c_.kv_lora_rank);
    return w;
  }

  // Random codes and scale bytes 120…127 (×2^-7 … ×1): weights near 1/sqrt(fan_in) in size.
  kernels::WeightMatrix mxfp4(int64_t rows, int64_t cols) {
    const std::uint8_t* codes = arena_.bytes(rows * cols / 2, 0x00, 0xff);
    const std::uint8_t* scales = arena_.bytes(rows * cols / kernels::kMxfp4Group, 120, 0x07);
    return kernels::WeightMatrix::of(kernels::Mxfp4Matrix{codes, scales, rows, cols});
  }

  KimiMoeWeights moe() {
    const int64_t h = c_.hidden_size, lat = c_.routed_expert_hidden_size;
    const int64_t inter = c_.moe_intermediate_size, shared = c_.shared_intermediate_size();
    KimiMoeWeights w;
    w.router = matrix(c_.num_experts, h);
    w.router_bias = arena_.values(c_.num_experts, 0.01f);
    w.latent_down = matrix(lat, h);
    w.latent_up = matrix(h, lat);
    w.latent_norm = arena_.centred_scale(lat, 0.05f);
    if (shared > 0) {
      w.shared_gate = matrix(shared, h);
      w.shared_up = matrix(shared, h);
      w.shared_down = matrix(h, shared);
    }
    const int64_t slots = std::min(c_.num_experts, kSyntheticKimiExpertSlots);
    std::vector<kernels::WeightMatrix> gate, up, down;
    for (int64_t e = 0; e < slots; ++e) {
      gate.push_back(mxfp4(inter, lat));
      up.push_back(mxfp4(inter, lat));
      down.push_back(mxfp4(lat, inter));
    }
    for (int64_t e = 0; e < c_.num_experts; ++e) {
      w.experts.gate.push_back(gate[static_cast<std::size_t>(e % slots)]);
      w.experts.up.push_back(up[static_cast<std::size_t>(e % slots)]);
      w.experts.down.push_back(down[static_cast<std::size_t>(e % slots)]);
    }
    return w;
  }

  const KimiK3Config& c_;
  SyntheticWeights& arena_;
};

}  // namespace

std::vector<std::string> synthetic_kimi_shapes() {
  return {kTiny, kLayer, kEdges};
}

bool is_synthetic_kimi_shape(const std::string& shape) {
  return shape == kTiny || shape == kLayer || shape == kEdges;
}

KimiK3Config synthetic_kimi_config(const std::string& shape) {
  return parse_kimi_k3_config(config_files_from_json(config_json(shape_of(shape)), shape));
}

std::unique_ptr<KimiModel> make_synthetic_kimi(const std::string& shape,
                                               const ModelRunOptions& options) {
  KimiK3Config config = synthetic_kimi_config(shape);
  KimiModel::check_run_options(options, "synthetic " + shape);
  ThreadPool pool(options.threads);
  KimiK3Weights w;
  SyntheticWeights arena(w.owned, pool);
  KimiWeightMaker maker(config, arena);
  w.lm_head = kernels::WeightMatrix::of(arena.matrix(config.vocab_size, config.hidden_size));
  w.embed_tokens = w.lm_head;
  for (int64_t l = 0; l < config.num_layers; ++l) w.layers.push_back(maker.layer(l));
  w.final_norm = arena.centred_scale(config.hidden_size, 0.05f);
  w.output_mix = arena.values(config.hidden_size, 0.05f);
  const std::size_t resident = arena.bytes_handed_out();
  return std::make_unique<KimiModel>("synthetic " + shape, std::move(config), std::move(w),
                                     resident, options);
}

}  // namespace md
