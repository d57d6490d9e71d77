#include "models/kimi/kimi_config.h"

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

constexpr char kModel[] = "kimi_k3";
constexpr int64_t kMxfp4Group = 32;

ConfigReader text_config_of(const ConfigReader& root) {
  if (!root.has("text_config")) return root;
  root.expect("model_type", "kimi_k3");
  ConfigReader text = root.object("text_config");
  text.expect("model_type", "kimi_linear");
  return text;
}

// Settings the reference loader requires (kimi/__init__.py Config.from_checkpoint): the kernels
// implement exactly these, so they must be present with these values.
void check_required_settings(const ConfigReader& root, const ConfigReader& text,
                             const ConfigReader& linear) {
  constexpr auto kRefuse = ConfigReader::Absent::kRefuse;
  text.expect("mla_use_nope", true, kRefuse);
  text.expect("mla_use_output_gate", true, kRefuse);
  text.expect("latent_moe_use_norm", true, kRefuse);
  text.expect("moe_renormalize", true, kRefuse);
  linear.expect("use_full_rank_gate", true, kRefuse);
  text.expect("moe_router_activation_func", "sigmoid", kRefuse);
  text.expect("hidden_act", "situ", kRefuse);
  text.expect("first_k_dense_replace", 1, kRefuse);
  text.expect("moe_layer_freq", 1, kRefuse);
  text.expect("num_expert_group", 1, kRefuse);
  text.expect("routed_scaling_factor", 1.0, kRefuse);
  text.expect("topk_method", "noaux_tc");
  text.expect("topk_group", 1);
  text.expect("tie_word_embeddings", false);
  root.expect("tie_word_embeddings", false);
}

// kda_layers ∪ full_attn_layers (1-based) must partition 1..L.
std::vector<KimiLayerKind> read_layer_types(const ConfigReader& linear, int64_t num_layers) {
  std::vector<std::optional<KimiLayerKind>> kinds(static_cast<std::size_t>(num_layers));
  auto place = [&](const char* key, KimiLayerKind kind) {
    std::vector<int64_t> layers = linear.integer_list(key);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (layers[i] < 1 || layers[i] > num_layers) {
        linear.reject_element(key, i,
                              fmt::format("layer number outside 1..{} (the lists are "
                                          "1-based)",
                                          num_layers));
      }
      auto& slot = kinds[static_cast<std::size_t>(layers[i] - 1)];
      if (slot) {
        linear.reject_element(key, i, "layer listed twice across kda_layers and full_attn_layers");
      }
      slot = kind;
    }
  };
  place("kda_layers", KimiLayerKind::kKda);
  place("full_attn_layers", KimiLayerKind::kMla);
  std::vector<KimiLayerKind> result;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (!kinds[i]) {
      linear.reject("kda_layers", fmt::format("layer {} (1-based) is in neither kda_layers nor "
                                              "full_attn_layers",
                                              i + 1));
    }
    result.push_back(*kinds[i]);
  }
  return result;
}

void read_mla(const ConfigReader& text, KimiK3Config& c) {
  c.num_attention_heads = text.positive("num_attention_heads");
  text.expect("num_key_value_heads", c.num_attention_heads);
  c.q_lora_rank = text.positive("q_lora_rank");
  c.kv_lora_rank = text.positive("kv_lora_rank");
  c.qk_nope_head_dim = text.positive("qk_nope_head_dim");
  c.qk_rope_head_dim = text.positive("qk_rope_head_dim");
  c.v_head_dim = text.positive("v_head_dim");
}

void read_kda(const ConfigReader& linear, KimiK3Config& c) {
  c.kda_num_heads = linear.positive("num_heads");
  c.kda_head_dim = linear.positive("head_dim");
  c.short_conv_kernel = linear.positive("short_conv_kernel_size");
  c.gate_lower_bound = linear.number("gate_lower_bound");
  if (!(c.gate_lower_bound < 0)) linear.reject("gate_lower_bound", "must be negative");
  c.layer_types = read_layer_types(linear, c.num_layers);
  // The KDA projections share the MLA head layout ([heads][128] channels, one g_proj/o_proj
  // shape for both layer kinds).
  if (c.kda_num_heads != c.num_attention_heads) {
    linear.reject("num_heads",
                  fmt::format("must equal num_attention_heads = {}", c.num_attention_heads));
  }
  if (c.kda_head_dim != c.qk_nope_head_dim || c.kda_head_dim != c.v_head_dim) {
    linear.reject("head_dim", fmt::format("must equal qk_nope_head_dim = {} and v_head_dim = {}",
                                          c.qk_nope_head_dim, c.v_head_dim));
  }
}

void read_ffn(const ConfigReader& text, KimiK3Config& c) {
  c.intermediate_size = text.positive("intermediate_size");
  c.first_k_dense_replace = text.integer("first_k_dense_replace");
  c.num_experts = text.positive("num_experts");
  const char* top_k_key =
      text.has("num_experts_per_token") ? "num_experts_per_token" : "num_experts_per_tok";
  c.num_experts_per_token = text.positive(top_k_key);
  if (c.num_experts_per_token > c.num_experts) {
    text.reject(top_k_key, fmt::format("exceeds num_experts = {}", c.num_experts));
  }
  c.moe_intermediate_size = text.positive("moe_intermediate_size");
  c.num_shared_experts = text.integer("num_shared_experts");
  if (c.num_shared_experts < 0) text.reject("num_shared_experts", "must not be negative");
  c.routed_expert_hidden_size = text.positive("routed_expert_hidden_size");
  // MXFP4 groups run along the input axis: the latent for w1/w3, the expert width for w2.
  for (const char* key : {"routed_expert_hidden_size", "moe_intermediate_size"}) {
    if (text.integer(key) % kMxfp4Group != 0) {
      text.reject(key, fmt::format("must be a multiple of the MXFP4 group size {}", kMxfp4Group));
    }
  }
  c.situ_beta = text.positive_number("activation_situ_beta");
  c.situ_linear_beta = text.positive_number("activation_situ_linear_beta");
}

QuantizationConfig read_quantization(const ConfigReader& root, const ConfigReader& text) {
  const ConfigReader& holder = text.has("quantization_config") ? text : root;
  if (!holder.has("quantization_config")) {
    text.missing(
        "quantization_config",
        fmt::format("{} needs compressed-tensors mxfp4-pack-quantized routed experts", kModel));
  }
  return parse_mxfp4_quantization(holder.object("quantization_config"));
}

}  // namespace

KimiLayerKind KimiK3Config::layer_kind(int64_t layer) const {
  return layer_types.at(static_cast<std::size_t>(layer));
}

int64_t KimiK3Config::num_kda_layers() const {
  return static_cast<int64_t>(
      std::count(layer_types.begin(), layer_types.end(), KimiLayerKind::kKda));
}

int64_t KimiK3Config::kda_slot(int64_t layer) const {
  if (layer_kind(layer) != KimiLayerKind::kKda) fail("layer {} is not a KDA layer", layer);
  return static_cast<int64_t>(
      std::count(layer_types.begin(), layer_types.begin() + layer, KimiLayerKind::kKda));
}

int64_t KimiK3Config::mla_slot(int64_t layer) const {
  if (layer_kind(layer) != KimiLayerKind::kMla) fail("layer {} is not an MLA layer", layer);
  return static_cast<int64_t>(
      std::count(layer_types.begin(), layer_types.begin() + layer, KimiLayerKind::kMla));
}

DraftTarget KimiK3Config::draft_target() const {
  return DraftTarget{kModel, hidden_size, vocab_size, num_layers};
}

KimiK3Config parse_kimi_k3_config(const ConfigFiles& files) {
  ConfigReader root(files.config_path, files.config, kModel);
  ConfigReader text = text_config_of(root);
  ConfigReader linear = text.object("linear_attn_config");
  check_required_settings(root, text, linear);

  KimiK3Config c;
  c.hidden_size = text.positive("hidden_size");
  c.num_layers = text.positive("num_hidden_layers");
  c.vocab_size = text.positive("vocab_size");
  c.rms_norm_eps = text.positive_number("rms_norm_eps");
  c.attn_res_block_size = text.positive("attn_res_block_size");
  c.max_position_embeddings = text.positive("max_position_embeddings");
  read_mla(text, c);
  read_kda(linear, c);
  read_ffn(text, c);
  c.quantization = read_quantization(root, text);
  c.eos_token_ids = eos_token_ids(files, {&text, &root}, c.vocab_size, EosPolicy::kUnion);
  return c;
}

}  // namespace md
