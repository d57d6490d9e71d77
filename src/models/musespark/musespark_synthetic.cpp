#include "models/musespark/musespark_synthetic.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/nvfp4.h"
#include "models/common/config_files.h"
#include "models/common/synthetic_weights.h"

namespace md {

namespace {

constexpr char kTiny[] = "muse-spark-tiny";
constexpr char kLayer[] = "muse-spark-layer";

// The geometry one shape varies; everything else is the published model's (§1).
struct Shape {
  int64_t layers = 0, hidden = 0, moe_hidden = 0, moe_intermediate = 0, experts = 0, top_k = 0;
  int64_t heads = 0, kv_heads = 0, vocab = 0, window = 0, max_positions = 0;
  std::vector<int64_t> eos;
};

Shape shape_of(const std::string& name) {
  if (name == kTiny) {
    return {.layers = 6,
            .hidden = 512,
            .moe_hidden = 256,
            .moe_intermediate = 96,
            .experts = 16,
            .top_k = 4,
            .heads = 8,
            .kv_heads = 2,
            .vocab = 1024,
            .window = 16,
            .max_positions = 4096,
            .eos = {1, 2}};
  }
  if (name == kLayer) {
    return {.layers = 2,
            .hidden = 8192,
            .moe_hidden = 4096,
            .moe_intermediate = 4096,
            .experts = 256,
            .top_k = 8,
            .heads = 128,
            .kv_heads = 16,
            .vocab = 202048,
            .window = 2048,
            .max_positions = 1048576,
            .eos = {200001, 200008}};
  }
  fail("unknown synthetic shape '{}' (known: {}, {})", name, kTiny, kLayer);
}

nlohmann::json text_config(const Shape& s) {
  nlohmann::json layer_types = nlohmann::json::array(), thetas = nlohmann::json::array();
  for (int64_t l = 0; l < s.layers; ++l) {
    const bool full = l % 4 == 1;  // the published pattern (§1)
    layer_types.push_back(full ? "full_attention" : "sliding_attention");
    thetas.push_back(full ? 0.0 : 500000.0);
  }
  nlohmann::json text = {
      {"num_hidden_layers", s.layers},
      {"hidden_size", s.hidden},
      {"moe_hidden_size", s.moe_hidden},
      {"moe_intermediate_size", s.moe_intermediate},
      {"num_local_experts", s.experts},
      {"num_experts_per_tok", s.top_k},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"head_dim", 64},
      {"vocab_size", s.vocab},
      {"sliding_window", s.window},
      {"rope_parameters", {{"rope_theta", 500000.0}, {"rope_type", "default"}}},
      {"layer_types", layer_types},
      {"layer_rope_theta", thetas},
      {"mlp_layer_types", std::vector<std::string>(static_cast<std::size_t>(s.layers), "sparse")},
      {"rms_norm_eps", 1e-5},
      {"post_norm_eps", 1e-8},
      {"residual_gate_temperature", 0.3},
      {"qk_scale_factor", 5.4730064863875},
      {"output_multiplier", 0.17677669529663687},
      {"final_logit_softcapping", 20.0},
      {"attention_bias", false},
      {"hidden_act", "silu"},
      {"num_shared_experts", 0},
      {"routed_scaling_factor", 1.0},
      {"tie_word_embeddings", false},
      {"eos_token_id", s.eos},
      {"max_position_embeddings", s.max_positions}};
  return {{"model_type", "muse_spark"}, {"tie_word_embeddings", false}, {"text_config", text}};
}

// TINY: NVFP4 on every layer but the first and the last, as the vendor checkpoint has them;
// the two-layer slice: bf16 on the sliding layer 0, NVFP4 on the full layer 1 (§11 item 7).
bool nvfp4_layer(const MuseSparkConfig& c, int64_t layer) {
  if (c.num_layers == 2) return layer == 1;
  return layer > 0 && layer + 1 < c.num_layers;
}

// The published model's experts do not fit in this machine's memory; see
// kSyntheticMuseExpertSlots.
int64_t stored_experts(const MuseSparkConfig& c) {
  return c.num_experts > kSyntheticMuseExpertSlots ? kSyntheticMuseExpertSlots : c.num_experts;
}

class MuseWeightMaker {
 public:
  MuseWeightMaker(const MuseSparkConfig& c, SyntheticWeights& arena) : c_(c), arena_(arena) {}

  MuseLayerWeights layer(int64_t l) {
    const int64_t h = c_.hidden_size, hm = c_.moe_hidden_size;
    MuseLayerWeights w;
    w.input_norm = arena_.centred_scale(h, 0.05f);
    w.q_proj = matrix(c_.q_dim(), h);
    w.k_proj = matrix(c_.kv_dim(), h);
    w.v_proj = matrix(c_.kv_dim(), h);
    w.gate_proj = matrix(c_.q_dim(), h);
    w.o_proj = matrix(h, c_.q_dim());
    w.attention_gate = gate(h);
    w.pre_ffn_norm = arena_.centred_scale(h, 0.05f);
    w.post_ffn_norm = arena_.centred_scale(h, 0.05f);
    w.ffn_gate = gate(h);
    w.router = arena_.values(c_.num_experts * h, 1.0f / std::sqrt(static_cast<float>(h)));
    w.router_bias = arena_.values(c_.num_experts, 0.01f);
    w.pre_expert_proj = matrix(hm, h);
    w.pre_expert_norm = arena_.centred_scale(hm, 0.05f);
    w.post_expert_norm = arena_.centred_scale(hm, 0.05f);
    w.post_expert_proj = matrix(h, hm);
    w.experts = nvfp4_layer(c_, l) ? nvfp4_experts() : bf16_experts();
    return w;
  }

 private:
  MuseResidualGate gate(int64_t n) {
    return residual_gate_coefficients(arena_.values(n, 1.0f), c_.residual_gate_temperature,
                                      kResidualGateFloor);
  }
  kernels::WeightMatrix matrix(int64_t rows, int64_t cols) {
    return kernels::WeightMatrix::of(arena_.matrix(rows, cols));
  }

  MuseExperts bf16_experts() {
    const int64_t slots = stored_experts(c_), inter = c_.moe_intermediate_size;
    const int64_t hm = c_.moe_hidden_size;
    MuseExperts e;
    e.stored_experts = slots;
    e.gate_up = arena_.matrix(slots * 2 * inter, hm).data;
    e.down = arena_.matrix(slots * hm, inter).data;
    return e;
  }

  // Random codes, block scales of 0.5..0.94 (e4m3 bytes 0x30..0x37) and a global scale that
  // brings the weights to about 1/sqrt(fan_in), as the bf16 matrices are.
  MuseExperts nvfp4_experts() {
    const int64_t slots = stored_experts(c_), inter = c_.moe_intermediate_size;
    const int64_t hm = c_.moe_hidden_size, block = kernels::kNvfp4Block;
    MuseExperts e;
    e.nvfp4 = true;
    e.stored_experts = slots;
    e.gate_up_codes = arena_.bytes(slots * 2 * inter * hm / 2, 0x00, 0xff);
    e.gate_up_scales = arena_.bytes(slots * 2 * inter * hm / block, 0x30, 0x07);
    e.down_codes = arena_.bytes(slots * hm * inter / 2, 0x00, 0xff);
    e.down_scales = arena_.bytes(slots * hm * inter / block, 0x30, 0x07);
    const auto global = [](int64_t fan_in) {
      return 0.25f / std::sqrt(static_cast<float>(fan_in));
    };
    e.gate_up_global.assign(static_cast<std::size_t>(2 * slots), global(hm));
    e.down_global.assign(static_cast<std::size_t>(slots), global(inter));
    return e;
  }

  const MuseSparkConfig& c_;
  SyntheticWeights& arena_;
};

}  // namespace

std::vector<std::string> synthetic_musespark_shapes() {
  return {kTiny, kLayer};
}

bool is_synthetic_musespark_shape(const std::string& shape) {
  return shape == kTiny || shape == kLayer;
}

MuseSparkConfig synthetic_musespark_config(const std::string& shape) {
  ConfigFiles files = config_files_from_json(text_config(shape_of(shape)), shape);
  files.quant_path = shape + " hf_quant_config.json";
  files.quant = {{"producer", {{"name", "modelopt"}}},
                 {"quantization",
                  {{"quant_algo", "NVFP4"}, {"group_size", 16}, {"exclude_modules", {"lm_head"}}}}};
  MuseSparkConfig c = parse_musespark_config(files);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    c.expert_formats[static_cast<std::size_t>(l)] =
        nvfp4_layer(c, l) ? WeightFormat::kNVFP4 : WeightFormat::kBF16;
  }
  return c;
}

std::unique_ptr<MuseSparkModel> make_synthetic_musespark(const std::string& shape,
                                                         const ModelRunOptions& options,
                                                         const MuseSparkOptions& muse) {
  MuseSparkConfig config = synthetic_musespark_config(shape);
  // Refuse what the model cannot run before generating gigabytes of weights.
  MuseSparkModel::check_run_options(options, "synthetic " + shape);
  ThreadPool pool(options.threads);
  MuseSparkWeights w;
  SyntheticWeights arena(w.owned, pool);
  MuseWeightMaker maker(config, arena);
  w.lm_head = kernels::WeightMatrix::of(arena.matrix(config.vocab_size, config.hidden_size));
  w.embed_tokens = w.lm_head;
  for (int64_t l = 0; l < config.num_layers; ++l) w.layers.push_back(maker.layer(l));
  w.final_norm = std::vector<float>(static_cast<std::size_t>(config.hidden_size), 1.0f);
  const std::size_t resident = arena.bytes_handed_out();
  return std::make_unique<MuseSparkModel>("synthetic " + shape, std::move(config), std::move(w),
                                          resident, options, muse);
}

}  // namespace md
